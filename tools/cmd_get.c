/* progcache get: write the artifact stored under a key. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define CMD "get"

static const char usage_text[] =
    "usage: progcache get KEYHEX [--dir DIR] [-o FILE] [--max-artifact-size SIZE]\n"
    "       progcache get --entry NAME [--dir DIR] [-o FILE]\n"
    "\n"
    "Write the artifact stored under a key to FILE, or to standard output. KEYHEX\n"
    "is the key in hex (the 64 digits 'progcache key' prints, or any other key's\n"
    "bytes); the lookup counts as a hit or a miss in the statistics. --entry reads\n"
    "an entry by the file name 'progcache ls' prints instead (not counted).\n"
    "\n"
    "options:\n"
    "  --dir DIR      the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  -o, --output FILE  write to FILE instead of standard output ('-': standard\n"
    "                 output). A regular FILE is replaced once the artifact is\n"
    "                 complete (written to a temporary file beside it, then\n"
    "                 renamed); a device or a FIFO is written in place (a FIFO\n"
    "                 must have a reader); a directory, block device or socket\n"
    "                 is refused; a symbolic link is followed\n"
    "  --entry NAME   look up by entry file name (64 hex digits), not by key\n"
    "  --max-artifact-size SIZE  the largest artifact read from the cache or its\n"
    "                 remote tier (default 1G; K, M, G)\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 written; 1 no such entry (a miss), an I/O error, or standard\n"
    "output could not be written; 2 bad usage.\n";

static int write_out(const char *path, const progcache_buf *data)
{
    if (!path || !strcmp(path, "-")) {
        /* Errors show at the final flush, which main() checks. */
        fwrite(data->data, 1, data->size, stdout);
        return EXIT_OK;
    }
    tool_output out;
    int code = tool_output_open(CMD, path, &out);
    if (code)
        return code;
    code = tool_output_write(CMD, &out, data->data, data->size);
    int closed = tool_output_close(CMD, &out, code == EXIT_OK);
    return code ? code : closed;
}

int cmd_get(int argc, char **argv)
{
    const char *dir_arg = NULL, *out_path = NULL, *key_hex = NULL, *entry = NULL, *v;
    uint64_t max = PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    int r;
    for (int i = 1; i < argc; i++) {
        int c = tool_common_arg(CMD, usage_text, argc, argv, &i, &dir_arg, NULL);
        if (c == TOOL_ARG_TAKEN)
            continue;
        if (c != TOOL_ARG_OTHER)
            return c;
        if ((r = tool_flag_value(CMD, argc, argv, &i, "-o", &v)) ||
            (r = tool_flag_value(CMD, argc, argv, &i, "--output", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            out_path = v;
        } else if ((r = tool_max_size_arg(CMD, argc, argv, &i, &max))) {
            if (r < 0)
                return EXIT_USAGE;
        } else if ((r = tool_flag_value(CMD, argc, argv, &i, "--entry", &v))) {
            if (r < 0)
                return EXIT_USAGE;
            entry = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return tool_usage_error(CMD, "unknown option \"%s\" (run 'progcache get --help')",
                                    argv[i]);
        } else if (key_hex) {
            return tool_usage_error(CMD, "more than one key (\"%s\" and \"%s\")", key_hex, argv[i]);
        } else {
            key_hex = argv[i];
        }
    }
    if (!key_hex == !entry)
        return tool_usage_error(CMD, "give a KEYHEX or --entry NAME (run 'progcache get --help')");
    size_t key_len = 0;
    unsigned char *key = NULL;
    if (key_hex && tool_key_arg(CMD, key_hex, &key, &key_len))
        return EXIT_USAGE;

    char *dir = NULL;
    progcache *cache = NULL;
    progcache_file *file = NULL;
    progcache_buf data = PROGCACHE_BUF_INIT;
    int code = tool_resolve_dir(CMD, dir_arg, &dir);
    if (code)
        goto done;
    int rc;
    if (entry) {
        if ((code = tool_open_file(CMD, dir, TOOL_READ, max, &file)))
            goto done;
        rc = progcache_file_read_entry(&data, file, entry);
    } else {
        /* Writable when we may, so that the lookup is counted; a cache
         * we cannot write to is still readable. */
        tool_access mode = access(dir, W_OK) == 0 ? TOOL_WRITE : TOOL_READ;
        if ((code = tool_open_cache(CMD, dir, mode, max, &cache)))
            goto done;
        rc = progcache_get(&data, cache, key, key_len);
    }
    if (rc == PROGCACHE_ENOTFOUND) {
        code = tool_error(CMD, "no entry for %s \"%s\" in %s (a miss)", entry ? "entry" : "key",
                          entry ? entry : key_hex, dir);
        goto done;
    }
    if (rc) {
        code = tool_lib_error(CMD, rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_PROBLEMS,
                              "cannot read the entry");
        goto done;
    }
    code = write_out(out_path, &data);
done:
    progcache_buf_free(&data);
    progcache_close(cache);
    progcache_file_close(file);
    free(dir);
    free(key);
    return code;
}
