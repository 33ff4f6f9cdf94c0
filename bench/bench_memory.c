/* bench_memory: latency of a memory-store hit through the cache API.
 *
 * For 10, 1,000 and 100,000 entries of 5.6 KiB (the size of the PTX/CUBIN
 * in cuda.core's reference measurements), fill a memory-only cache, then
 * time single progcache_get hits on random keys into one reused buffer and
 * print the median and 99th percentile.
 *
 *   bench_memory [samples]      (default 200000 samples per row)
 *
 * Uses only the public headers. */
#include <progcache/progcache.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define VALUE_SIZE 5734 /* 5.6 KiB */
#define KEY_SIZE 32     /* a cuda.core key is a SHA-256 digest */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void make_key(unsigned char *key, unsigned int i)
{
    /* Spread i over all 32 bytes so keys differ everywhere, like digests. */
    unsigned int x = i * 2654435761u + 1;
    for (int j = 0; j < KEY_SIZE; j++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        key[j] = (unsigned char)x;
    }
    memcpy(key, &i, sizeof i); /* guarantees uniqueness */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(unsigned int entries, unsigned int samples)
{
    int rc = 1;
    progcache_store *mem = NULL;
    progcache *cache = NULL;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned char *value = malloc(VALUE_SIZE);
    double *t = malloc(samples * sizeof *t);
    unsigned char key[KEY_SIZE];
    if (!value || !t)
        goto done;
    for (int i = 0; i < VALUE_SIZE; i++)
        value[i] = (unsigned char)(i * 7);

    progcache_memory_options mopts = PROGCACHE_MEMORY_OPTIONS_INIT;
    mopts.max_size = (uint64_t)entries * VALUE_SIZE * 2;
    if (progcache_store_memory_new(&mem, &mopts) != PROGCACHE_OK)
        goto done;
    if (progcache_open_tiers(&cache, &mem, 1, NULL) != PROGCACHE_OK)
        goto done;
    mem = NULL;
    for (unsigned int i = 0; i < entries; i++) {
        make_key(key, i);
        if (progcache_put(cache, key, sizeof key, value, VALUE_SIZE) != PROGCACHE_OK)
            goto done;
    }

    unsigned int x = 88172645u;
    for (unsigned int s = 0; s < samples; s++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        make_key(key, x % entries);
        double t0 = now_ns();
        int r = progcache_get(&buf, cache, key, sizeof key);
        t[s] = now_ns() - t0;
        if (r != PROGCACHE_OK || buf.size != VALUE_SIZE)
            goto done;
    }
    qsort(t, samples, sizeof *t, cmp_double);
    printf("| %9u | %10.0f | %10.0f |\n", entries, t[samples / 2], t[samples * 99 / 100]);
    rc = 0;

done:
    if (rc)
        fprintf(stderr, "bench_memory: %s\n", progcache_error_last());
    progcache_buf_free(&buf);
    progcache_close(cache);
    progcache_store_free(mem);
    free(t);
    free(value);
    return rc;
}

static const char usage_text[] =
    "usage: bench_memory [samples]   (samples: 1 to 100000000)\n"
    "\n"
    "Latency of a memory-tier hit through the cache API at 10, 1,000 and 100,000\n"
    "entries (no GPU needed).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    unsigned int samples = 200000;
    if (argc > 1) {
        char *end;
        unsigned long n = strtoul(argv[1], &end, 10);
        if (*end || n == 0 || n > 100000000ul) {
            fputs(usage_text, stderr);
            return 2;
        }
        samples = (unsigned int)n;
    }
    /* Each sample includes one clock read; print what that costs alone. */
    double clock_cost[1001];
    for (int i = 0; i < 1001; i++) {
        double t0 = now_ns();
        clock_cost[i] = now_ns() - t0;
    }
    qsort(clock_cost, 1001, sizeof clock_cost[0], cmp_double);
    printf("memory tier: progcache_get hit, %d-byte values, %u samples per row\n"
           "(each sample includes a clock read: median %.0f ns alone)\n\n",
           VALUE_SIZE, samples, clock_cost[500]);
    printf("|   entries | median, ns |    p99, ns |\n");
    printf("|----------:|-----------:|-----------:|\n");
    static const unsigned int sizes[] = {10, 1000, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (run(sizes[i], samples))
            return 1;
    return 0;
}
