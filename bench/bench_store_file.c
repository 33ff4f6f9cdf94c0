/* bench_store_file: latency of the file store's get (hit, miss) and put at
 * several cache sizes, and put throughput with a full size cap.
 *
 *   bench_store_file [--dir DIR] [--sizes 10,1000,100000] [--value-size N]
 *                    [--samples N] [--cap-puts N] [--cap BYTES] [--markdown]
 *
 * The latency figures run under the bench's own cap (--cap; default: none),
 * never the directory's setting or $PROGCACHE_MAX_SIZE: with a cap under
 * the filled size, the entries timed as hits would have been evicted.
 *
 * Each size gets a fresh cache under DIR (default: a new folder in $TMPDIR
 * or /tmp), filled without fsync, then measured through a handle opened
 * with the defaults (fsync on). Figures are medians of per-call times.
 * Uses only the public API. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/progcache.h"

static void make_key(unsigned char key[32], uint64_t id, uint64_t salt)
{
    /* Keys look like real ones (32 bytes); content only needs to differ. */
    for (int i = 0; i < 4; i++) {
        uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ (salt + (uint64_t)i) * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        memcpy(key + 8 * i, &x, 8);
    }
}

static void die(const char *what)
{
    fprintf(stderr, "bench_store_file: %s: %s\n", what, progcache_error_last());
    exit(1);
}

/* The cap of the latency figures (--cap): PROGCACHE_SIZE_NONE by default. */
static uint64_t bench_cap = PROGCACHE_SIZE_NONE;

static progcache_store *open_store(const char *dir, uint64_t cap, unsigned int flags)
{
    return bench_store_open("bench_store_file", dir, cap ? cap : bench_cap, flags);
}

static void fill(const char *dir, size_t n, const unsigned char *value, size_t vsize)
{
    progcache_store *s = open_store(dir, 0, PROGCACHE_FILE_NO_FSYNC);
    unsigned char key[32];
    for (size_t i = 0; i < n; i++) {
        make_key(key, i, 0);
        if (progcache_store_put(s, key, 32, value, vsize) != PROGCACHE_OK)
            die("fill");
    }
    progcache_store_free(s);
}

/* Time samples hits on random keys among the n written, into t (µs). */
static void time_hits(double *t, progcache_store *s, size_t n, size_t samples, size_t vsize,
                      unsigned int *rng, progcache_buf *buf, const char *what)
{
    unsigned char key[32];
    for (size_t i = 0; i < samples; i++) {
        *rng = *rng * 1103515245u + 12345u;
        make_key(key, (*rng >> 4) % n, 0);
        double t0 = bench_now_us();
        int rc = progcache_store_get(buf, s, key, 32);
        t[i] = bench_now_us() - t0;
        if (rc == PROGCACHE_ENOTFOUND) { /* no error message: say what happened */
            fprintf(stderr, "bench_store_file: %s: a key written is missing (evicted: is "
                            "--cap under the filled size?)\n", what);
            exit(1);
        }
        if (rc != PROGCACHE_OK || buf->size != vsize)
            die(what);
    }
}

typedef struct {
    double hit_med, hit_p99, hit_noverify_med, miss_med, put_med, put_p99, put_nosync_med;
} latency;

static latency measure(const char *dir, size_t n, const unsigned char *value, size_t vsize,
                       size_t samples)
{
    latency r;
    double *t = malloc(samples * sizeof *t);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned char key[32];
    progcache_store *s = open_store(dir, 0, 0);
    unsigned int rng = 1;
    /* Warm the page cache the way a running service would have it. */
    for (size_t i = 0; i < n; i++) {
        make_key(key, i, 0);
        (void)progcache_store_get(&buf, s, key, 32);
    }
    time_hits(t, s, n, samples, vsize, &rng, &buf, "get (hit)");
    r.hit_med = bench_quantile(t, samples, 0.5);
    r.hit_p99 = bench_quantile(t, samples, 0.99);
    progcache_store *fast = open_store(dir, 0, PROGCACHE_FILE_NO_VERIFY);
    time_hits(t, fast, n, samples, vsize, &rng, &buf, "get (hit, no verify)");
    r.hit_noverify_med = bench_quantile(t, samples, 0.5);
    progcache_store_free(fast);
    for (size_t i = 0; i < samples; i++) {
        make_key(key, i, 77);
        double t0 = bench_now_us();
        int rc = progcache_store_get(&buf, s, key, 32);
        t[i] = bench_now_us() - t0;
        if (rc != PROGCACHE_ENOTFOUND)
            die("get (miss)");
    }
    r.miss_med = bench_quantile(t, samples, 0.5);
    size_t puts = samples / 4 ? samples / 4 : 1;
    for (size_t i = 0; i < puts; i++) {
        make_key(key, i, 99);
        double t0 = bench_now_us();
        if (progcache_store_put(s, key, 32, value, vsize) != PROGCACHE_OK)
            die("put");
        t[i] = bench_now_us() - t0;
    }
    r.put_med = bench_quantile(t, puts, 0.5);
    r.put_p99 = bench_quantile(t, puts, 0.99);
    progcache_store_free(s);
    s = open_store(dir, 0, PROGCACHE_FILE_NO_FSYNC);
    for (size_t i = 0; i < puts; i++) {
        make_key(key, i, 98);
        double t0 = bench_now_us();
        if (progcache_store_put(s, key, 32, value, vsize) != PROGCACHE_OK)
            die("put");
        t[i] = bench_now_us() - t0;
    }
    r.put_nosync_med = bench_quantile(t, puts, 0.5);
    progcache_store_free(s);
    progcache_buf_free(&buf);
    free(t);
    return r;
}

