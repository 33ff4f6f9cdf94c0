/* progcache prune: remove least recently used entries by size or age. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    "       progcache prune --remote URL --older-than AGE [--json]\n"
    "\n"
    "Remove entries, least recently used first (by their last hit), until the\n"
    "cache holds at most SIZE bytes, and/or every entry not used for AGE. With\n"
    "neither, trim the cache to its size cap (the setting max_size: 'progcache\n"
    "config max_size'; 5 GiB unless set), as ccache -c does. Safe while other\n"
    "processes use the cache: an entry read or replaced while prune runs is kept.\n"
    "With --remote, remove the objects of the HTTP or S3 tier URL written more\n"
    "than AGE ago, as its listing says (a remote tier keeps no last use; an\n"
    "object the listing gives no time for is kept).\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR          the cache directory (default: $PROGCACHE_DIR, else\n"
    "                         cuda.core's)\n"
    "  -M, --max-size SIZE    bytes, or with a suffix K, M, G, T (powers of 1024):\n"
    "                         512M, 2G, 1.5G, 100K, 1048576\n"
    "  --older-than AGE       a number and a unit s, m, h, d or w: 45s, 30m, 12h, 7d\n"
    "  --remote URL           a remote tier (http://, https://, s3://) instead of DIR\n"
    "  --json                 print one JSON object instead of text\n"
    "  -q, --quiet            no progress bar (drawn on a terminal)\n"
    "  -h, --help             this text\n"
    "\n"
    "Prints: removed N entries (SIZE) from DIR; N entries (SIZE) left (after\n"
    "'cap SIZE:' when trimming to the cap)\n"
    "Exit status: 0 done; 2 bad usage; 3 the directory or the tier cannot be used\n"
    "(a remote removal that failed stops the prune).\n";

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

/* --remote: what a walk of the tier's listing removed and kept. */
typedef struct remote_prune {
    progcache_store *store;
    int64_t cutoff_ns;
    uint64_t removed, removed_bytes, kept, kept_bytes, undated;
} remote_prune;

static int remote_prune_one(void *ctx, const progcache_entry *e)
{
    remote_prune *r = ctx;
    if (e->mtime_ns == 0 || e->mtime_ns >= r->cutoff_ns) {
        r->undated += e->mtime_ns == 0;
        r->kept++;
        r->kept_bytes += e->size;
        return 0;
    }
    int rc = progcache_store_remove_name(r->store, e->name);
    if (rc == PROGCACHE_OK) {
        r->removed++;
        r->removed_bytes += e->size;
    }
    /* Gone meanwhile (another prune, a clear): nothing to do. */
    return rc == PROGCACHE_ENOTFOUND ? 0 : rc;
}

/* A remote tier has no last use (a hit does not touch an object): the
 * age is since the object was written, as its listing says. */
static int prune_remote(const char *url, uint64_t older_than, int json)
{
    char where[1024];
    tool_mask_url(where, sizeof where, url);
    remote_prune r;
    memset(&r, 0, sizeof r);
    int code = tool_open_remote(CMD, url, 0, &r.store);
    if (code)
        return code;
    r.cutoff_ns = ((int64_t)time(NULL) - (int64_t)older_than) * 1000000000;
    int rc = progcache_store_foreach(r.store, 0, remote_prune_one, &r);
    if (rc) {
        fprintf(stderr, "progcache %s: removed %llu %s before stopping\n", CMD,
                (unsigned long long)r.removed, tool_entries(r.removed));
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot prune the remote tier");
    } else {
        if (r.undated && !json)
            fprintf(stderr, "progcache %s: %llu %s kept: %s's listing gives no time for them\n",
                    CMD, (unsigned long long)r.undated, tool_entries(r.undated), where);
        report(json, where, r.removed, r.removed_bytes, r.kept, r.kept_bytes, 0);
    }
    progcache_store_free(r.store);
    return code;
}

int cmd_prune(int argc, char **argv)
{
    static const tool_option options[] = {{"max-size", 'M', 1},
                                          {"older-than", OPT_OLDER_THAN, 1},
                                          TOOL_REMOTE_OPTION,
                                          {NULL, 0, 0}};
    const char *remote = NULL;
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
        case TOOL_OPT_REMOTE: remote = v; break;
        default: return tool_unexpected_arg(CMD, v);
        }
    }
    int json = p.json;
    if (remote && (p.dir || have_size || !have_age))
        return tool_usage_error(CMD, "--remote takes --older-than AGE alone (a remote tier "
                                     "keeps no sizes to trim to), not --dir or --max-size");
    if (remote)
        return prune_remote(remote, opts.older_than, json);
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
