/* bench_pch: what the PCH tier saves on misses (issue 17; docs/PERFORMANCE.md).
 *
 * Twenty variants of a kernel that includes <cub/block/block_reduce.cuh>
 * and <cuda_fp16.h> (they differ after the includes: a constant and the
 * block size), each a new key, so every compile is an entry-cache miss.
 *
 *  1. Fresh processes: each variant compiled by a new process (fork, exec,
 *     library load, progcache_compile_or_load with NO_LOAD, exit), timed
 *     from fork to reaped exit, without the tier (PROGCACHE_PROGRAM_NO_PCH,
 *     its own cache directory), with it (one cache directory whose PCH
 *     tier starts empty: the first variant's compile is plain and a
 *     detached helper makes the PCH, later ones use it, through the warm
 *     helper once one is there), and with --cold also with it but
 *     PROGCACHE_PCH_WARM=0 (a fresh helper for every compile with the
 *     PCH). The modes take turns variant by variant, and which goes first
 *     rotates too, so load drift on a shared machine hits all alike.
 *  2. One process per mode compiling all twenty variants (a long-running
 *     program): without the tier, with it (through the helper), and with
 *     PROGCACHE_PCH=inprocess (PCHs of that process only). The three
 *     processes run in lockstep, one variant each in turn.
 *
 * Prints every time, the medians side by side and the totals, and where a
 * fresh process's compile with the PCH goes (the medians of variants 2 on:
 * the process's start, the cache's open, the key, the lookup, the tier's
 * find and check of the PCH, the helper and its NVRTC compile, the store,
 * the close, the exit).
 *
 * usage: bench_pch [--variants N] [--cold]   (default 20)
 * The helper is $PROGCACHE_PCH_HELPER, else the one built with this bench.
 * NVRTC needs no GPU. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#ifndef BENCH_PCH_HELPER
#define BENCH_PCH_HELPER ""
#endif
#ifndef BENCH_CUDA_INCLUDE
#define BENCH_CUDA_INCLUDE "/usr/local/cuda/include"
#endif
#define MAX_VARIANTS 100

static char *source_of(int v)
{
    static char buf[2048];
    int block = 32 * (1 + v % 8);
    snprintf(buf, sizeof buf,
             "#include <cub/block/block_reduce.cuh>\n"
             "#include <cuda_fp16.h>\n"
             "\n"
             "constexpr float kScale = %d.5f;\n"
             "extern \"C\" __global__ void reduce_v%d(const __half *in, float *out)\n"
             "{\n"
             "    using BlockReduce = cub::BlockReduce<float, %d>;\n"
             "    __shared__ typename BlockReduce::TempStorage tmp;\n"
             "    float x = __half2float(in[blockIdx.x * %d + threadIdx.x]) * kScale;\n"
             "    float s = BlockReduce(tmp).Sum(x);\n"
             "    if (threadIdx.x == 0)\n"
             "        out[blockIdx.x] = s;\n"
             "}\n",
             v, v, block, block);
    return buf;
}

/* Where one fresh process's time went (ms since fork). */
typedef struct phases {
    double main, open, call, key, lookup, compile, store, close;
    /* The PCH tier's, when it used a PCH (its DEBUG message). */
    double find, helper, nvrtc, answer, eof, tier;
} phases;

static phases now_phases;

/* The tier's account of a hit (a DEBUG message, pch_compile.c). */
static void tier_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level >= PROGCACHE_LOG_INFO && getenv("BENCH_PCH_VERBOSE"))
        fprintf(stderr, "bench_pch: %s\n", message);
    const char *p = strstr(message, "used: find ");
    if (level == PROGCACHE_LOG_DEBUG && p)
        (void)sscanf(p,
                     "used: find %lf ms (file %*[a-z ]), helper %lf ms (its NVRTC compile %lf "
                     "ms; answer at %lf ms, its end at %lf ms), the tier's state %lf",
                     &now_phases.find, &now_phases.helper, &now_phases.nvrtc, &now_phases.answer,
                     &now_phases.eof, &now_phases.tier);
}

