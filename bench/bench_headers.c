/* bench_headers: what headers on disk add to a cache HIT (docs/KEY.md,
 * "The manifest"; docs/PERFORMANCE.md).
 *
 * One process, one cache directory, no GPU (PROGCACHE_PROGRAM_NO_LOAD: the
 * key and the lookup only). Programs that include 0, 1, 10 and 100 header
 * files (quoted, from one -I directory, each its own file) are compiled
 * once; the headers are then left alone for 3 s, past the "too new"
 * window, so that their stats vouch for them; then each program is
 * looked up --samples times, in turn, and the median and 90th percentile
 * of a whole progcache_compile_or_load() HIT are printed, with the
 * difference from the program without headers per header. A hit of a
 * program with headers reads its manifest entry and stats each header
 * (and each directory where one was looked for) instead of reading the
 * headers.
 *
 *   bench_headers [--samples N] [--dir DIR] [--memory]
 *     --memory  also a memory tier over the directory (progcache_open's
 *               memory_size): the manifest and the artifact come from it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"

#define MAX_HEADERS 100

static const int counts[] = {0, 1, 10, 100};
#define NUM_COUNTS (sizeof counts / sizeof counts[0])

/* A program including n headers h0.h ... from inc/. */
static char *source(int n)
{
    size_t cap = 64 + (size_t)n * 32;
    char *s = malloc(cap);
    size_t at = 0;
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(s + at, cap - at, "#include \"h%d.h\"\n", i);
    snprintf(s + at, cap - at, "extern \"C\" __global__ void k%d(int *a) { a[0] = %d; }\n", n, n);
    return s;
}

static const char usage_text[] =
    "usage: bench_headers [--samples N] [--dir DIR] [--memory] [--json FILE]\n"
    "\n"
    "What 1, 10 and 100 headers on disk (or in memory) add to a cache HIT\n"
    "(no GPU needed).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    int samples = 2001, memory = 0;
    const char *dir_arg = NULL, *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--samples") && i + 1 < argc)
            samples = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir_arg = argv[++i];
        else if (!strcmp(argv[i], "--memory"))
            memory = 1;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    if (samples < 11)
        samples = 11;
    char tmpl[] = "/tmp/bench-headers-XXXXXX";
    const char *base = dir_arg ? dir_arg : mkdtemp(tmpl);
    if (!base || chdir(base) != 0 || (mkdir("inc", 0755) != 0 && !dir_arg)) {
        perror("bench_headers: work directory");
        return 1;
    }
    for (int i = 0; i < MAX_HEADERS; i++) {
        char path[64];
        snprintf(path, sizeof path, "inc/h%d.h", i);
        FILE *f = fopen(path, "w");
        fprintf(f, "// header %d\n#define H%d %d\n", i, i, i);
        fclose(f);
    }
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.memory_size = memory ? 64 << 20 : 0;
    progcache *cache = NULL;
    if (progcache_open(&cache, "cache", &o)) {
        fprintf(stderr, "bench_headers: %s\n", progcache_error_last());
        return 1;
    }
    const char *options[] = {"-arch=sm_90", "-Iinc"};
    progcache_program prog[NUM_COUNTS];
    char *sources[NUM_COUNTS];
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    for (size_t c = 0; c < NUM_COUNTS; c++) {
        sources[c] = source(counts[c]);
        progcache_program_init(&prog[c]);
        prog[c].nvrtc.source = sources[c];
        prog[c].nvrtc.options = options;
        /* The program without headers has no -I: cuda.core's plain key,
         * the baseline of every hit. */
        prog[c].nvrtc.num_options = counts[c] ? 2 : 1;
        prog[c].flags = PROGCACHE_PROGRAM_NO_LOAD;
        if (progcache_compile_or_load(&r, cache, &prog[c])) {
            fprintf(stderr, "bench_headers: %s\n", progcache_error_last());
            return 1;
        }
    }
    /* Past the "too new" window (2 s, by modification and change time),
     * then one hit each to write manifests whose stats vouch for them. */
    sleep(3);
    for (size_t c = 0; c < NUM_COUNTS; c++)
        progcache_compile_or_load(&r, cache, &prog[c]);

    double *t[NUM_COUNTS];
    for (size_t c = 0; c < NUM_COUNTS; c++)
        t[c] = malloc((size_t)samples * sizeof **t);
    for (int s = 0; s < samples; s++)
        for (size_t c = 0; c < NUM_COUNTS; c++) {
            double t0 = bench_now_us();
            int rc = progcache_compile_or_load(&r, cache, &prog[c]);
            t[c][s] = bench_now_us() - t0;
            if (rc || r.status != PROGCACHE_STATUS_HIT) {
                fprintf(stderr, "bench_headers: not a hit (%s)\n", progcache_error_last());
                return 1;
            }
        }
    printf("bench_headers: HIT of progcache_compile_or_load (NO_LOAD), %s, %d samples each\n",
           memory ? "memory tier over the cache directory" : "cache directory", samples);
    printf("%-10s %12s %12s %18s\n", "headers", "median us", "p90 us", "extra per header");
    /* The two tiers are two runs, so two benchmarks to plot_perf.py. */
    FILE *json = bench_json_begin(json_path, memory ? "headers_memory" : "headers", argc, argv);
    if (json)
        fprintf(json, "{\"tier\": \"%s\", \"samples\": %d, \"programs\": [",
                memory ? "memory tier over the cache directory" : "cache directory", samples);
    double base_median = 0;
    for (size_t c = 0; c < NUM_COUNTS; c++) {
        qsort(t[c], (size_t)samples, sizeof **t, bench_cmp_double);
        double median = t[c][samples / 2], p90 = t[c][samples * 9 / 10];
        if (c == 0)
            base_median = median;
        if (counts[c])
            printf("%-10d %12.1f %12.1f %15.2f us\n", counts[c], median, p90,
                   (median - base_median) / counts[c]);
        else
            printf("%-10s %12.1f %12.1f %18s\n", "none", median, p90, "-");
        if (json) {
            fprintf(json, "%s{\"headers\": %d, \"median_us\": %.1f, \"p90_us\": %.1f",
                    c ? ", " : "", counts[c], median, p90);
            if (counts[c])
                fprintf(json, ", \"extra_per_header_us\": %.2f",
                        (median - base_median) / counts[c]);
            fputc('}', json);
        }
        free(t[c]);
        free(sources[c]);
    }
    if (json) {
        fputs("]}", json);
        bench_json_end(json, json_path);
    }
    progcache_program_result_release(&r);
    progcache_close(cache);
    if (!dir_arg)
        bench_remove_tree(base);
    return 0;
}
