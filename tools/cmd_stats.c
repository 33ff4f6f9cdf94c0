/* progcache stats: the cache directory's counters, entries and size. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define CMD "stats"

static const char usage_text[] =
    "usage: progcache stats [-d DIR] [-v] [--json] [--format FMT] [-z] [--charts|--no-charts]\n"
    "\n"
    "Show the statistics of a cache directory: entries, total size, the size cap\n"
    "in force (the setting max_size, and where it comes from: 'progcache config'),\n"
    "the hit rate and the counters in use: hits, misses and stores always, any\n"
    "other counter (evictions, corrupt entries removed, ...) when it is not zero,\n"
    "the remote tier's when one is configured (PROGCACHE_REMOTE). -v prints every\n"
    "counter; --json always has every one. The counters are shared by every\n"
    "process using the directory and kept until zeroed. On a terminal, small\n"
    "charts of the entries by last use and by size follow.\n"
    "\n"
    "options:\n"
    "  -d, --dir DIR  the cache directory (default: $PROGCACHE_DIR, else cuda.core's)\n"
    "  -v, --verbose  every counter, zero or not\n"
    "  --json      print one JSON object instead of text (every counter)\n"
    "  --format FMT  text (the default), json (as --json), openmetrics (OpenMetrics\n"
    "              1.0) or prometheus (the text format node_exporter's textfile\n"
    "              collector reads): every counter, the size and the cap\n"
    "  -z, --zero  reset the counters to zero (entries are kept)\n"
    "  --charts    draw the charts even when standard output is not a terminal\n"
    "  --no-charts do not draw them\n"
    "  -h, --help  this text\n"
    "\n"
    "Exit status: 0 shown or zeroed; 2 bad usage; 3 the directory or its settings\n"
    "cannot be read.\n";

typedef tool_counter counter;

/* Where the cap in force comes from: "default", "the settings file
 * <path>:<line>", "PROGCACHE_MAX_SIZE". */
static void cap_origin(char *out, size_t len, const progcache_setting *cap)
{
    if (!cap)
        snprintf(out, len, "unknown");
    else if (cap->source == PROGCACHE_SETTING_FILE)
        snprintf(out, len, "settings file %s", cap->origin);
    else
        snprintf(out, len, "%s", cap->origin);
}

/* Short by default, as ccache -s: hits, misses and stores always; the
 * remote tier's counters (the "remote_" ones and wait_timeouts) when a
 * remote tier is configured; any other counter when it is not zero. By key,
 * so that a counter added to the table needs no flag of its own. */
static int shown(const counter *c, int verbose, int remote)
{
    if (verbose || c->value || !strcmp(c->key, "hits") || !strcmp(c->key, "misses") ||
        !strcmp(c->key, "stores"))
        return 1;
    return remote && (!strncmp(c->key, "remote_", 7) || !strcmp(c->key, "wait_timeouts"));
}

/* i31: the NVRTC file this process's compiles would load (never loaded
 * here), so that a user can tell whether C and Python programs use one
 * NVRTC, which their keys need (docs/PYTHON.md, "One NVRTC, one key").
 * NULL when only the loader's search path could tell. */
static const char *nvrtc_file(progcache_buf *buf)
{
    return progcache_nvrtc_library(buf) == PROGCACHE_OK ? (const char *)buf->data : NULL;
}

