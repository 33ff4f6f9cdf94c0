/* bench_remote: one remote tier by its URL (redis://, http://, https://,
 * s3://: whatever progcache_store_open_url opens), timed through the
 * public store interface over loopback: a get that hits, a get that
 * misses, a put written through to the server (put, then flush: what the
 * background thread pays) and a put as the caller pays it (queued).
 * Medians and p99 in microseconds, one markdown row; bench/bench_remote.py
 * starts Redis, nginx and moto and runs this once for each.
 *
 *   bench_remote URL [--value-size N] [--samples N] [--label NAME]
 *
 * The tier's credentials come from the environment as for a program
 * (PROGCACHE_REMOTE_AUTH_FILE, AWS_*). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "progcache/progcache.h"
#include "progcache/sys/store.h" /* progcache_store_open_url */

static const char usage[] =
    "usage: bench_remote URL [--value-size N] [--samples N] [--label NAME]\n"
    "  get-hit, get-miss, put (written through) and put (queued) latency of the\n"
    "  remote tier URL names: medians and p99 in microseconds, one markdown row.\n";

static void die(const char *what)
{
    fprintf(stderr, "bench_remote: %s: %s\n", what, progcache_error_last());
    exit(1);
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return v[(size_t)(p * (double)(n - 1))];
}

static void make_key(unsigned char key[32], size_t i, long run)
{
    memset(key, 0, 32);
    snprintf((char *)key, 32, "bench-%ld-%zu", run, i);
}

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *url = argv[1], *label = url;
    size_t value_size = 64 << 10, samples = 200;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--value-size"))
            value_size = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--samples"))
            samples = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--label"))
            label = argv[i + 1];
    }
    progcache_store *s = NULL;
    if (progcache_store_open_url(&s, url, NULL) != PROGCACHE_OK)
        die("open");
    unsigned char *value = malloc(value_size), key[32];
    double *v = malloc(samples * sizeof *v), put_med, put_p99, queued_med;
    if (!value || !v)
        die("out of memory");
    for (size_t i = 0; i < value_size; i++)
        value[i] = (unsigned char)(i * 131 + 7);
    long run = (long)time(NULL);
    /* Written through: put, then wait for the background write. */
    for (size_t i = 0; i < samples; i++) {
        make_key(key, i, run);
        double t0 = bench_now_us();
        if (progcache_store_put(s, key, 32, value, value_size) ||
            progcache_store_flush(s))
            die("put");
        v[i] = bench_now_us() - t0;
    }
    put_med = pct(v, samples, 0.5);
    put_p99 = pct(v, samples, 0.99);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    double hit_med, hit_p99, miss_med;
    for (size_t i = 0; i < samples; i++) {
        make_key(key, (i * 7919) % samples, run);
        double t0 = bench_now_us();
        int rc = progcache_store_get(&buf, s, key, 32);
        v[i] = bench_now_us() - t0;
        if (rc || buf.size != value_size)
            die("get (hit)");
    }
    hit_med = pct(v, samples, 0.5);
    hit_p99 = pct(v, samples, 0.99);
    for (size_t i = 0; i < samples; i++) {
        make_key(key, samples + i, run);
        double t0 = bench_now_us();
        int rc = progcache_store_get(&buf, s, key, 32);
        v[i] = bench_now_us() - t0;
        if (rc != PROGCACHE_ENOTFOUND)
            die("get (miss)");
    }
    miss_med = pct(v, samples, 0.5);
    /* As the caller pays it: into the queue (flushed now and then so it
     * never fills). */
    for (size_t i = 0; i < samples; i++) {
        make_key(key, 2 * samples + i, run);
        double t0 = bench_now_us();
        if (progcache_store_put(s, key, 32, value, value_size))
            die("put (queued)");
        v[i] = bench_now_us() - t0;
        if (i % 16 == 15)
            progcache_store_flush(s);
    }
    queued_med = pct(v, samples, 0.5);
    progcache_store_flush(s);
    progcache_store_free(s);
    printf("| %s | %zu | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f |\n", label, value_size,
           hit_med, hit_p99, miss_med, put_med, put_p99, queued_med);
    progcache_buf_free(&buf);
    free(value);
    free(v);
    return 0;
}