/* Puts of new keys into a cache already at its cap: every put is over the
 * cap, so this is eviction's steady state. */
static double capped_throughput(const char *dir, size_t n, const unsigned char *value,
                                size_t vsize, size_t count, unsigned int flags)
{
    progcache_store *s = open_store(dir, (uint64_t)n * vsize, flags);
    unsigned char key[32];
    double t0 = bench_now_us();
    for (size_t i = 0; i < count; i++) {
        make_key(key, i, 1000 + flags);
        if (progcache_store_put(s, key, 32, value, vsize) != PROGCACHE_OK)
            die("capped put");
    }
    double secs = (bench_now_us() - t0) / 1e6;
    uint64_t total = 0;
    progcache_store_total_size(&total, s);
    if (total > (uint64_t)n * vsize) {
        fprintf(stderr, "bench_store_file: total %llu over the cap\n", (unsigned long long)total);
        exit(1);
    }
    progcache_store_free(s);
    return (double)count / secs;
}

static const char usage_text[] =
    "usage: bench_store_file [--dir DIR] [--sizes 10,1000,100000] [--value-size N]\n"
    "                        [--samples N] [--cap-puts N] [--cap BYTES] [--json FILE]\n"
    "\n"
    "Latency of the file store's get and put at several cache sizes, and put\n"
    "throughput under a full size cap (no GPU needed). The latency figures run\n"
    "with no cap unless --cap is given (never $PROGCACHE_MAX_SIZE's).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    const char *base = NULL;
    const char *sizes = "10,1000,100000";
    size_t vsize = 5734; /* 5.6 KiB, as in the cuda.core anchor figures */
    size_t samples = 20000, cap_puts = 20000;
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            base = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--value-size") && i + 1 < argc)
            vsize = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
            samples = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--cap") && i + 1 < argc)
            bench_cap = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--cap-puts") && i + 1 < argc)
            cap_puts = strtoul(argv[++i], NULL, 10);
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    char tmpl[512];
    int made = !base;
    if (!base) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpl, sizeof tmpl, "%s/bench-store-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpl)) {
            perror("mkdtemp");
            return 1;
        }
        base = tmpl;
    }
    unsigned char *value = malloc(vsize);
    for (size_t i = 0; i < vsize; i++)
        value[i] = (unsigned char)(i * 31 + 7);

    printf("file store, %zu-byte values, %zu samples per figure, dir %s\n\n", vsize, samples, base);
    printf("| entries | get hit median (µs) | get hit p99 (µs) | get hit median, no verify (µs) | "
           "get miss median (µs) | put median, fsync (µs) | put p99, fsync (µs) | "
           "put median, no fsync (µs) |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    size_t last = 0;
    char dir[600];
    FILE *json = bench_json_begin(json_path, "store_file", argc, argv);
    if (json)
        fprintf(json, "{\"value_size\": %zu, \"samples\": %zu, \"sizes\": [", vsize, samples);
    for (const char *p = sizes; *p;) {
        size_t n = strtoul(p, (char **)&p, 10);
        if (*p == ',')
            p++;
        if (!n)
            continue;
        snprintf(dir, sizeof dir, "%s/n%zu", base, n);
        fill(dir, n, value, vsize);
        latency r = measure(dir, n, value, vsize, samples);
        printf("| %zu | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.1f |\n", n, r.hit_med,
               r.hit_p99, r.hit_noverify_med, r.miss_med, r.put_med, r.put_p99, r.put_nosync_med);
        fflush(stdout);
        if (json)
            fprintf(json,
                    "%s{\"entries\": %zu, \"hit_median_us\": %.2f, \"hit_p99_us\": %.2f, "
                    "\"hit_noverify_median_us\": %.2f, \"miss_median_us\": %.2f, "
                    "\"put_median_us\": %.1f, \"put_p99_us\": %.1f, "
                    "\"put_nofsync_median_us\": %.1f}",
                    last ? ", " : "", n, r.hit_med, r.hit_p99, r.hit_noverify_med, r.miss_med,
                    r.put_med, r.put_p99, r.put_nosync_med);
        last = n;
    }
    if (last && cap_puts) {
        snprintf(dir, sizeof dir, "%s/n%zu", base, last);
        double sync = capped_throughput(dir, last, value, vsize, cap_puts / 4, 0);
        double nosync = capped_throughput(dir, last, value, vsize, cap_puts, PROGCACHE_FILE_NO_FSYNC);
        printf("\nputs with the cap full at %zu entries (new keys, each put over the cap):\n"
               "  fsync on:  %.0f puts/s (%zu puts)\n  fsync off: %.0f puts/s (%zu puts)\n",
               last, sync, cap_puts / 4, nosync, cap_puts);
        if (json)
            fprintf(json, "], \"capped\": {\"entries\": %zu, \"puts_per_s_fsync\": %.1f, "
                          "\"puts_per_s_nofsync\": %.1f",
                    last, sync, nosync);
    }
    if (json) {
        fputs(last && cap_puts ? "}}" : "]}", json);
        bench_json_end(json, json_path);
    }
    free(value);
    if (made)
        bench_remove_tree(base);
    return 0;
}