static void print_text(const char *dir, const progcache_stats *s, const progcache_setting *cap,
                       const counter *c, size_t n, int verbose, int remote,
                       const progcache_file *file)
{
    char buf[96];
    printf("%-22s %s\n", "cache directory", dir);
    /* i20nfs: how this directory seals entries and coordinates compiles. */
    const char *seal = progcache_file_seal_mechanism(file);
    printf("%-22s %s\n", "seal",
           !strcmp(seal, "xattr") ? "xattr (an extended attribute on each entry)"
                                  : "sidecar (progcache/seals/: the file system has no user "
                                    "extended attributes)");
    printf("%-22s %s\n", "single-flight",
           !strcmp(progcache_file_flight_mechanism(file), "lease")
               ? "lease files (progcache/flight.d/: a network file system)"
               : "byte-range locks (progcache/flight)");
    progcache_buf nvrtc = PROGCACHE_BUF_INIT;
    const char *lib = nvrtc_file(&nvrtc);
    printf("%-22s %s\n", "NVRTC", lib ? lib : "libnvrtc from the loader's search path");
    progcache_buf_free(&nvrtc);
    printf("%-22s %llu\n", "entries", (unsigned long long)s->entries);
    tool_format_size_long(buf, sizeof buf, s->total_size);
    printf("%-22s %s (%llu bytes)\n", "total size", buf, (unsigned long long)s->total_size);
    char from[4200];
    cap_origin(from, sizeof from, cap);
    if (s->max_size) {
        tool_format_size_long(buf, sizeof buf, s->max_size);
        printf("%-22s %s (%llu bytes; %s)\n", "size cap", buf, (unsigned long long)s->max_size,
               from);
    } else {
        printf("%-22s none (%s)\n", "size cap", from);
    }
    uint64_t lookups = s->hits + s->misses;
    if (lookups)
        printf("%-22s %.1f %% (%llu of %llu lookups)\n", "hit rate",
               100.0 * (double)s->hits / (double)lookups, (unsigned long long)s->hits,
               (unsigned long long)lookups);
    else
        printf("%-22s %s\n", "hit rate", "- (no lookups counted)");
    for (size_t i = 0; i < n; i++)
        if (shown(&c[i], verbose, remote))
            printf("%-22s %llu\n", c[i].label, (unsigned long long)c[i].value);
    if (s->available) {
        tool_format_time(buf, sizeof buf, s->since);
        printf("%-22s %s\n", "counting since", buf);
    } else {
        printf("%-22s %s\n", "counting since",
               "never (no statistics file yet: progcache has not written to this directory)");
    }
}

static void print_json(const char *dir, const progcache_stats *s, const progcache_setting *cap,
                       const counter *c, size_t n, const progcache_file *file)
{
    tool_json_begin(stdout);
    printf(", \"dir\": ");
    tool_json_string(stdout, dir);
    printf(", \"seal\": \"%s\", \"flight_lock\": \"%s\"", progcache_file_seal_mechanism(file),
           progcache_file_flight_mechanism(file));
    progcache_buf nvrtc = PROGCACHE_BUF_INIT;
    const char *lib = nvrtc_file(&nvrtc);
    printf(", \"nvrtc_library\": ");
    if (lib)
        tool_json_string(stdout, lib);
    else
        printf("null");
    progcache_buf_free(&nvrtc);
    printf(", \"available\": %s, \"entries\": %llu, \"total_size\": %llu",
           s->available ? "true" : "false", (unsigned long long)s->entries,
           (unsigned long long)s->total_size);
    if (s->max_size)
        printf(", \"max_size\": %llu", (unsigned long long)s->max_size);
    else
        printf(", \"max_size\": null");
    printf(", \"max_size_source\": \"%s\"",
           !cap || cap->source == PROGCACHE_SETTING_DEFAULT ? "default"
           : cap->source == PROGCACHE_SETTING_FILE          ? "file"
           : cap->source == PROGCACHE_SETTING_ENV           ? "environment"
                                                            : "options");
    uint64_t lookups = s->hits + s->misses;
    if (lookups)
        printf(", \"hit_rate\": %.6f", (double)s->hits / (double)lookups);
    else
        printf(", \"hit_rate\": null");
    if (s->available)
        printf(", \"since\": %lld", (long long)s->since);
    else
        printf(", \"since\": null");
    for (size_t i = 0; i < n; i++)
        printf(", \"%s\": %llu", c[i].key, (unsigned long long)c[i].value);
    printf("}\n");
}

