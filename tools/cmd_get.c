/* progcache get: write the artifact stored under a key. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define CMD "get"

static const char usage_text[] =
    "usage: progcache get [options] KEYHEX\n"
    "       progcache get [options] --entry NAME\n"
    "\n"
    "Write the artifact stored under a key to FILE, or to standard output. KEYHEX\n"
    "is the key in hex (the 64 digits 'progcache key' prints, or any other key's\n"
    "bytes); the lookup counts as a hit or a miss in the statistics. --entry reads\n"
    "an entry by the file name 'progcache ls' prints instead (not counted).\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR      the cache directory (default: $PROGCACHE_DIR, else\n"
    "                     cuda.core's)\n"
    "  -o, --output FILE  write to FILE instead of standard output ('-': standard\n"
    "                     output). A regular FILE is replaced once the artifact is\n"
    "                     complete (written to a temporary file beside it, then\n"
    "                     renamed); a device or a FIFO is written in place (a FIFO\n"
    "                     must have a reader); a directory, block device or socket\n"
    "                     is refused; a symbolic link is followed\n"
    "  -e, --entry NAME   look up by entry file name (64 hex digits), not by key\n"
    "  --max-artifact-size SIZE  the largest artifact read from the cache or its\n"
    "                     remote tier (default: the setting max_artifact_size, 1G)\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 written; 1 no such entry (a miss); 2 bad usage; 3 the cache or\n"
    "FILE could not be read or written (an I/O error, a damaged entry), or standard\n"
    "output could not be written.\n";

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
    static const tool_option options[] = {
        {"output", 'o', 1}, {"entry", 'e', 1}, TOOL_MAX_ARTIFACT_SIZE_OPTION, {NULL, 0, 0}};
    const char *out_path = NULL, *key_hex = NULL, *entry = NULL;
    uint64_t max = 0;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, 0);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        switch (c) {
        case TOOL_EXIT: return p.code;
        case 'o': out_path = p.arg; break;
        case 'e': entry = p.arg; break;
        case TOOL_OPT_MAX_ARTIFACT_SIZE:
            if (tool_max_size_value(CMD, p.arg, &max))
                return EXIT_USAGE;
            break;
        default:
            if (key_hex)
                return tool_usage_error(CMD, "more than one key (\"%s\" and \"%s\")", key_hex,
                                        p.arg);
            key_hex = p.arg;
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
    int code = tool_resolve_dir(CMD, p.dir, &dir);
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
        /* Looked and did not find: 1, told apart from could-not-look (3). */
        fprintf(stderr, "progcache get: no entry for %s \"%s\" in %s (a miss)\n",
                entry ? "entry" : "key", entry ? entry : key_hex, dir);
        code = EXIT_NO;
        goto done;
    }
    if (rc) {
        code = tool_lib_error(CMD, rc == PROGCACHE_EINVAL ? EXIT_USAGE : EXIT_FAILED,
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
