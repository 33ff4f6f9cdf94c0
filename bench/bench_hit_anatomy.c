/* bench_hit_anatomy: where the first cache hit of a fresh process spends
 * its time, one system call or library call at a time, with the page
 * faults each one took (the machine has no perf or strace).
 *
 *   bench_hit_anatomy [--runs N] [--source FILE --kernel NAME]
 *                                      (needs a CUDA device; says so if none)
 *
 * Each of N fresh processes (this program again, exec'ed with --child)
 * sets up like the sample (driver, primary context, cache, key derived
 * before the clock) and then walks the hit path by hand three times:
 * round 1 is the process's first hit, round 2 the same entry again, round 3
 * a second entry this process has never read (warm code, cold entry). The
 * steps are the ones file_get and compile_or_load take, in their order.
 * A last line times progcache_compile_or_load itself in a fresh process,
 * as the sample calls it. The parent prints medians per step and round.
 * --source times another program (the sample's: its --print-source), the
 * second entry being the same source with a comment added. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "buf.h"
#include "fs.h"
#include "progcache/cuda.h"
#include "progcache/progcache.h"
#include "sha256.h"
#include "store/file/file_store.h"
#include "artifact/format.h"

static const char *kernel_name = "kern";
static const char *source_path; /* --source, passed on to the children */
static const char *sources[2] = {
    "extern \"C\" __global__ void kern(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n",
    "extern \"C\" __global__ void kern(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += s; }\n"};

enum { PATH, OPEN, FSTAT, ALLOC, READ, XATTR, SHA, VALIDATE, CLOSE, LOAD, KERNEL, STEPS };
static const char *const step_names[STEPS] = {
    "entry path (SHA-256 of the key)", "openat2 of the entry", "fstat", "buffer allocation",
    "read", "fgetxattr (stored digest)", "SHA-256 of the bytes", "kind check (sealed bytes)", "close",
    "cuLibraryLoadData (preserved)", "cuLibraryGetKernel"};
enum { ROUNDS = 3 };
/* Per run: ROUNDS x STEPS times, ROUNDS x STEPS faults, then the API call's
 * lookup and load times and its page faults. */
enum { PER_RUN = 2 * ROUNDS * STEPS + 3 };

static long faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

static void options_for(progcache_key_nvrtc_options *o, int which, const char **opts)
{
    progcache_key_nvrtc_options init = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    *o = init;
    o->source = sources[which];
    o->options = opts;
    o->num_options = 1;
}

#define STEP(i, expr)                                                                              \
    do {                                                                                           \
        long f0 = faults();                                                                        \
        double t0 = bench_now_us();                                                                      \
        expr;                                                                                      \
        t[i] = bench_now_us() - t0;                                                                      \
        fl[i] = (double)(faults() - f0);                                                           \
    } while (0)

/* One walk of the hit path by hand; fills t[STEPS] and fl[STEPS]. */
static int walk(double *t, double *fl, int root, const unsigned char *key,
                const progcache_cuda_api *api, progcache_buf *buf)
{
    char rel[FILE_REL_PATH_MAX];
    int fd = -1, bad = 0;
    struct stat st;
    ssize_t n = 0;
    unsigned char want[FILE_SEAL_SIZE], got[32], prefix[FILE_SEAL_TAG_SIZE + FILE_NAME_LEN];
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    CUlibrary lib = NULL;
    CUkernel kern = NULL;
    CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
    void *val = (void *)(uintptr_t)1;
    STEP(PATH, bad |= progcache__file_rel_path(rel, NULL, key, PROGCACHE_KEY_SIZE));
    STEP(OPEN, fd = progcache__fs_open_beneath(root, rel, O_RDONLY, 0));
    STEP(FSTAT, bad |= fstat(fd, &st));
    STEP(ALLOC, bad |= progcache__buf_reserve(buf, (size_t)st.st_size));
    STEP(READ, n = progcache__fs_read_full(fd, buf->data, (size_t)st.st_size));
    STEP(XATTR, bad |= fgetxattr(fd, FILE_SEAL_XATTR, want, sizeof want) != sizeof want);
    /* The seal's digest: tag, the entry's 64-digit name, the bytes. */
    STEP(SHA, memcpy(prefix, FILE_SEAL_TAG, FILE_SEAL_TAG_SIZE);
         memcpy(prefix + FILE_SEAL_TAG_SIZE, rel + 8, 2);
         memcpy(prefix + FILE_SEAL_TAG_SIZE + 2, rel + 11, FILE_NAME_LEN - 2);
         bad |= progcache__sha256_two(got, prefix, sizeof prefix, buf->data, (size_t)n));
    STEP(VALIDATE, info.kind = progcache__kind_of(buf->data, (size_t)n));
    STEP(CLOSE, close(fd));
    STEP(LOAD, bad |= api->cuLibraryLoadData(&lib, buf->data, NULL, NULL, 0, &opt, &val, 1) != 0);
    STEP(KERNEL, bad |= api->cuLibraryGetKernel(&kern, lib, kernel_name) != 0);
    bad |= fd < 0 || n != st.st_size || memcmp(want + 10, got, 32) != 0 ||
           info.kind != PROGCACHE_KIND_CUBIN;
    if (lib)
        api->cuLibraryUnload(lib);
    return bad;
}

