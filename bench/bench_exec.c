/* bench_exec: whole-process wall time of a program that calls NVRTC itself
 * (tests/intercept/nvrtc_client.c, linked with -lnvrtc) for one repeated
 * compile: run plain (NVRTC compiles every time: without a driver NVRTC's
 * own cache is off), under `progcache exec` into an empty cache (MISS), and
 * under `progcache exec` again (HIT: replayed, no real compile; through the
 * stand-in for libnvrtc.so.13, NVRTC never mapped), the same HIT with
 * PROGCACHE_INTERCEPT_STANDIN=off (the program maps NVRTC: the route before
 * the stand-in, measured side by side, runs interleaved), and with
 * LD_AUDIT set directly (HIT, without the wrapper's own start), with the
 * stand-in and without; and the
 * cost of the interceptor on a process that never calls NVRTC (/bin/true).
 * Two kernels: a small template kernel, and a header-heavy one (CUB's
 * BlockReduce from the toolkit's CCCL).
 *
 *   bench_exec --client PATH [--progcache PATH] [--runs N] [--heavy-runs N]
 *              [--json FILE]
 *
 * Prints medians in milliseconds. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

extern char **environ;

static const char usage[] =
    "usage: bench_exec --client PATH [--progcache PATH] [--runs N] [--heavy-runs N]\n"
    "                  [--json FILE]\n"
    "Whole-process wall time of a repeated NVRTC compile, plain and under\n"
    "`progcache exec` (MISS, HIT), small and header-heavy kernels; and the\n"
    "interceptor's cost on /bin/true. PATH: build/tests/intercept/nvrtc_client_runpath.\n";

static const char heavy_source[] =
    "#include <cub/block/block_reduce.cuh>\n"
    "template <typename T> __global__ void scale(T *x, T a) {\n"
    "    using R = cub::BlockReduce<T, 128>;\n"
    "    __shared__ typename R::TempStorage tmp;\n"
    "    T s = R(tmp).Sum(x[threadIdx.x]);\n"
    "    if (threadIdx.x == 0) x[0] = s * a;\n"
    "}\n";

/* The environment of a run: the caller's, or that with LD_AUDIT and
 * PROGCACHE_DIR added (the route without the wrapper). */
static char **run_env;

/* Run argv with stdout/stderr to /dev/null; the wall time in ms, or -1. */
static double run(char *const argv[])
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    double t0 = bench_now_us();
    pid_t pid;
    int status = 0;
    if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, run_env ? run_env : environ) != 0 ||
        waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    return (bench_now_us() - t0) / 1000.0;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct row {
    const char *name;
    double plain, miss, hit, audit_hit, mapped_hit, audit_mapped_hit;
} row;

#define MODES 6

static const char *module_path; /* the interceptor, from `progcache exec --where` */

/* environ with PROGCACHE_INTERCEPT_STANDIN=off (standin_off) and, with
 * audit, LD_AUDIT=module_path and PROGCACHE_DIR=dir in front. */
static char **audit_env(const char *dir, int audit, int standin_off)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **e = calloc(n + 4, sizeof *e);
    if (!e)
        return NULL;
    size_t k = 0;
    if ((standin_off && !(e[k++] = strdup("PROGCACHE_INTERCEPT_STANDIN=off"))) ||
        (audit && (asprintf(&e[k++], "LD_AUDIT=%s", module_path) < 0 ||
                   asprintf(&e[k++], "PROGCACHE_DIR=%s", dir) < 0)))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_AUDIT=", 9) && strncmp(environ[i], "PROGCACHE_DIR=", 14) &&
            strncmp(environ[i], "PROGCACHE_INTERCEPT_STANDIN=", 28))
            e[k++] = environ[i];
    return e;
}

/* One kernel: n plain runs, n MISS runs (each into a fresh cache), n HIT
 * runs (on the last cache), n HIT runs with LD_AUDIT set directly (no
 * wrapper), n HIT runs with the stand-in off; interleaved (run i of each
 * mode, then run i + 1), so that a loaded machine weighs on all alike.
 * Extra client arguments in extra. */
