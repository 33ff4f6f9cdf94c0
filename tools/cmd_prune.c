/* progcache prune: remove least recently used entries by size or age. */
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define CMD "prune"

enum { OPT_OLDER_THAN = 0x100 };

/* A bare prune: the directory's cap (its settings file, then
 * $PROGCACHE_MAX_SIZE, then the 5 GiB default), as every program using the
 * directory evicts to. EXIT_OK with *cap (PROGCACHE_SIZE_NONE: no cap), or
 * EXIT_FAILED after a message. */
static int directory_cap(const char *dir, uint64_t *cap)
{
    progcache_settings *s = NULL;
    if (progcache_settings_load(&s, dir) != PROGCACHE_OK)
        return tool_lib_error(CMD, EXIT_FAILED, "cannot read the size cap");
    *cap = progcache_settings_find(s, "max_size")->number;
    progcache_settings_free(s);
    return EXIT_OK;
}

static const char usage_text[] =
    "usage: progcache prune [-d DIR] [-M SIZE] [--older-than AGE] [--json]\n"
    "\n"
    "Remove entries, least recently used first (by their last hit), until the\n"
    "cache holds at most SIZE bytes, and/or every entry not used for AGE. With\n"
    "neither, trim the cache to its size cap (the setting max_size: 'progcache\n"
    "config max_size'; 5 GiB unless set), as ccache -c does. Safe while other\n"
    "processes use the cache: an entry read or replaced while prune runs is kept.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR          the cache directory (default: $PROGCACHE_DIR, else\n"
    "                         cuda.core's)\n"
    "  -M, --max-size SIZE    bytes, or with a suffix K, M, G, T (powers of 1024):\n"
    "                         512M, 2G, 1.5G, 100K, 1048576\n"
    "  --older-than AGE       a number and a unit s, m, h, d or w: 45s, 30m, 12h, 7d\n"
    "  --json                 print one JSON object instead of text\n"
    "  -q, --quiet            no progress bar (drawn on a terminal)\n"
    "  -h, --help             this text\n"
    "\n"
    "Prints: removed N entries (SIZE) from DIR; N entries (SIZE) left (after\n"
    "'cap SIZE:' when trimming to the cap)\n"
    "Exit status: 0 done; 2 bad usage; 3 the directory cannot be used.\n";

/* "removed N entries (SIZE) from D; N entries (SIZE) left", after "cap
 * SIZE: " when trimming to the cap (not 0), or the JSON object. */
static void report(int json, const char *dir, uint64_t removed, uint64_t removed_bytes,
                   uint64_t entries, uint64_t total_size, uint64_t cap)
{
    if (json) {
        tool_json_begin(stdout);
        printf(", \"dir\": ");
        tool_json_string(stdout, dir);
        printf(", \"removed\": %llu, \"removed_bytes\": %llu, \"entries\": %llu, "
               "\"total_size\": %llu}\n",
               (unsigned long long)removed, (unsigned long long)removed_bytes,
               (unsigned long long)entries, (unsigned long long)total_size);
        return;
    }
    char freed[64], left[64], limit[64];
    tool_format_size_long(freed, sizeof freed, removed_bytes);
    tool_format_size_long(left, sizeof left, total_size);
    tool_format_size_long(limit, sizeof limit, cap);
    if (cap)
        printf("cap %s: ", limit);
    printf("removed %llu %s (%s) from %s; %llu %s (%s) left\n", (unsigned long long)removed,
           tool_entries(removed), freed, dir, (unsigned long long)entries, tool_entries(entries),
           left);
}

int cmd_prune(int argc, char **argv)
{
    static const tool_option options[] = {
        {"max-size", 'M', 1}, {"older-than", OPT_OLDER_THAN, 1}, {NULL, 0, 0}};
    progcache_prune_options opts = PROGCACHE_PRUNE_OPTIONS_INIT;
    int have_size = 0, have_age = 0;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        const char *v = p.arg;
        switch (c) {
        case TOOL_EXIT: return p.code;
        case 'M':
            if (tool_parse_size(v, &opts.max_size) != 0)
                return tool_usage_error(CMD,
                                        "--max-size \"%s\": give bytes or a size such as "
                                        "512M, 2G, 100K",
                                        v);
            have_size = 1;
            break;
        case OPT_OLDER_THAN:
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
    if (have_size && opts.max_size == 0)
        return tool_usage_error(CMD, "--max-size 0 would remove everything; use 'progcache clear'");

    char *dir = NULL;
    progcache_file *file = NULL;
    int code = tool_open_dir_file(CMD, p.dir, TOOL_WRITE, 0, &dir, &file);
    if (code)
        goto done;
    uint64_t cap = 0;
    int to_cap = !have_size && !have_age;
    if (to_cap && (code = directory_cap(dir, &cap)))
        goto done;
    if (to_cap && (cap == 0 || cap == PROGCACHE_SIZE_NONE)) {
        /* Nothing to trim to: say so, and what the directory holds. */
        fprintf(stderr, "progcache %s: %s has no size cap (max_size none): nothing to trim; "
                        "give --max-size or --older-than\n",
                CMD, dir);
        progcache_stats st = PROGCACHE_STATS_INIT;
        if (progcache_store_stats_get(&st, progcache_file_store(file)) != PROGCACHE_OK) {
            code = tool_lib_error(CMD, EXIT_FAILED, "cannot read the statistics");
            goto done;
        }
        report(json, dir, 0, 0, st.entries, st.total_size, 0);
        goto done;
    }
    if (to_cap)
        opts.max_size = cap;
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
    report(json, dir, res.removed, res.removed_bytes, res.entries, res.total_size,
           to_cap ? cap : 0);
done:
    progcache_file_close(file);
    free(dir);
    return code;
}