static int child(const char *dir, const char *arch, const char *mode)
{
    double out[PER_RUN];
    memset(out, 0, sizeof out);
    const progcache_cuda_api *api;
    CUdevice dev;
    CUcontext ctx;
    if (progcache_cuda_load(&api) || api->cuDeviceGet(&dev, 0) ||
        api->cuDevicePrimaryCtxRetain(&ctx, dev) || api->cuCtxSetCurrent(ctx))
        return 1;
    if (getenv("BENCH_HEAP_WARM")) {
        /* Diagnostic only: leave 256 KiB of touched, free heap behind, to
         * tell the driver's heap-growth faults from its other first-call
         * costs. */
        void *blocks[64];
        for (int i = 0; i < 64; i++)
            memset(blocks[i] = malloc(4096), 1, 4096);
        for (int i = 64; i-- > 0;)
            free(blocks[i]);
    }
    progcache *cache;
    if (progcache_open(&cache, dir, NULL))
        return 1;
    const char *opts[] = {arch};
    progcache_key_nvrtc_options o;
    unsigned char keys[2][PROGCACHE_KEY_SIZE];
    for (int i = 0; i < 2; i++) {
        options_for(&o, i, opts);
        if (progcache_key_nvrtc(keys[i], &o))
            return 1;
    }
    if (!strcmp(mode, "api")) {
        progcache_program p;
        progcache_program_init(&p);
        options_for(&p.nvrtc, 0, opts);
        p.kernel = kernel_name;
        p.flags = PROGCACHE_PROGRAM_PRESERVE_BINARY;
        progcache_program_result res = PROGCACHE_PROGRAM_RESULT_INIT;
        long f0 = faults();
        if (progcache_compile_or_load(&res, cache, &p) || res.status != PROGCACHE_STATUS_HIT)
            return 1;
        out[PER_RUN - 1] = (double)(faults() - f0);
        out[PER_RUN - 3] = res.lookup_ms * 1e3;
        out[PER_RUN - 2] = res.load_ms * 1e3;
        progcache_program_result_release(&res);
    } else {
        int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int r = 0; r < ROUNDS; r++) {
            progcache_buf buf = PROGCACHE_BUF_INIT;
            if (walk(out + r * STEPS, out + (ROUNDS + r) * STEPS, root, keys[r == 2], api, &buf))
                return 1;
            progcache_buf_free(&buf);
        }
        close(root);
    }
    progcache_close(cache);
    return write(1, out, sizeof out) == (ssize_t)sizeof out ? 0 : 1;
}

/* Run self --child N times; v[run * PER_RUN + i]. */
static int spawn(const char *self, const char *dir, const char *arch, const char *mode, int runs,
                 double *v)
{
    for (int r = 0; r < runs; r++) {
        int p[2];
        if (pipe(p))
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(p[1], 1);
            close(p[0]);
            if (source_path)
                execl(self, self, "--child", dir, arch, mode, "--source", source_path, "--kernel",
                      kernel_name, (char *)NULL);
            else
                execl(self, self, "--child", dir, arch, mode, (char *)NULL);
            _exit(127);
        }
        close(p[1]);
        ssize_t n = read(p[0], v + (size_t)r * PER_RUN, PER_RUN * sizeof(double));
        close(p[0]);
        int status;
        waitpid(pid, &status, 0);
        if (n != PER_RUN * (ssize_t)sizeof(double) || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "bench_hit_anatomy: a %s child failed\n", mode);
            return 1;
        }
    }
    return 0;
}

static double median_of(const double *v, int runs, int i)
{
    double *col = malloc((size_t)runs * sizeof *col);
    for (int r = 0; r < runs; r++)
        col[r] = v[(size_t)r * PER_RUN + i];
    qsort(col, (size_t)runs, sizeof *col, bench_cmp_double);
    double m = col[runs / 2];
    free(col);
    return m;
}

/* The program to time: FILE, and FILE plus a comment (another key). */
static int load_sources(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char text[2][1 << 20];
    size_t n = f ? fread(text[0], 1, sizeof text[0] - 64, f) : 0;
    if (f)
        fclose(f);
    if (!n) {
        fprintf(stderr, "bench_hit_anatomy: cannot read %s\n", path);
        return 1;
    }
    text[0][n] = '\0';
    memcpy(text[1], text[0], n);
    memcpy(text[1] + n, "// another entry\n", sizeof "// another entry\n");
    sources[0] = text[0];
    sources[1] = text[1];
    return 0;
}