static int measure(row *r, const char *prog, const char *client, const char *tmp, int n,
                   char **extra, int nextra)
{
    double *t[MODES];
    for (int k = 0; k < MODES; k++)
        if (!(t[k] = calloc((size_t)n, sizeof(double))))
            return -1;
    char out[4096], cache[4096];
    snprintf(out, sizeof out, "%s/out", tmp);
    char *argv[32];
    for (int i = 0; i < n; i++) {
        for (int mode = 0; mode < MODES; mode++) {
            int a = 0;
            snprintf(cache, sizeof cache, "%s/cache-%s-%d", tmp, r->name, mode == 1 ? i : n);
            /* 3, 5: LD_AUDIT without the wrapper; 4, 5: the stand-in off. */
            run_env = mode >= 3 ? audit_env(cache, mode != 4, mode >= 4) : NULL;
            if (mode == 1 || mode == 2 || mode == 4) {
                argv[a++] = (char *)prog;
                argv[a++] = "exec";
                argv[a++] = "-d";
                argv[a++] = cache;
                argv[a++] = "--";
            }
            argv[a++] = (char *)client;
            argv[a++] = out;
            for (int e = 0; e < nextra; e++)
                argv[a++] = extra[e];
            argv[a] = NULL;
            if (mode == 2 && i == 0 && run(argv) < 0) /* fill the HIT cache */
                return -1;
            t[mode][i] = run(argv);
            if (run_env) {
                for (int k = 0; k < (mode == 4 ? 1 : mode == 5 ? 3 : 2); k++)
                    free(run_env[k]);
                free(run_env);
                run_env = NULL;
            }
            if (t[mode][i] < 0) {
                fprintf(stderr, "bench_exec: %s failed\n", client);
                return -1;
            }
        }
    }
    r->plain = median(t[0], n);
    r->miss = median(t[1], n);
    r->hit = median(t[2], n);
    r->audit_hit = median(t[3], n);
    r->mapped_hit = median(t[4], n);
    r->audit_mapped_hit = median(t[5], n);
    for (int k = 0; k < MODES; k++)
        free(t[k]);
    return 0;
}

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage);
    const char *client = NULL, *prog = getenv("PROGCACHE_BIN"), *json = NULL;
    int runs = 11, heavy_runs = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--client"))
            client = argv[i + 1];
        else if (!strcmp(argv[i], "--progcache"))
            prog = argv[i + 1];
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--heavy-runs"))
            heavy_runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--json"))
            json = argv[i + 1];
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (!client || !prog || runs < 1 || heavy_runs < 1) {
        fputs(usage, stderr);
        return 2;
    }
    /* The interceptor's path, as the wrapper finds it. */
    char where[4096] = "", cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' exec --where", prog);
    FILE *w = popen(cmd, "r");
    if (!w || !fgets(where, sizeof where, w) || pclose(w) != 0) {
        fprintf(stderr, "bench_exec: %s exec --where failed\n", prog);
        return 1;
    }
    where[strcspn(where, "\n")] = '\0';
    module_path = where;
    char tmp[] = "/tmp/bench_exec.XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    char src[4096], inc[4200], inc2[4200];
    snprintf(src, sizeof src, "%s/heavy.cu", tmp);
    FILE *f = fopen(src, "w");
    if (!f || fputs(heavy_source, f) < 0 || fclose(f))
        return 1;
    /* CCCL's headers, and the toolkit's (they include <cuda/std/...>). */
    snprintf(inc, sizeof inc, "-I%s", PROGCACHE_CUDA_INCLUDE);
    snprintf(inc2, sizeof inc2, "-I%s/..", PROGCACHE_CUDA_INCLUDE);
    char *small_extra[] = {"-arch=sm_90"};
    char *heavy_extra[] = {"--source", src, "-arch=sm_90", "--std=c++17", inc, inc2};
    row rows[2] = {{"small", 0, 0, 0, 0, 0, 0}, {"header-heavy", 0, 0, 0, 0, 0, 0}};
    int rc = measure(&rows[0], prog, client, tmp, runs, small_extra, 1) ||
             measure(&rows[1], prog, client, tmp, heavy_runs, heavy_extra, 6);
    /* The interceptor on a process without NVRTC. */
    double *tt = calloc((size_t)runs * 2, sizeof(double));
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/cache-true", tmp);
    char *plain_true[] = {"/bin/true", NULL};
    char *exec_true[] = {(char *)prog, "exec", "-d", cache, "--", "/bin/true", NULL};
    char *env_true[] = {"/usr/bin/env", "/bin/true", NULL}; /* one exec more, like exec's */
    for (int i = 0; !rc && tt && i < runs; i++) {
        (void)run(plain_true);
        tt[i] = run(env_true);
        tt[runs + i] = run(exec_true);
    }
    bench_remove_tree(tmp);
    if (rc || !tt)
        return 1;
    double true_plain = median(tt, runs), true_exec = median(tt + runs, runs);
    printf("whole process, median ms (%d runs; header-heavy %d)\n", runs, heavy_runs);
    printf("%-13s %9s %10s %9s %15s %13s %18s\n", "kernel", "plain", "exec MISS", "exec HIT",
           "exec HIT, NVRTC", "LD_AUDIT HIT", "LD_AUDIT HIT, NVRTC");
    printf("%-13s %9s %10s %9s %15s %13s %18s\n", "", "", "", "stand-in", "mapped", "stand-in",
           "mapped");
    for (int i = 0; i < 2; i++)
        printf("%-13s %9.1f %10.1f %9.1f %15.1f %13.1f %18.1f\n", rows[i].name, rows[i].plain,
               rows[i].miss, rows[i].hit, rows[i].mapped_hit, rows[i].audit_hit,
               rows[i].audit_mapped_hit);
    printf("/bin/true: %.2f ms through env(1), %.2f ms through progcache exec\n", true_plain,
           true_exec);
    FILE *j = bench_json_begin(json, "bench_exec", argc, argv);
    if (j) {
        fprintf(j, "{\"runs\": %d, \"heavy_runs\": %d", runs, heavy_runs);
        for (int i = 0; i < 2; i++)
            fprintf(j, ", \"%s\": {\"plain_ms\": %.3f, \"miss_ms\": %.3f, \"hit_ms\": %.3f, "
                    "\"hit_nvrtc_mapped_ms\": %.3f, \"audit_hit_ms\": %.3f, "
                    "\"audit_hit_nvrtc_mapped_ms\": %.3f}", rows[i].name, rows[i].plain,
                    rows[i].miss, rows[i].hit, rows[i].mapped_hit, rows[i].audit_hit,
                    rows[i].audit_mapped_hit);
        fprintf(j, ", \"true_env_ms\": %.3f, \"true_exec_ms\": %.3f}", true_plain, true_exec);
        bench_json_end(j, json);
    }
    free(tt);
    return 0;
}
