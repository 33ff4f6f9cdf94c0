/* bench_first_hit: what the first cache hit of a fresh process costs, step
 * by step (a program that starts, looks up its kernels and loads them pays
 * exactly this), next to the same steps repeated in a warm process.
 *
 *   bench_first_hit [--runs N] [--dir DIR]
 *
 * Spawns N fresh processes (itself, with --child); each opens the cache,
 * derives a key, reads an entry (written beforehand) twice, and reports the
 * times; the parent prints medians. No GPU: the driver load is measured by
 * the sample (docs/PERFORMANCE.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/progcache.h"

static const char source[] = "extern \"C\" __global__ void k(float *a){ a[threadIdx.x] *= 2.0f; }\n";
static const char *const options[] = {"-arch=sm_90", "--std=c++17"};

static void derive(unsigned char key[PROGCACHE_KEY_SIZE])
{
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    o.source = source;
    o.options = options;
    o.num_options = 2;
    if (progcache_key_nvrtc(key, &o)) {
        fprintf(stderr, "key: %s\n", progcache_error_last());
        exit(1);
    }
}

enum { OPEN, KEY, GET1, GET2, KEY2, STEPS };
static const char *names[STEPS] = {"progcache_open", "first key derivation", "first get (hit)",
                                   "second get (hit)", "second key derivation"};

static int child(const char *dir, int fd)
{
    double t[STEPS];
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache *c;
    double t0 = bench_now_us();
    if (progcache_open(&c, dir, NULL))
        return 1;
    t[OPEN] = bench_now_us() - t0;
    t0 = bench_now_us();
    derive(key);
    t[KEY] = bench_now_us() - t0;
    t0 = bench_now_us();
    if (progcache_get(&buf, c, key, sizeof key))
        return 1;
    t[GET1] = bench_now_us() - t0;
    t0 = bench_now_us();
    if (progcache_get(&buf, c, key, sizeof key))
        return 1;
    t[GET2] = bench_now_us() - t0;
    t0 = bench_now_us();
    derive(key);
    t[KEY2] = bench_now_us() - t0;
    if (write(fd, t, sizeof t) != (ssize_t)sizeof t)
        return 1;
    progcache_buf_free(&buf);
    progcache_close(c);
    return 0;
}

static const char usage_text[] =
    "usage: bench_first_hit [--runs N] [--dir DIR]\n"
    "\n"
    "The first cache hit of a fresh process, step by step, next to a warm process\n"
    "(needs a GPU).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    int runs = 21;
    const char *dir = NULL;
    char tmpl[] = "/tmp/bench-first-hit-XXXXXX";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    if (runs < 1)
        runs = 1;
    int made = !dir;
    if (!dir && !(dir = mkdtemp(tmpl)))
        return 1;
    /* The entry: a 10 KiB value (a small CUBIN's size) under the key. */
    progcache *c;
    unsigned char key[PROGCACHE_KEY_SIZE];
    static unsigned char value[10240];
    if (progcache_open(&c, dir, NULL))
        return 1;
    derive(key);
    if (progcache_put(c, key, sizeof key, value, sizeof value))
        return 1;
    progcache_close(c);

    double *t = calloc((size_t)runs * STEPS, sizeof *t);
    for (int r = 0; r < runs; r++) {
        int p[2];
        if (pipe(p))
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            _exit(child(dir, p[1]));
        }
        close(p[1]);
        double one[STEPS];
        if (read(p[0], one, sizeof one) != (ssize_t)sizeof one)
            return 1;
        close(p[0]);
        waitpid(pid, NULL, 0);
        for (int s = 0; s < STEPS; s++)
            t[s * runs + r] = one[s];
    }
    printf("fresh processes: %d, medians (µs)\n\n| step | median | min | max |\n|---|---:|---:|---:|\n",
           runs);
    for (int s = 0; s < STEPS; s++) {
        double *v = t + s * runs;
        qsort(v, (size_t)runs, sizeof *v, bench_cmp_double);
        printf("| %s | %.1f | %.1f | %.1f |\n", names[s], v[runs / 2], v[0], v[runs - 1]);
    }
    free(t);
    if (made)
        bench_remove_tree(dir);
    return 0;
}
