/* bench_single_flight: N processes start together on an empty cache and
 * all need the same kernel. Counts NVRTC compiles and measures the wall
 * time until every process has its artifact, with single-flight (the
 * default) and without it (PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT, which is
 * what cuda.core's sample does: one compile per process).
 *
 *   bench_single_flight [--procs 16] [--rounds 5] [--arch sm_90] [--dir DIR]
 *
 * Compile only (PROGCACHE_PROGRAM_NO_LOAD): no GPU needed. Prints a
 * markdown table of medians over the rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/cuda.h"
#include "progcache/progcache.h"


/* A child: start up (open the cache, make the source), say it is ready,
 * wait for the start signal, get the kernel; exit 10 if it compiled, 11 if
 * it did not (a hit, after waiting or not), 1 on error. The barrier after
 * start-up is what makes "one compile per process" measure that: without
 * it, on a small machine, processes still opening their cache found the
 * artifact the first ones had stored (issue 32). */
static int child(const char *dir, const char *arch_opt, unsigned int flags, int start_fd,
                 int ready_fd, const char *salt)
{
    char go = 'r';
    progcache *cache;
    if (progcache_open(&cache, dir, NULL))
        return 1;
    /* A per-round comment makes each round's key new (an empty cache). */
    char *src = malloc(sizeof bench_matmul_source + 64);
    snprintf(src, sizeof bench_matmul_source + 64, "// round %s\n%s", salt, bench_matmul_source);
    if (write(ready_fd, &go, 1) != 1 || read(start_fd, &go, 1) != 1)
        return 1;
    const char *opts[] = {arch_opt, "--std=c++17"};
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = src;
    p.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    p.nvrtc.options = opts;
    p.nvrtc.num_options = 2;
    p.flags = PROGCACHE_PROGRAM_NO_LOAD | flags;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    int rc = progcache_compile_or_load(&r, cache, &p);
    int compiled = r.status == PROGCACHE_STATUS_MISS;
    progcache_program_result_release(&r);
    progcache_close(cache);
    free(src);
    if (rc) {
        fprintf(stderr, "child: %s\n", progcache_error_last());
        return 1;
    }
    return compiled ? 10 : 11;
}

static void round_once(const char *dir, const char *arch_opt, int procs, unsigned int flags,
                       int round, double *wall, int *compiles)
{
    int pipefd[2], readyfd[2];
    if (pipe(pipefd) != 0 || pipe(readyfd) != 0) {
        perror("pipe");
        exit(1);
    }
    char salt[32];
    snprintf(salt, sizeof salt, "%d-%u-%ld", round, flags, (long)getpid());
    pid_t *pids = calloc((size_t)procs, sizeof *pids);
    for (int i = 0; i < procs; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(pipefd[1]);
            close(readyfd[0]);
            _exit(child(dir, arch_opt, flags, pipefd[0], readyfd[1], salt));
        }
    }
    close(pipefd[0]);
    close(readyfd[1]);
    /* The barrier: every child has started up. */
    for (int ready = 0; ready < procs;) {
        char buf[256];
        ssize_t got = read(readyfd[0], buf, sizeof buf);
        if (got <= 0) {
            fprintf(stderr, "bench_single_flight: a process failed to start\n");
            exit(1);
        }
        ready += (int)got;
    }
    close(readyfd[0]);
    double t0 = bench_now_us() / 1e3;
    char go[256];
    memset(go, 'g', sizeof go);
    if (write(pipefd[1], go, (size_t)procs) != procs) {
        perror("write");
        exit(1);
    }
    *compiles = 0;
    for (int i = 0; i < procs; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || (WEXITSTATUS(status) != 10 && WEXITSTATUS(status) != 11)) {
            fprintf(stderr, "bench_single_flight: a process failed\n");
            exit(1);
        }
        *compiles += WEXITSTATUS(status) == 10;
    }
    *wall = bench_now_us() / 1e3 - t0;
    close(pipefd[1]);
    free(pids);
}

static const char usage_text[] =
    "usage: bench_single_flight [--procs N] [--rounds N] [--arch sm_XY] [--dir DIR]\n"
    "                           [--json FILE]\n"
    "\n"
    "N processes start together on an empty cache and need one kernel: compiles\n"
    "and wall time with and without single-flight (no GPU needed).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    int procs = 16, rounds = 5;
    const char *arch = "sm_90";
    const char *dir = NULL, *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--procs") && i + 1 < argc)
            procs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    if (procs < 1 || procs > 256 || rounds < 1) {
        fprintf(stderr, "bench_single_flight: --procs 1-256, --rounds >= 1\n");
        return 2;
    }
    char tmpl[256];
    int made = !dir;
    if (!dir) {
        snprintf(tmpl, sizeof tmpl, "/tmp/bench-sflight-XXXXXX");
        if (!mkdtemp(tmpl))
            return 1;
        dir = tmpl;
    }
    char arch_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
    printf("%d processes start together on an empty cache, one kernel (the sample's 16x16 "
           "tiled matmul, %s); %d rounds, medians\n\n",
           procs, arch, rounds);
    printf("| mode | NVRTC compiles | wall time to all ready (ms) |\n|---|---:|---:|\n");
    const struct {
        const char *name;
        unsigned int flags;
    } modes[] = {{"progcache, single-flight (default)", 0},
                 {"progcache, PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT (one compile per process, like "
                  "cuda.core)",
                  PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT}};
    FILE *json = bench_json_begin(json_path, "single_flight", argc, argv);
    if (json)
        fprintf(json, "{\"procs\": %d, \"rounds\": %d, \"arch\": \"%s\", \"modes\": [", procs,
                rounds, arch);
    for (size_t m = 0; m < 2; m++) {
        double *walls = calloc((size_t)rounds, sizeof *walls);
        double *counts = calloc((size_t)rounds, sizeof *counts);
        for (int r = 0; r < rounds; r++) {
            int c;
            round_once(dir, arch_opt, procs, modes[m].flags, r, &walls[r], &c);
            counts[r] = c;
        }
        qsort(walls, (size_t)rounds, sizeof *walls, bench_cmp_double);
        qsort(counts, (size_t)rounds, sizeof *counts, bench_cmp_double);
        printf("| %s | %.0f (min %.0f, max %.0f) | %.1f |\n", modes[m].name, counts[rounds / 2],
               counts[0], counts[rounds - 1], walls[rounds / 2]);
        if (json)
            fprintf(json,
                    "%s{\"mode\": \"%s\", \"compiles_median\": %.0f, \"compiles_min\": %.0f, "
                    "\"compiles_max\": %.0f, \"wall_ms_median\": %.1f}",
                    m ? ", " : "", m ? "one compile per process" : "single-flight",
                    counts[rounds / 2], counts[0], counts[rounds - 1], walls[rounds / 2]);
        free(walls);
        free(counts);
    }
    if (json) {
        fputs("]}", json);
        bench_json_end(json, json_path);
    }
    if (made)
        bench_remove_tree(dir);
    return 0;
}
