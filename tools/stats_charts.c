/* The shape of a cache directory, for `progcache stats` on a terminal:
 * how many entries (and bytes) were last used how long ago, which is what
 * `prune --older-than` would remove; how large they are; the hit rate and
 * how full the size cap is. One walk of the directory (no entry is read),
 * stopped after SAMPLE entries, in the middle of a shard if need be: names
 * are hashes, so the first entries a walk finds are a fair sample, and the
 * charts cost the same at any size (issue 32). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

#define BAR 24 /* the longest bar, in characters */
/* Entries examined at most (one fstatat each): at a million entries, the
 * 4096 (plus the rest of a shard) of before took 316 ms, cold, where 10
 * entries take 20 ms. */
#define SAMPLE 1024

typedef struct bucket {
    const char *label;
    uint64_t limit; /* the bucket holds values below this */
    uint64_t count, bytes;
} bucket;

typedef struct shape {
    int64_t now;
    bucket age[5];  /* seconds since last use */
    bucket size[5]; /* bytes */
    uint64_t seen, seen_bytes; /* entries walked, and their bytes */
    char shard[3];             /* the shard being walked */
    int shards, stopped;       /* shards walked (begun); 1 when stopped at SAMPLE */
} shape;

static void add(bucket *b, size_t n, uint64_t value, uint64_t bytes)
{
    size_t i = 0;
    while (i + 1 < n && value >= b[i].limit)
        i++;
    b[i].count++;
    b[i].bytes += bytes;
}

static int visit(void *ctx, const progcache_entry *e)
{
    shape *s = ctx;
    if (strncmp(e->name, s->shard, 2) != 0) {
        memcpy(s->shard, e->name, 2);
        s->shards++;
    }
    s->seen++;
    s->seen_bytes += e->size;
    int64_t age = s->now - e->atime_ns / 1000000000;
    add(s->age, 5, age > 0 ? (uint64_t)age : 0, e->size);
    add(s->size, 5, e->size, e->size);
    return s->seen >= SAMPLE ? (s->stopped = 1) : 0; /* enough */
}

/* A sampled bucket scaled to the whole: entries by entries, bytes by bytes. */
static void scale(bucket *b, uint64_t entries, uint64_t seen, uint64_t bytes, uint64_t seen_bytes)
{
    b->count = seen ? (uint64_t)((double)b->count * (double)entries / (double)seen + 0.5) : 0;
    b->bytes =
        seen_bytes ? (uint64_t)((double)b->bytes * (double)bytes / (double)seen_bytes + 0.5) : 0;
}

static int utf8_terminal(void)
{
    const char *vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (size_t i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return strstr(v, "UTF-8") || strstr(v, "utf-8") || strstr(v, "UTF8") ||
                   strstr(v, "utf8");
    }
    return 0;
}

/* A bar of value / max of BAR characters, in eighths with UTF-8. */
static void bar(uint64_t value, uint64_t max, int width, int utf8)
{
    static const char *eighths[] = {"", "\u258f", "\u258e", "\u258d", "\u258c",
                                    "\u258b", "\u258a", "\u2589"};
    if (!max || !value)
        return;
    uint64_t units = value * (uint64_t)width * 8 / max;
    if (units == 0)
        units = 1; /* something there: never an empty bar */
    for (uint64_t i = 0; i < units / 8; i++)
        fputs(utf8 ? "\u2588" : "#", stdout);
    if (units % 8)
        fputs(utf8 ? eighths[units % 8] : "#", stdout);
}

/* A gauge: filled share of width, the rest shaded. */
static void gauge(double share, int width, int utf8)
{
    if (share < 0)
        share = 0;
    if (share > 1)
        share = 1;
    int filled = (int)(share * width + 0.5);
    putchar('[');
    for (int i = 0; i < width; i++)
        fputs(i < filled ? (utf8 ? "\u2588" : "#") : (utf8 ? "\u2591" : "."), stdout);
    putchar(']');
}

static void chart(const char *title, const bucket *b, size_t n, int utf8)
{
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i].count > max)
            max = b[i].count;
    printf("%-20s%5s %7s\n", title, "count", "size");
    for (size_t i = 0; i < n; i++) {
        char size[24];
        tool_format_size(size, sizeof size, b[i].bytes);
        printf("  %-14s %8llu %7s", b[i].label, (unsigned long long)b[i].count, size);
        if (b[i].count) {
            fputs("  ", stdout);
            bar(b[i].count, max, BAR, utf8);
        }
        putchar('\n');
    }
}

int tool_stats_charts(const char *cmd, progcache_file *file, const progcache_stats *st)
{
    shape s = {
        .now = (int64_t)time(NULL),
        .age = {{"< 1 hour", 3600, 0, 0},
                {"< 1 day", 86400, 0, 0},
                {"< 1 week", 7 * 86400, 0, 0},
                {"< 30 days", 30 * 86400, 0, 0},
                {"older", UINT64_MAX, 0, 0}},
        .size = {{"< 4 KiB", 4 << 10, 0, 0},
                 {"4-64 KiB", 64 << 10, 0, 0},
                 {"64 KiB-1 MiB", 1 << 20, 0, 0},
                 {"1-16 MiB", 16 << 20, 0, 0},
                 {">= 16 MiB", UINT64_MAX, 0, 0}},
    };
    int rc = progcache_file_foreach(file, 0, visit, &s);
    if (rc && !s.stopped)
        return tool_lib_error(cmd, EXIT_FAILED, "cannot list the entries for the charts");
    if (s.stopped && st->entries > s.seen) /* scaled to the counters' totals */
        for (size_t i = 0; i < 5; i++) {
            scale(&s.age[i], st->entries, s.seen, st->total_size, s.seen_bytes);
            scale(&s.size[i], st->entries, s.seen, st->total_size, s.seen_bytes);
        }
    int utf8 = utf8_terminal();
    putchar('\n');
    if (s.stopped && st->entries > s.seen)
        printf("(from %llu of %llu entries, a sample from %d of 256 shards, scaled to all)\n",
               (unsigned long long)s.seen, (unsigned long long)st->entries, s.shards);
    chart("entries by last use", s.age, 5, utf8);
    chart("entries by size", s.size, 5, utf8);
    uint64_t lookups = st->hits + st->misses;
    printf("%-15s ", "hit rate");
    if (lookups) {
        gauge((double)st->hits / (double)lookups, BAR, utf8);
        printf(" %.1f %%\n", 100.0 * (double)st->hits / (double)lookups);
    } else {
        printf("- (no lookups counted)\n");
    }
    printf("%-15s ", "size cap used");
    if (st->max_size) {
        char used[24], cap[24];
        tool_format_size(used, sizeof used, st->total_size);
        tool_format_size(cap, sizeof cap, st->max_size);
        gauge((double)st->total_size / (double)st->max_size, BAR, utf8);
        printf(" %s of %s (%.0f %%)\n", used, cap,
               100.0 * (double)st->total_size / (double)st->max_size);
    } else {
        printf("- (no cap)\n");
    }
    return EXIT_OK;
}
