/* progcache put: store a file under a key. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "put"

static const char usage_text[] =
    "usage: progcache put [options] KEYHEX FILE\n"
    "\n"
    "Store the bytes of FILE ('-': standard input) under a key, through the same\n"
    "atomic write as a program's put (temp file, fsync, rename). KEYHEX is the key\n"
    "in hex (the 64 digits 'progcache key' prints, or any other key's bytes). An\n"
    "existing entry for the key is replaced. The directory is created if missing,\n"
    "and its size cap (the setting max_size) applies.\n"
    "FILE may be a pipe, a FIFO or a device; it is read up to the maximum artifact\n"
    "size and refused beyond it.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --max-artifact-size SIZE  the largest FILE accepted (default: the setting\n"
    "                 max_artifact_size, 1G)\n"
    "  -h, --help     this text\n"
    "\n"
    "Exit status: 0 stored; 2 bad usage; 3 FILE cannot be read or is larger than\n"
    "the maximum artifact size, or the cache refused the put.\n";

int cmd_put(int argc, char **argv)
{
    static const tool_option options[] = {TOOL_MAX_ARTIFACT_SIZE_OPTION, {NULL, 0, 0}};
    const char *key_hex = NULL, *file = NULL;
    uint64_t max = 0;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, 0);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        if (c == TOOL_OPT_MAX_ARTIFACT_SIZE) {
            if (tool_max_size_value(CMD, p.arg, &max))
                return EXIT_USAGE;
        } else if (!key_hex) {
            key_hex = p.arg;
        } else if (!file) {
            file = p.arg;
        } else {
            return tool_usage_error(CMD, "unexpected argument \"%s\": give KEYHEX and FILE",
                                    p.arg);
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
    if ((code = tool_resolve_dir(CMD, p.dir, &dir)))
        goto done;
    uint64_t bound;
    if ((code = tool_input_bound(CMD, dir, max, &bound)))
        goto done;
    if ((code = tool_read_input(CMD, "FILE", file, TOOL_INPUT_STDIN, bound, &data, &size)))
        goto done;
    if ((code = tool_open_cache(CMD, dir, TOOL_CREATE, max, &cache)))
        goto done;
    if (progcache_put(cache, key, key_len, data, size) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot store the entry");
        goto done;
    }
done:
    progcache_close(cache);
    free(dir);
    free(data);
    free(key);
    return code;
}