/* Compile variant v through the cache at dir; the compile's time in ms. */
static double compile_one(progcache *cache, int v, int pch)
{
    static const char *options[] = {"-I" BENCH_CUDA_INCLUDE "/cccl", "-I" BENCH_CUDA_INCLUDE,
                                    "-arch=sm_90", "--std=c++17"};
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = source_of(v);
    p.nvrtc.options = options;
    p.nvrtc.num_options = 4;
    p.nvrtc.name = "reduce.cu";
    /* The headers never change here; a real program digests them. */
    p.nvrtc.extra_digest = (const unsigned char *)"bench_pch headers";
    p.nvrtc.extra_digest_len = 17;
    p.flags = PROGCACHE_PROGRAM_NO_LOAD | (pch ? 0 : PROGCACHE_PROGRAM_NO_PCH);
    p.log = tier_log;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    double t = bench_now_us();
    int rc = progcache_compile_or_load(&r, cache, &p);
    t = (bench_now_us() - t) / 1e3;
    if (rc || r.status != PROGCACHE_STATUS_MISS) {
        fprintf(stderr, "bench_pch: variant %d: %s (%s)\n", v, progcache_strerror(rc),
                rc ? progcache_error_last() : progcache_status_name(r.status));
        exit(1);
    }
    now_phases.key = r.key_ms;
    now_phases.lookup = r.lookup_ms;
    now_phases.compile = r.compile_ms;
    now_phases.store = r.store_ms;
    progcache_program_result_release(&r);
    return t;
}

static progcache *open_or_die(const char *dir)
{
    progcache *cache;
    if (progcache_open(&cache, dir, NULL) != PROGCACHE_OK) {
        fprintf(stderr, "bench_pch: %s\n", progcache_error_last());
        exit(1);
    }
    return cache;
}

/* --one DIR V MODE: compile one variant in this process and exit; with
 * BENCH_PCH_T0 (the fork's time) and BENCH_PCH_PHASES (a file), append
 * where the time went to that file. */
static int one(const char *dir, int v, int pch)
{
    const char *t0s = getenv("BENCH_PCH_T0"), *out = getenv("BENCH_PCH_PHASES");
    double t0 = t0s ? atof(t0s) : bench_now_us();
    now_phases.main = (bench_now_us() - t0) / 1e3;
    progcache *cache = open_or_die(dir);
    now_phases.open = (bench_now_us() - t0) / 1e3;
    now_phases.call = compile_one(cache, v, pch != 0);
    progcache_close(cache);
    now_phases.close = (bench_now_us() - t0) / 1e3;
    FILE *f = out ? fopen(out, "a") : NULL;
    if (f) {
        const phases *p = &now_phases;
        fprintf(f, "%d %d %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f\n",
                v, pch, p->main, p->open, p->call, p->key, p->lookup, p->compile, p->store,
                p->close, p->find, p->helper, p->nvrtc, p->answer, p->eof, p->tier);
        fclose(f);
    }
    return 0;
}

/* --serve DIR MODE: compile the variant named on each stdin line; answer
 * with its time. */
static int serve(const char *dir, int pch)
{
    progcache *cache = open_or_die(dir);
    int v;
    while (scanf("%d", &v) == 1) {
        memset(&now_phases, 0, sizeof now_phases);
        printf("%.1f\n", compile_one(cache, v, pch));
        fflush(stdout);
        /* BENCH_PCH_TRACE: the tier's account of each hit, on stderr. */
        if (getenv("BENCH_PCH_TRACE") && now_phases.helper > 0)
            fprintf(stderr, "bench_pch: serve %d: compile %.1f, find %.1f, helper %.1f (start "
                            "%.1f, NVRTC %.1f, answer and exit %.1f)\n",
                    v, now_phases.compile, now_phases.find, now_phases.helper,
                    now_phases.answer - now_phases.nvrtc, now_phases.nvrtc,
                    now_phases.helper - now_phases.answer);
    }
    progcache_close(cache);
    return 0;
}

static const char *self;

