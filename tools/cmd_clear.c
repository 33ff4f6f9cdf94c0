/* progcache clear: remove every entry of a cache directory. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "clear"

static const char usage_text[] =
    "usage: progcache clear [-d DIR] [--json]\n"
    "\n"
    "Remove every entry of a cache directory. The statistics and the settings are\n"
    "kept (zero the statistics with 'progcache stats --zero'). Other processes may\n"
    "go on using the cache.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  --json         print one JSON object instead of text\n"
    "  -q, --quiet    no progress bar (drawn on a terminal)\n"
    "  -h, --help     this text\n"
    "\n"
    "Prints: removed N entries (SIZE) from DIR\n"
    "Exit status: 0 cleared; 2 bad usage; 3 the directory cannot be used or an\n"
    "entry could not be removed.\n";

int cmd_clear(int argc, char **argv)
{
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, NULL, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        return tool_unexpected_arg(CMD, p.arg);
    }
    char *dir = NULL;
    progcache_file *file = NULL;
    int code = tool_open_dir_file(CMD, p.dir, TOOL_WRITE, 0, &dir, &file);
    if (code)
        goto done;
    progcache_prune_result res = PROGCACHE_PRUNE_RESULT_INIT;
    tool_progress bar;
    tool_progress_start(&bar);
    int rc = progcache_file_clear(&res, file, tool_progress_cb, &bar);
    tool_progress_end(&bar);
    if (rc != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot clear the cache");
        goto done;
    }
    if (p.json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"removed\": %llu, \"removed_bytes\": %llu}\n", (unsigned long long)res.removed,
               (unsigned long long)res.removed_bytes);
    } else {
        char size[64];
        tool_format_size_long(size, sizeof size, res.removed_bytes);
        printf("removed %llu %s (%s) from %s\n", (unsigned long long)res.removed,
               tool_entries(res.removed), size, dir);
    }
done:
    progcache_file_close(file);
    free(dir);
    return code;
}
