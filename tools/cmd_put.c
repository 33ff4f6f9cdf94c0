/* progcache put: store a file under a key. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "put"

static const char usage_text[] =
    "usage: progcache put KEYHEX FILE [--dir DIR] [--max-artifact-size SIZE]\n"
    "\n"
    "Store the bytes of FILE ('-': standard input) under a key, through the same\n"
    "atomic write as a program's put (temp file, fsync, rename). KEYHEX is the key\n"
    "in hex (the 64 digits 'progcache key' prints, or any other key's bytes). An\n"
    "existing entry for the key is replaced. The directory is created if missing.\n"
    "FILE may be a pipe, a FIFO or a device; it is read up to the maximum artifact\n"
    "size and refused beyond it.\n"
    "\n"
    "options:\n"
    "  --dir DIR   the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --max-artifact-size SIZE  the largest FILE accepted (default 1G; K, M, G)\n"
    "  --help      this text\n"
    "\n"
    "Exit status: 0 stored; 1 FILE cannot be read, is larger than the maximum\n"
    "artifact size, or the cache refused the put;\n"
    "2 bad usage.\n";

int cmd_put(int argc, char **argv)
{
    const char *dir_arg = NULL, *key_hex = NULL, *file = NULL;
    uint64_t max = PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    int r;
    for (int i = 1; i < argc; i++) {
        int c = tool_common_arg(CMD, usage_text, argc, argv, &i, &dir_arg, NULL);
        if (c == TOOL_ARG_TAKEN)
            continue;
        if (c != TOOL_ARG_OTHER)
            return c;
        if ((r = tool_max_size_arg(CMD, argc, argv, &i, &max))) {
            if (r < 0)
                return EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return tool_usage_error(CMD, "unknown option \"%s\" (run 'progcache put --help')",
                                    argv[i]);
        } else if (!key_hex) {
            key_hex = argv[i];
        } else if (!file) {
            file = argv[i];
        } else {
            return tool_usage_error(CMD, "unexpected argument \"%s\": give KEYHEX and FILE",
                                    argv[i]);
        }
    }
    if (!key_hex || !file)
        return tool_usage_error(CMD, "give KEYHEX and FILE (run 'progcache put --help')");
    size_t key_len = 0, size = 0;
    unsigned char *key = NULL, *data = NULL;
    if (tool_key_arg(CMD, key_hex, &key, &key_len))
        return EXIT_USAGE;
    char *dir = NULL;
    progcache *cache = NULL;
    int code = EXIT_OK;
    if ((code = tool_read_input(CMD, "FILE", file, TOOL_INPUT_STDIN, max, &data, &size)))
        goto done;
    if ((code = tool_resolve_dir(CMD, dir_arg, &dir)))
        goto done;
    if ((code = tool_open_cache(CMD, dir, TOOL_CREATE, max, &cache)))
        goto done;
    if (progcache_put(cache, key, key_len, data, size) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_PROBLEMS, "cannot store the entry");
        goto done;
    }
done:
    progcache_close(cache);
    free(dir);
    free(data);
    free(key);
    return code;
}