static const char usage_text[] =
    "usage: bench_hit_anatomy [--runs N] [--source FILE --kernel NAME] [--json FILE]\n"
    "\n"
    "Where the first cache hit of a fresh process spends its time, call by call,\n"
    "with page faults (needs a GPU).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    int runs = 15, is_child = argc >= 5 && !strcmp(argv[1], "--child");
    const char *source_file = NULL, *json_path = NULL;
    for (int i = is_child ? 5 : 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--source") && i + 1 < argc)
            source_file = argv[++i];
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc)
            kernel_name = argv[++i];
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    if (source_file && load_sources(source_file))
        return 2;
    source_path = source_file;
    if (is_child)
        return child(argv[2], argv[3], argv[4]);
    if (runs < 1)
        runs = 1;
    /* Nothing CUDA in this process before the children: a probe child reads
     * the compute capability and fills the cache with the two entries. */
    char dir[] = "/tmp/bench-hit-anatomy-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char arch[32] = "";
    int p[2];
    if (pipe(p))
        return 1;
    pid_t prober = fork();
    if (prober == 0) {
        char a[32];
        if (bench_device_arch_option(a, sizeof a, "bench_hit_anatomy"))
            _exit(3);
        const char *opts[] = {a};
        progcache *cache;
        if (progcache_open(&cache, dir, NULL))
            _exit(1);
        for (int i = 0; i < 2; i++) {
            progcache_program prog;
            progcache_program_init(&prog);
            options_for(&prog.nvrtc, i, opts);
            prog.flags = PROGCACHE_PROGRAM_NO_LOAD;
            progcache_program_result res = PROGCACHE_PROGRAM_RESULT_INIT;
            if (progcache_compile_or_load(&res, cache, &prog) || res.cache_error) {
                fprintf(stderr, "bench_hit_anatomy: %s\n", progcache_error_last());
                _exit(1);
            }
            progcache_program_result_release(&res);
        }
        progcache_close(cache);
        _exit(write(p[1], a, sizeof a) == (ssize_t)sizeof a ? 0 : 1);
    }
    close(p[1]);
    ssize_t got = read(p[0], arch, sizeof arch);
    close(p[0]);
    int probed;
    waitpid(prober, &probed, 0);
    if (!WIFEXITED(probed) || WEXITSTATUS(probed) != 0 || got != (ssize_t)sizeof arch)
    {
        bench_remove_tree(dir);
        return WIFEXITED(probed) && WEXITSTATUS(probed) == 3 ? 0 : 1;
    }

    double *steps = calloc((size_t)runs * PER_RUN, sizeof(double));
    double *api = calloc((size_t)runs * PER_RUN, sizeof(double));
    if (!steps || !api || spawn(argv[0], dir, arch, "steps", runs, steps) ||
        spawn(argv[0], dir, arch, "api", runs, api))
        return 1;
    printf("fresh processes: %d per mode, medians: time in µs (page faults)\n\n", runs);
    printf("| step | 1st hit of the process | same entry again | another entry |\n"
           "|---|---:|---:|---:|\n");
    double sum[ROUNDS] = {0};
    for (int s = 0; s < STEPS; s++) {
        printf("| %s |", step_names[s]);
        for (int r = 0; r < ROUNDS; r++) {
            double us = median_of(steps, runs, r * STEPS + s);
            sum[r] += us;
            printf(" %.1f (%.0f) |", us, median_of(steps, runs, (ROUNDS + r) * STEPS + s));
        }
        printf("\n");
    }
    printf("| sum of medians | %.1f | %.1f | %.1f |\n", sum[0], sum[1], sum[2]);
    FILE *json = bench_json_begin(json_path, "hit_anatomy", argc, argv);
    if (json) {
        static const char *round_names[ROUNDS] = {"first hit of the process", "same entry again",
                                                  "another entry"};
        fprintf(json, "{\"runs\": %d, \"heap_warm\": %s, \"rounds\": [", runs,
                getenv("BENCH_HEAP_WARM") ? "true" : "false");
        for (int r = 0; r < ROUNDS; r++) {
            fprintf(json, "%s{\"round\": \"%s\", \"steps\": [", r ? ", " : "", round_names[r]);
            for (int s = 0; s < STEPS; s++)
                fprintf(json, "%s{\"step\": \"%s\", \"us\": %.2f, \"page_faults\": %.0f}",
                        s ? ", " : "", step_names[s], median_of(steps, runs, r * STEPS + s),
                        median_of(steps, runs, (ROUNDS + r) * STEPS + s));
            fputs("]}", json);
        }
        fputs("]}", json);
        bench_json_end(json, json_path);
    }
    printf("\nprogcache_compile_or_load, first hit of a fresh process: lookup %.1f µs, "
           "load %.1f µs, page faults %.0f (key derivation included)\n",
           median_of(api, runs, PER_RUN - 3), median_of(api, runs, PER_RUN - 2),
           median_of(api, runs, PER_RUN - 1));
    free(steps);
    free(api);
    bench_remove_tree(dir);
    return 0;
}
