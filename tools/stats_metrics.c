/* `progcache stats --format openmetrics|prometheus`: the statistics of a
 * cache directory for a scraper (docs/OPERATIONS.md, "Metrics"). */
#include <string.h>

#include "tool.h"

/* The tier a counter is about, from its key: the remote and PCH tiers by
 * their prefixes, the directory's own housekeeping by name, and the rest
 * (hits, misses, stores, ...) counted for the cache as a whole. A counter
 * added to the stats table gets a tier without a change here. */
static const char *tier_of(const char *key)
{
    static const char *const directory[] = {
        "evictions",     "evicted_bytes",    "corrupt_removed",      "sidecar_seals",
        "flight_leases", "flight_takeovers", "lock_failures",        "lock_fallbacks",
        "modes_fixed",   "files_refused",    "other_writer_rescans", "other_writer_bytes",
        "links_refused", "foreign_not_stored",
        /* i32-scale */
        "shards_rescanned", "evict_steps", "evict_step_entries", "state_seeds",
        /* i35-explain */
        "explain_records", "explain_refused",
        "entries_resealed"};
    if (!strncmp(key, "remote_", 7))
        return "remote";
    if (!strncmp(key, "pch_", 4))
        return "pch";
    for (size_t i = 0; i < sizeof directory / sizeof directory[0]; i++)
        if (!strcmp(key, directory[i]))
            return "directory";
    return "cache";
}

/* A label value: backslash, double quote and newline escaped (both
 * formats); every other byte as it is (a path is bytes, the formats UTF-8:
 * a name that is not UTF-8 is the operator's to fix). */
static void label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

/* "# HELP"/"# TYPE" of a family, then (the caller) its samples. */
static void family(FILE *f, const char *name, const char *suffix, const char *type,
                   const char *help)
{
    fprintf(f, "# HELP progcache_%s%s %s\n", name, suffix, help);
    fprintf(f, "# TYPE progcache_%s%s %s\n", name, suffix, type);
}

static void sample(FILE *f, const char *name, const char *suffix, const char *dir,
                   const char *tier, const char *value)
{
    fprintf(f, "progcache_%s%s{dir=\"", name, suffix);
    label_value(f, dir);
    if (tier)
        fprintf(f, "\",tier=\"%s", tier);
    fprintf(f, "\"} %s\n", value);
}

static void gauge(FILE *f, const char *name, const char *help, const char *dir, uint64_t v)
{
    char text[32];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    family(f, name, "", "gauge", help);
    sample(f, name, "", dir, NULL, text);
}

/* A counter whose unit is not Prometheus's base unit, exported in it:
 * milliseconds as seconds (promtool's lint refuses "ms" in a name). */
static const struct renamed {
    const char *key, *name;
    unsigned int per_unit;
} renamed[] = {{"pch_ms_saved", "pch_saved_seconds", 1000}};

void tool_stats_metrics(FILE *f, int format, const char *dir, const progcache_stats *s,
                        const tool_counter *c, size_t n)
{
    int om = format == TOOL_METRICS_OPENMETRICS;
    char text[32], since[32];
    snprintf(since, sizeof since, "%lld", (long long)s->since);
    for (size_t i = 0; i < n; i++) {
        char help[160];
        snprintf(help, sizeof help, "progcache stats: %s (docs/FORMAT.md)", c[i].label);
        const char *name = c[i].key;
        snprintf(text, sizeof text, "%llu", (unsigned long long)c[i].value);
        for (size_t r = 0; r < sizeof renamed / sizeof renamed[0]; r++)
            if (!strcmp(name, renamed[r].key)) {
                name = renamed[r].name;
                snprintf(text, sizeof text, "%llu.%03llu",
                         (unsigned long long)(c[i].value / renamed[r].per_unit),
                         (unsigned long long)(c[i].value % renamed[r].per_unit));
            }
        /* OpenMetrics names the family without _total and its samples
         * with it; the Prometheus text format names both with it. */
        family(f, name, om ? "" : "_total", "counter", help);
        sample(f, name, "_total", dir, tier_of(c[i].key), text);
        if (om && s->available)
            sample(f, name, "_created", dir, tier_of(c[i].key), since);
    }
    gauge(f, "entries", "entries in the cache directory", dir, s->entries);
    gauge(f, "size_bytes", "bytes of entries in the cache directory", dir, s->total_size);
    /* No cap: no sample, rather than a 0 that a size/cap ratio would
     * turn into infinity. */
    if (s->max_size)
        gauge(f, "max_size_bytes", "the size cap in force (the setting max_size)", dir,
              s->max_size);
    gauge(f, "stats_available",
          "1 when the directory has a statistics file (0: the counters are all 0)", dir,
          (uint64_t)(s->available != 0));
    if (s->available)
        gauge(f, "stats_since_seconds", "when counting started, in seconds since 1970", dir,
              (uint64_t)s->since);
    if (om)
        fputs("# EOF\n", f);
}
