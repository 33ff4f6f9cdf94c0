/* bench_first_load: the first cuLibraryLoadData + cuLibraryGetKernel of a
 * fresh process (what a program pays for its first cached kernel), with and
 * without CU_LIBRARY_BINARY_IS_PRESERVED, next to cuModuleLoadData +
 * cuModuleGetFunction, and the same calls repeated in a warm process.
 *
 *   bench_first_load [--runs N]      (needs a CUDA device; says so if none)
 *
 * Driver and context set-up (cuInit, primary context) happen before the
 * clock starts, as in the sample's "Module load" line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/cuda.h"
#include "progcache/progcache.h"

static const char source[] =
    "extern \"C\" __global__ void scale(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n";

enum { LIB, LIB_PRESERVED, MODULE, MODES };
static const char *mode_names[MODES] = {"cuLibraryLoadData + cuLibraryGetKernel",
                                        "the same, CU_LIBRARY_BINARY_IS_PRESERVED",
                                        "cuModuleLoadData + cuModuleGetFunction"};

/* Time one load of the mode; returns µs or -1. */
static double load_once(const progcache_cuda_api *api, int mode, const progcache_buf *cubin)
{
    double t0 = bench_now_us();
    if (mode == MODULE) {
        CUmodule m;
        CUfunction f;
        CUresult r = api->cuModuleLoadData(&m, cubin->data);
        if (!r)
            r = api->cuModuleGetFunction(&f, m, "scale");
        if (r) {
            fprintf(stderr, "bench_first_load: module load: CUresult %d\n", (int)r);
            return -1;
        }
        double t = bench_now_us() - t0;
        api->cuModuleUnload(m);
        return t;
    }
    CUlibrary lib;
    CUkernel k;
    CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
    void *val = (void *)(uintptr_t)1;
    int preserved = mode == LIB_PRESERVED;
    CUresult r = api->cuLibraryLoadData(&lib, cubin->data, NULL, NULL, 0, preserved ? &opt : NULL,
                                        preserved ? &val : NULL, preserved ? 1 : 0);
    if (!r)
        r = api->cuLibraryGetKernel(&k, lib, "scale");
    if (r) {
        fprintf(stderr, "bench_first_load: library load (mode %d): CUresult %d\n", mode, (int)r);
        return -1;
    }
    double t = bench_now_us() - t0;
    api->cuLibraryUnload(lib);
    return t;
}

static int child(int mode, const progcache_buf *cubin, int fd)
{
    const progcache_cuda_api *api;
    CUdevice dev;
    CUcontext ctx;
    if (progcache_cuda_load(&api) || api->cuDeviceGet(&dev, 0) ||
        api->cuDevicePrimaryCtxRetain(&ctx, dev) || api->cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "bench_first_load: CUDA set-up failed: %s\n", progcache_error_last());
        return 1;
    }
    double t[2] = {load_once(api, mode, cubin), 0};
    for (int i = 0; i < 20; i++) /* warm */
        load_once(api, mode, cubin);
    t[1] = load_once(api, mode, cubin);
    return write(fd, t, sizeof t) == (ssize_t)sizeof t && t[0] >= 0 && t[1] >= 0 ? 0 : 1;
}

static const char usage_text[] =
    "usage: bench_first_load [--runs N]\n"
    "\n"
    "The first library load of a fresh process, with and without\n"
    "CU_LIBRARY_BINARY_IS_PRESERVED, next to cuModuleLoadData (needs a GPU).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    int runs = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    /* Nothing CUDA may run in this process before it forks the measured
     * children (neither the driver nor NVRTC, which touches the driver):
     * a probe child reads the compute capability and compiles the CUBIN
     * into a temporary file. */
    char cubin_path[] = "/tmp/bench-first-load-XXXXXX";
    int cubin_fd = mkstemp(cubin_path);
    if (cubin_fd < 0)
        return 1;
    close(cubin_fd);
    pid_t prober = fork();
    if (prober == 0) {
        char arch[32];
        if (bench_device_arch_option(arch, sizeof arch, "bench_first_load"))
            _exit(3);
        const char *opts[] = {arch};
        progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
        o.source = source;
        o.options = opts;
        o.num_options = 1;
        progcache_buf code = PROGCACHE_BUF_INIT;
        if (progcache_nvrtc_compile(&code, NULL, NULL, &o)) {
            fprintf(stderr, "compile: %s\n", progcache_error_last());
            _exit(1);
        }
        FILE *f = fopen(cubin_path, "wb");
        _exit(f && fwrite(code.data, 1, code.size, f) == code.size && fclose(f) == 0 ? 0 : 1);
    }
    int probed;
    waitpid(prober, &probed, 0);
    if (!WIFEXITED(probed) || WEXITSTATUS(probed) != 0) {
        unlink(cubin_path);
        return WIFEXITED(probed) && WEXITSTATUS(probed) == 3 ? 0 : 1;
    }
    progcache_buf cubin = PROGCACHE_BUF_INIT;
    FILE *f = fopen(cubin_path, "rb");
    static unsigned char bytes[1 << 20];
    size_t got = f ? fread(bytes, 1, sizeof bytes, f) : 0;
    if (f)
        fclose(f);
    unlink(cubin_path);
    if (!got || progcache_buf_set(&cubin, bytes, got))
        return 1;
    printf("fresh processes: %d per mode; a %zu-byte CUBIN; medians (µs)\n\n", runs, cubin.size);
    printf("| load | first in a fresh process | warm |\n|---|---:|---:|\n");
    double *first = calloc((size_t)runs, sizeof *first), *warm = calloc((size_t)runs, sizeof *warm);
    for (int mode = 0; mode < MODES; mode++) {
        for (int r = 0; r < runs; r++) {
            int p[2];
            if (pipe(p))
                return 1;
            pid_t pid = fork();
            if (pid == 0) {
                close(p[0]);
                _exit(child(mode, &cubin, p[1]));
            }
            close(p[1]);
            double t[2];
            int status;
            ssize_t n = read(p[0], t, sizeof t);
            close(p[0]);
            waitpid(pid, &status, 0);
            if (n != (ssize_t)sizeof t || !WIFEXITED(status) || WEXITSTATUS(status)) {
                fprintf(stderr, "bench_first_load: a child failed\n");
                return 1;
            }
            first[r] = t[0];
            warm[r] = t[1];
        }
        qsort(first, (size_t)runs, sizeof *first, bench_cmp_double);
        qsort(warm, (size_t)runs, sizeof *warm, bench_cmp_double);
        printf("| %s | %.1f | %.1f |\n", mode_names[mode], first[runs / 2], warm[runs / 2]);
    }
    free(first);
    free(warm);
    progcache_buf_free(&cubin);
    return 0;
}
