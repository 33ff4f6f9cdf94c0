/* progcache prune: remove least recently used entries by size or age. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "prune"

static const char usage_text[] =
    "usage: progcache prune [-d DIR] [-s SIZE] [-a AGE] [--json]\n"
    "\n"
    "Remove entries, least recently used first (by their last hit), until the\n"
    "cache holds at most SIZE bytes, and/or every entry not used for AGE. Give at\n"
    "least one of the two. Safe while other processes use the cache: an entry\n"
    "read or replaced while prune runs is kept.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR          the cache directory (default: $PROGCACHE_DIR, else\n"
    "                         cuda.core's)\n"
    "  -s, --max-size SIZE    bytes, or with a suffix K, M, G, T (powers of 1024):\n"
    "                         512M, 2G, 1.5G, 100K, 1048576\n"
    "  -a, --older-than AGE   a number and a unit s, m, h, d or w: 45s, 30m, 12h, 7d\n"
    "  --json                 print one JSON object instead of text\n"
    "  -q, --quiet            no progress bar (drawn on a terminal)\n"
    "  -h, --help             this text\n"
    "\n"
    "Prints: removed N entries (SIZE) from DIR; N entries (SIZE) left\n"
    "Exit status: 0 done; 2 bad usage; 3 the directory cannot be used.\n";

int cmd_prune(int argc, char **argv)
{
    static const tool_option options[] = {
        {"max-size", 's', 1}, {"older-than", 'a', 1}, {NULL, 0, 0}};
    progcache_prune_options opts = PROGCACHE_PRUNE_OPTIONS_INIT;
    int have_size = 0, have_age = 0;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        const char *v = p.arg;
        switch (c) {
        case TOOL_EXIT: return p.code;
        case 's':
            if (tool_parse_size(v, &opts.max_size) != 0)
                return tool_usage_error(CMD,
                                        "--max-size \"%s\": give bytes or a size such as "
                                        "512M, 2G, 100K",
                                        v);
            have_size = 1;
            break;
        case 'a':
            if (tool_parse_age(v, &opts.older_than) != 0 || opts.older_than == 0)
                return tool_usage_error(CMD,
                                        "--older-than \"%s\": give an age such as 7d, 12h, "
                                        "30m, 45s",
                                        v);
            have_age = 1;
            break;
        default: return tool_unexpected_arg(CMD, v);
        }
    }
    int json = p.json;
    if (!have_size && !have_age)
        return tool_usage_error(CMD, "give --max-size SIZE and/or --older-than AGE (to remove "
                                     "everything, use 'progcache clear')");
    if (have_size && opts.max_size == 0)
        return tool_usage_error(CMD, "--max-size 0 would remove everything; use 'progcache clear'");

    char *dir = NULL;
    progcache_file *file = NULL;
    int code = tool_open_dir_file(CMD, p.dir, TOOL_WRITE, 0, &dir, &file);
    if (code)
        goto done;
    progcache_prune_result res = PROGCACHE_PRUNE_RESULT_INIT;
    tool_progress bar;
    tool_progress_start(&bar);
    opts.on_progress = tool_progress_cb;
    opts.ctx = &bar;
    int rc = progcache_file_prune(&res, file, &opts);
    tool_progress_end(&bar);
    if (rc != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot prune the cache");
        goto done;
    }
    if (json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"removed\": %llu, \"removed_bytes\": %llu, \"entries\": %llu, "
               "\"total_size\": %llu}\n",
               (unsigned long long)res.removed, (unsigned long long)res.removed_bytes,
               (unsigned long long)res.entries, (unsigned long long)res.total_size);
    } else {
        char freed[64], left[64];
        tool_format_size_long(freed, sizeof freed, res.removed_bytes);
        tool_format_size_long(left, sizeof left, res.total_size);
        printf("removed %llu entries (%s) from %s; %llu entries (%s) left\n",
               (unsigned long long)res.removed, freed, dir, (unsigned long long)res.entries, left);
    }
done:
    progcache_file_close(file);
    free(dir);
    return code;
}