/* pch: 0 without the tier, 1 with it, 2 with it and no warm helper
 * (PROGCACHE_PCH_WARM=0: a fresh helper for every compile). */
static double run_fresh(const char *dir, int v, int pch)
{
    char vs[16], t0[32];
    snprintf(vs, sizeof vs, "%d", v);
    double t = bench_now_us();
    pid_t pid = fork();
    if (pid == 0) {
        snprintf(t0, sizeof t0, "%.1f", t);
        setenv("BENCH_PCH_T0", t0, 1);
        if (pch == 2)
            setenv("PROGCACHE_PCH_WARM", "0", 1);
        execl(self, self, "--one", dir, vs, pch == 2 ? "cold" : pch ? "on" : "off",
              (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_pch: variant %d (%s) failed\n", v, pch ? "on" : "off");

        exit(1);
    }
    return (bench_now_us() - t) / 1e3;
}

typedef struct server {
    const char *name;
    FILE *to, *from;
    pid_t pid;
    double ms[MAX_VARIANTS];
} server;

static void start_server(server *s, const char *dir, int pch)
{
    /* Close-on-exec: a server started later must not hold this one's
     * stdin open, or closing it would never end this one. */
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        exit(1);
    s->pid = fork();
    if (s->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl(self, self, "--serve", dir, pch ? "on" : "off", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    s->to = fdopen(in[1], "w");
    s->from = fdopen(out[0], "r");
}

static double median(const double *x, int n)
{
    double s[MAX_VARIANTS];
    memcpy(s, x, (size_t)n * sizeof *x);
    qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double sum(const double *x, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++)
        t += x[i];
    return t;
}

/* The tier's counters. pch_ms_saved is the library's estimate (the plain
 * compile time it recorded when it first saw the program, less each hit's
 * time); measured_ms is what this run measured against the plain compiles
 * it replaces: the same variants without the tier, less with it, PCH
 * creations included (issue 32: the estimate said 24.5 s where 10.8-11.2 s
 * were measured). */
static void stats_line(const char *dir, const char *label, double measured_ms)
{
    progcache *cache = open_or_die(dir);
    progcache_stats s = PROGCACHE_STATS_INIT;
    progcache_stats_get(&s, cache);
    printf("  %-34s PCH hits %llu (warm helper %llu, failed %llu), misses %llu, created %llu, "
           "rejected %llu, fallbacks %llu, saved %.1f s\n",
           label, (unsigned long long)s.pch_hits, (unsigned long long)s.pch_warm,
           (unsigned long long)s.pch_warm_failures, (unsigned long long)s.pch_misses,
           (unsigned long long)s.pch_created, (unsigned long long)s.pch_rejected,
           (unsigned long long)s.pch_fallbacks, (double)s.pch_ms_saved / 1e3);
    printf("  %-34s saved, measured against the plain compiles: %.1f s (the counter's "
           "estimate above: %.1f s)\n",
           "", measured_ms / 1e3, (double)s.pch_ms_saved / 1e3);
    progcache_close(cache);
}

/* Where the fresh processes' time went (the phases file of part 1): the
 * medians over variants 2 on (the PCH exists by then), per mode. */
static void anatomy(const char *path, const double *off, const double *on, int n)
{
    enum { COLS = 16 };
    static const char *names[COLS] = {
        "start (fork to main)", "open", "key", "lookup", "compile",
        "  the tier's state (1st use)", "  PCH find and check", "  helper (spawn to reaped)",
        "    its start, NVRTC's load", "    its NVRTC compile", "    its answer and exit",
        "    reaped after", "store", "the rest of the call", "close", "exit (to reaped)"};
    static double col[2][COLS][MAX_VARIANTS];
    int rows[2] = {0, 0};
    FILE *f = fopen(path, "r");
    int v, pch;
    double x[14];
    while (f && fscanf(f, "%d %d %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &v,
                       &pch, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6], &x[7], &x[8],
                       &x[9], &x[10], &x[11], &x[12], &x[13]) == 16) {
        if (v < 2 || v >= n || pch > 1 || rows[!!pch] >= MAX_VARIANTS)
            continue;
        int r = rows[!!pch]++;
        double total = pch ? on[v] : off[v];
        /* main, open, call, key, lookup, compile, store, close (times since
         * the fork or durations), then the tier's find, helper, NVRTC,
         * answer, end of answer and state. */
        double c[COLS] = {x[0], x[1] - x[0], x[3], x[4], x[5], x[13], x[8], x[9],
                          x[11] > 0 ? x[11] - x[10] : 0, x[10], x[12] - x[11], x[9] - x[12],
                          x[6], x[2] - x[3] - x[4] - x[5] - x[6], x[7] - x[1] - x[2],
                          total - x[7]};
        for (int k = 0; k < COLS; k++)
            col[!!pch][k][r] = c[k];
    }
    if (f)
        fclose(f);
    if (!rows[0] || !rows[1])
        return;
    printf("\n   where a fresh process's time goes (ms, medians of variants 2-%d)\n"
           "   %-30s %8s %7s\n",
           n - 1, "", "without", "with");
    for (int k = 0; k < COLS; k++)
        printf("   %-30s %8.1f %7.1f\n", names[k], median(col[0][k], rows[0]),
               median(col[1][k], rows[1]));
}

static const char usage_text[] =
    "usage: bench_pch [--variants N] [--cold]   (N: 2 to 100, default 20)\n"
    "\n"
    "What the PCH tier saves on misses: CUB variants compiled in fresh processes\n"
    "and in one process, without and with the tier (no GPU needed; over a minute).\n"
    "--cold: a third fresh-process column, the tier without a warm helper\n"
    "(PROGCACHE_PCH_WARM=0); its own creation then competes for the CPUs.\n"
    "The helper is $PROGCACHE_PCH_HELPER, else the one built with this bench.\n"
    "BENCH_PCH_TRACE=1: the tier's account of each hit of part 2 on stderr.\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    self = argv[0];
    if (argc == 5 && !strcmp(argv[1], "--one"))
        return one(argv[2], atoi(argv[3]),
                   !strcmp(argv[4], "cold") ? 2 : !strcmp(argv[4], "on"));
    if (argc == 4 && !strcmp(argv[1], "--serve"))
        return serve(argv[2], !strcmp(argv[3], "on"));
    int n = 20;
    int modes = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--variants") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cold"))
            modes = 3;
        else
            n = 0;
    }
    if (n < 2 || n > MAX_VARIANTS) {
        fputs(usage_text, stderr);
        return 2;
    }
    if (!getenv("PROGCACHE_PCH_HELPER") && BENCH_PCH_HELPER[0])
        setenv("PROGCACHE_PCH_HELPER", BENCH_PCH_HELPER, 1);
    unsetenv("PROGCACHE_PCH");
    unsetenv("PROGCACHE_PCH_MIN_MS");
    char tmpl[] = "/tmp/bench_pch.XXXXXX";
    char *root = mkdtemp(tmpl);
    if (!root)
        return 1;
    char off_dir[256], on_dir[256], cold_dir[256], s_off[256], s_on[256], s_in[256];
    snprintf(off_dir, sizeof off_dir, "%s/fresh-off", root);
    snprintf(on_dir, sizeof on_dir, "%s/fresh-on", root);
    snprintf(cold_dir, sizeof cold_dir, "%s/fresh-cold", root);
    snprintf(s_off, sizeof s_off, "%s/one-off", root);
    snprintf(s_on, sizeof s_on, "%s/one-on", root);
    snprintf(s_in, sizeof s_in, "%s/one-inprocess", root);
    printf("bench_pch: %d variants of a kernel including <cub/block/block_reduce.cuh> and "
           "<cuda_fp16.h>; helper %s\n",
           n, getenv("PROGCACHE_PCH_HELPER") ? getenv("PROGCACHE_PCH_HELPER") : "(installed)");

    /* 1. A fresh process per compile: without the tier, with it, and (with
     * --cold) with it but a fresh helper for every compile (no warm
     * helper); they take turns going first. */
    double off[MAX_VARIANTS], on[MAX_VARIANTS], cold[MAX_VARIANTS];
    char phases_file[300];
    snprintf(phases_file, sizeof phases_file, "%s/phases", root);
    setenv("BENCH_PCH_PHASES", phases_file, 1);
    printf("\n1. a fresh process per variant (ms, fork to exit)\n"
           "   variant  without   with%s\n", modes == 3 ? "  no warm helper" : "");
    for (int v = 0; v < n; v++) {
        cold[v] = 0;
        for (int k = 0; k < modes; k++) {
            int mode = (v + k) % modes;
            double ms = run_fresh(mode == 0 ? off_dir : mode == 1 ? on_dir : cold_dir, v, mode);
            *(mode == 0 ? &off[v] : mode == 1 ? &on[v] : &cold[v]) = ms;
        }
        if (modes == 3)
            printf("   %7d %8.0f %7.0f %15.0f\n", v, off[v], on[v], cold[v]);
        else
            printf("   %7d %8.0f %7.0f\n", v, off[v], on[v]);
        fflush(stdout);
    }
    printf("   median  %8.0f %7.0f   (%.1fx)\n", median(off, n), median(on, n),
           median(off, n) / median(on, n));
    printf("   total   %8.0f %7.0f   (%.2fx less with the PCH tier)\n", sum(off, n), sum(on, n),
           sum(off, n) / sum(on, n));
    stats_line(on_dir, "with:", sum(off, n) - sum(on, n));
    if (modes == 3) {
        printf("   no warm helper: median %.0f, total %.0f (%.2fx less)\n", median(cold, n),
               sum(cold, n), sum(off, n) / sum(cold, n));
        stats_line(cold_dir, "no warm helper:", sum(off, n) - sum(cold, n));
    }
    unsetenv("BENCH_PCH_PHASES");
    anatomy(phases_file, off, on, n);

    /* 2. One process per mode, in lockstep. */
    server sv[3] = {{.name = "without"}, {.name = "with"}, {.name = "in-process"}};
    start_server(&sv[0], s_off, 0);
    start_server(&sv[1], s_on, 1);
    setenv("PROGCACHE_PCH", "inprocess", 1);
    start_server(&sv[2], s_in, 1);
    unsetenv("PROGCACHE_PCH");
    printf("\n2. one process per mode, all variants (ms per compile)\n"
           "   variant  without   with  in-process\n");
    for (int v = 0; v < n; v++) {
        for (int k = 0; k < 3; k++) {
            server *s = &sv[(v + k) % 3];
            fprintf(s->to, "%d\n", v);
            fflush(s->to);
            if (fscanf(s->from, "%lf", &s->ms[v]) != 1) {
                fprintf(stderr, "bench_pch: the %s process failed\n", s->name);
                return 1;
            }
        }
        printf("   %7d %8.0f %7.0f %10.0f\n", v, sv[0].ms[v], sv[1].ms[v], sv[2].ms[v]);
        fflush(stdout);
    }
    for (int k = 0; k < 3; k++) {
        fclose(sv[k].to);
        int status;
        waitpid(sv[k].pid, &status, 0);
        fclose(sv[k].from);
    }
    printf("   median  %8.0f %7.0f %10.0f\n", median(sv[0].ms, n), median(sv[1].ms, n),
           median(sv[2].ms, n));
    printf("   total   %8.0f %7.0f %10.0f   (%.1fx and %.1fx less)\n", sum(sv[0].ms, n),
           sum(sv[1].ms, n), sum(sv[2].ms, n), sum(sv[0].ms, n) / sum(sv[1].ms, n),
           sum(sv[0].ms, n) / sum(sv[2].ms, n));
    stats_line(s_on, "with:", sum(sv[0].ms, n) - sum(sv[1].ms, n));
    stats_line(s_in, "in-process:", sum(sv[0].ms, n) - sum(sv[2].ms, n));
    bench_remove_tree(root);
    return 0;
}