int cmd_stats(int argc, char **argv)
{
    enum { OPT_CHARTS = 256, OPT_NO_CHARTS, OPT_FORMAT };
    static const tool_option options[] = {
        {"zero", 'z', 0},         {"charts", OPT_CHARTS, 0}, {"no-charts", OPT_NO_CHARTS, 0},
        {"verbose", 'v', 0},      {"format", OPT_FORMAT, 1}, {NULL, 0, 0}};
    int verbose = 0, zero = 0, charts = isatty(STDOUT_FILENO), metrics = 0, json = 0;
    tool_parser p;
    tool_parser_init(&p, CMD, usage_text, argc, argv, options, TOOL_JSON);
    for (int c; (c = tool_next(&p)) != TOOL_END;) {
        if (c == TOOL_EXIT)
            return p.code;
        if (c == 'z')
            zero = 1;
        else if (c == 'v')
            verbose = 1;
        else if (c == OPT_FORMAT && (json = !strcmp(p.arg, "json")) == 0 &&
                 strcmp(p.arg, "text") && strcmp(p.arg, "openmetrics") &&
                 strcmp(p.arg, "prometheus"))
            return tool_usage_error(CMD, "--format %s: give text, json, openmetrics or "
                                         "prometheus", p.arg);
        else if (c == OPT_FORMAT)
            metrics = !strcmp(p.arg, "openmetrics")  ? TOOL_METRICS_OPENMETRICS
                      : !strcmp(p.arg, "prometheus") ? TOOL_METRICS_PROMETHEUS
                                                     : 0;
        else if (c == OPT_CHARTS || c == OPT_NO_CHARTS)
            charts = c == OPT_CHARTS;
        else
            return tool_unexpected_arg(CMD, p.arg);
    }
    json = json || p.json;
    if (metrics && zero)
        return tool_usage_error(CMD, "--zero prints no metrics: give one or the other");
    char *dir = NULL;
    progcache_file *file = NULL;
    int code = tool_open_dir_file(CMD, p.dir, zero ? TOOL_WRITE : TOOL_READ, 0, &dir, &file);
    if (code)
        goto done;
    if (zero) {
        if (progcache_store_stats_reset(progcache_file_store(file)) != PROGCACHE_OK) {
            code = tool_lib_error(CMD, EXIT_FAILED, "cannot zero the statistics");
            goto done;
        }
        if (json) {
            tool_json_begin(stdout);
            printf(", \"dir\": ");
            tool_json_string(stdout, dir);
            printf(", \"zeroed\": true}\n");
        } else {
            printf("statistics of %s zeroed\n", dir);
        }
        goto done;
    }
    progcache_stats s = PROGCACHE_STATS_INIT;
    if (progcache_store_stats_get(&s, progcache_file_store(file)) != PROGCACHE_OK) {
        code = tool_lib_error(CMD, EXIT_FAILED, "cannot read the statistics");
        goto done;
    }
    const counter counters[] = {
        {"hits", "hits", s.hits},
        {"misses", "misses", s.misses},
        {"lookup errors", "lookup_errors", s.lookup_errors},
        {"stores", "stores", s.stores},
        {"store errors", "store_errors", s.store_errors},
        {"evictions", "evictions", s.evictions},
        {"evicted bytes", "evicted_bytes", s.evicted_bytes},
        {"corrupt removed", "corrupt_removed", s.corrupt_removed},
        {"single-flight waits", "singleflight_waits", s.singleflight_waits},
        {"remote hits", "remote_hits", s.remote_hits},
        {"remote misses", "remote_misses", s.remote_misses},
        {"remote errors", "remote_errors", s.remote_errors},
        {"remote stores", "remote_stores", s.remote_stores},
        {"remote rejected", "remote_rejected", s.remote_rejected},
        {"names learned", "names_learned", s.names_learned},
        {"remote timeouts", "remote_timeouts", s.remote_timeouts},
        {"remote back-offs", "remote_backoffs", s.remote_backoffs},
        {"remote store errors", "remote_store_errors", s.remote_store_errors},
        {"remote dropped", "remote_dropped", s.remote_dropped},
        {"remote newer", "remote_newer", s.remote_newer},
        {"remote too large", "remote_too_large", s.remote_too_large},
        {"remote bad tag", "remote_bad_tag", s.remote_bad_tag},
        {"remote waits", "remote_waits", s.remote_waits},
        {"wait timeouts", "wait_timeouts", s.wait_timeouts},
        {"remote takeovers", "remote_takeovers", s.remote_takeovers},
        {"PCH hits", "pch_hits", s.pch_hits},
        {"PCH misses", "pch_misses", s.pch_misses},
        {"PCH created", "pch_created", s.pch_created},
        {"PCH rejected", "pch_rejected", s.pch_rejected},
        {"PCH time saved (ms)", "pch_ms_saved", s.pch_ms_saved},
        {"PCH fallbacks", "pch_fallbacks", s.pch_fallbacks},
        /* i20nfs */
        {"sidecar seals", "sidecar_seals", s.sidecar_seals},
        {"flight leases", "flight_leases", s.flight_leases},
        {"flight takeovers", "flight_takeovers", s.flight_takeovers},
        /* i20cap */
        {"lock failures", "lock_failures", s.lock_failures},
        {"lock-free passes", "lock_fallbacks", s.lock_fallbacks},
        {"other writers rescans", "other_writer_rescans", s.other_writer_rescans},
        {"other writers bytes", "other_writer_bytes", s.other_writer_bytes},
        /* i21 */
        {"remote over bound", "remote_over_bound", s.remote_over_bound},
        {"remote deadlines", "remote_deadlines", s.remote_deadlines},
        {"NVRTC loads for a key", "nvrtc_key_loads", s.nvrtc_key_loads},
        {"NVRTC missing", "nvrtc_missing", s.nvrtc_missing},
        /* i20perm */
        {"not stored (another user's)", "foreign_not_stored", s.foreign_not_stored},
        {"modes fixed", "modes_fixed", s.modes_fixed},
        {"files refused", "files_refused", s.files_refused},
        {"PCH made after the compile", "pch_deferred", s.pch_deferred},
        {"PCH compiles by a warm helper", "pch_warm", s.pch_warm},
        {"warm helper failures", "pch_warm_failures", s.pch_warm_failures},
        {"links refused", "links_refused", s.links_refused}, /* i29-paths */
        /* i29-trust */
        {"records untrusted", "records_untrusted", s.records_untrusted},
        {"entries untrusted", "entries_untrusted", s.entries_untrusted},
        /* i30-exec */
        {"exec compiles", "intercept_compiles", s.intercept_compiles},
        {"exec hits", "intercept_hits", s.intercept_hits},
        {"exec misses", "intercept_misses", s.intercept_misses},
        {"exec passed: options", "intercept_pass_options", s.intercept_pass_options},
        {"exec passed: headers", "intercept_pass_headers", s.intercept_pass_headers},
        {"exec passed: callback", "intercept_pass_callback", s.intercept_pass_callback},
        {"exec passed: other", "intercept_pass_other", s.intercept_pass_other},
        {"exec real programs", "intercept_real_programs", s.intercept_real_programs},
        {"exec failed compiles", "intercept_failed", s.intercept_failed},
        /* i30-soname */
        {"exec hits, NVRTC not mapped", "intercept_standin_hits", s.intercept_standin_hits},
        {"exec NVRTC loads (stand-in)", "intercept_standin_loads", s.intercept_standin_loads},
        {"exec NVRTC loads for version", "intercept_standin_version_loads",
         s.intercept_standin_version_loads},
        {"exec stand-in refused", "intercept_standin_refused", s.intercept_standin_refused},
        /* i32-scale */
        {"shards rescanned", "shards_rescanned", s.shards_rescanned},
        {"eviction steps", "evict_steps", s.evict_steps},
        {"entries examined by steps", "evict_step_entries", s.evict_step_entries},
        {"state seeding scans", "state_seeds", s.state_seeds},
        /* i34-remote */
        {"tier back-offs", "tier_backoffs", s.tier_backoffs},
        {"tier calls skipped", "tier_skipped", s.tier_skipped},
        {"remote files refused", "remote_files_refused", s.remote_files_refused},
        /* i35-explain */
        {"misses explained", "explain_made", s.explain_made},
        {"explain records written", "explain_records", s.explain_records},
        {"explain records refused", "explain_refused", s.explain_refused},
        {"entries sealed again", "entries_resealed", s.entries_resealed},
    };
    size_t n = sizeof counters / sizeof counters[0];
    const progcache_setting *cap =
        progcache_settings_find(progcache_file_settings(file), "max_size");
    if (metrics) {
        tool_stats_metrics(stdout, metrics, dir, &s, counters, n);
    } else if (json) {
        print_json(dir, &s, cap, counters, n, file);
    } else {
        const progcache_setting *url =
            progcache_settings_find(progcache_file_settings(file), "remote");
        print_text(dir, &s, cap, counters, n, verbose, url && url->value[0], file);
        if (charts && (code = tool_stats_charts(CMD, file, &s)))
            goto done;
    }
done:
    progcache_file_close(file);
    free(dir);
    return code;
}
