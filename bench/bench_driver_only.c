/* The floor a cache HIT process is measured against (issue 23, item 2):
 * what the persistentProgramCache sample does on a HIT, with the CUDA
 * driver alone and nothing else: no progcache, no OpenSSL, no NVRTC, no
 * key, no checksum. cuInit, the primary context of device 0, read the
 * cached CUBIN (the entry file, exactly the bytes the sample loads),
 * cuLibraryLoadData, the same seeded inputs on the device, one launch of
 * the same grid, the result back and the same check against a host
 * reference in double precision.
 *
 *   bench_driver_only ENTRY_FILE [M N K [TILE]]     (default 64 64 64 16)
 *
 * bench/run_hit_vs_driver.sh runs it interleaved with the sample's HIT
 * process and compares wall time and peak RSS. Exit 0 when the result
 * checks, 1 on a failure, 2 on bad arguments; no GPU or driver: a message
 * that says so and exit 1.
 *
 * The driver is opened with dlopen (as progcache does), so the program
 * builds without a driver and says what is missing instead of failing to
 * start. It links only libc, libm and libdl. */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The entry points, typed by <cuda.h>'s prototypes (its _v2 macros give
 * the names to look up). */
#define DRIVER(X)                                                                              \
    X(cuInit, "cuInit")                                                                        \
    X(cuGetErrorName, "cuGetErrorName")                                                        \
    X(cuDeviceGet, "cuDeviceGet")                                                              \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute")                                            \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                                    \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")                               \
    X(cuCtxSetCurrent, "cuCtxSetCurrent")                                                      \
    X(cuCtxSynchronize, "cuCtxSynchronize")                                                    \
    X(cuLibraryLoadData, "cuLibraryLoadData")                                                  \
    X(cuLibraryUnload, "cuLibraryUnload")                                                      \
    X(cuLibraryGetKernel, "cuLibraryGetKernel")                                                \
    X(cuMemAlloc, "cuMemAlloc_v2")                                                             \
    X(cuMemFree, "cuMemFree_v2")                                                               \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                                                         \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                                                         \
    X(cuLaunchKernel, "cuLaunchKernel")

static struct {
#define MEMBER(fn, sym) __typeof__(&fn) fn##_p;
    DRIVER(MEMBER)
#undef MEMBER
} drv;

static int check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return 0;
    const char *name = NULL;
    if (drv.cuGetErrorName_p)
        drv.cuGetErrorName_p(r, &name);
    fprintf(stderr, "bench_driver_only: %s failed: %s\n", what, name ? name : "unknown error");
    return 1;
}

static int load_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bench_driver_only: no CUDA driver (%s): needs a GPU\n", dlerror());
        return 1;
    }
#define RESOLVE(fn, sym)                                                                       \
    if (!(*(void **)&drv.fn##_p = dlsym(lib, sym))) {                                          \
        fprintf(stderr, "bench_driver_only: the driver has no %s\n", sym);                     \
        return 1;                                                                              \
    }
    DRIVER(RESOLVE)
#undef RESOLVE
    return 0;
}

/* The entry file, whole. */
static unsigned char *read_file(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    unsigned char *data = NULL;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (data = malloc((size_t)st.st_size))) {
        size_t got = 0;
        ssize_t n;
        while (got < (size_t)st.st_size && (n = read(fd, data + got, (size_t)st.st_size - got)) > 0)
            got += (size_t)n;
        if (got != (size_t)st.st_size) {
            free(data);
            data = NULL;
        }
        *size = got;
    }
    if (fd >= 0)
        close(fd);
    if (!data)
        fprintf(stderr, "bench_driver_only: cannot read %s\n", path);
    return data;
}

/* Seeded inputs in [-1, 1) (the values do not matter to the timing; the
 * check below uses the same ones). */
static void fill(float *out, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = (float)((double)(seed >> 11) / 4503599627370496.0 - 1.0);
    }
}

int main(int argc, char **argv)
{
    /* bench_util.h's bench_help, written out: this program sees no progcache
     * header. */
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs("usage: bench_driver_only ENTRY_FILE [M N K [TILE]]\n"
              "  a cache HIT's work with the CUDA driver alone: cuInit, a context, read the\n"
              "  entry file, cuLibraryLoadData, one launch, a host check (needs a GPU;\n"
              "  bench/run_hit_vs_driver.sh runs it against the sample)\n", stdout);
        return 0;
    }
    if (argc != 2 && argc != 5 && argc != 6) {
        fprintf(stderr, "usage: bench_driver_only ENTRY_FILE [M N K [TILE]]\n");
        return 2;
    }
    int m = 64, n = 64, k = 64, tile = 16;
    if (argc >= 5) {
        m = atoi(argv[2]);
        n = atoi(argv[3]);
        k = atoi(argv[4]);
    }
    if (argc == 6)
        tile = atoi(argv[5]);
    if (m < 1 || n < 1 || k < 1 || tile < 1 || tile > 32) {
        fprintf(stderr, "bench_driver_only: sizes must be positive and TILE 1..32\n");
        return 2;
    }
    if (load_driver())
        return 1;
    CUdevice dev;
    CUcontext ctx = NULL;
    int major = 0, minor = 0;
    if (check(drv.cuInit_p(0), "cuInit") || check(drv.cuDeviceGet_p(&dev, 0), "cuDeviceGet") ||
        check(drv.cuDeviceGetAttribute_p(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
              "cuDeviceGetAttribute") ||
        check(drv.cuDeviceGetAttribute_p(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
              "cuDeviceGetAttribute") ||
        check(drv.cuDevicePrimaryCtxRetain_p(&ctx, dev), "cuDevicePrimaryCtxRetain") ||
        check(drv.cuCtxSetCurrent_p(ctx), "cuCtxSetCurrent"))
        return 1;
    size_t size = 0;
    unsigned char *cubin = read_file(argv[1], &size);
    if (!cubin)
        return 1;
    CUlibrary library;
    CUkernel kernel;
    if (check(drv.cuLibraryLoadData_p(&library, cubin, NULL, NULL, 0, NULL, NULL, 0),
              "cuLibraryLoadData") ||
        check(drv.cuLibraryGetKernel_p(&kernel, library, "matmul_epilogue"), "cuLibraryGetKernel"))
        return 1;

    size_t sa = (size_t)m * k, sb = (size_t)k * n, sc = (size_t)m * n;
    float *a = malloc(sa * sizeof *a), *b = malloc(sb * sizeof *b), *bias = malloc(n * sizeof *bias),
          *c = malloc(sc * sizeof *c);
    if (!a || !b || !bias || !c) {
        fprintf(stderr, "bench_driver_only: out of memory\n");
        return 1;
    }
    fill(a, sa, 1);
    fill(b, sb, 2);
    fill(bias, (size_t)n, 3);
    CUdeviceptr da, db, dbias, dc;
    if (check(drv.cuMemAlloc_p(&da, sa * sizeof *a), "cuMemAlloc") ||
        check(drv.cuMemAlloc_p(&db, sb * sizeof *b), "cuMemAlloc") ||
        check(drv.cuMemAlloc_p(&dbias, (size_t)n * sizeof *bias), "cuMemAlloc") ||
        check(drv.cuMemAlloc_p(&dc, sc * sizeof *c), "cuMemAlloc") ||
        check(drv.cuMemcpyHtoD_p(da, a, sa * sizeof *a), "cuMemcpyHtoD") ||
        check(drv.cuMemcpyHtoD_p(db, b, sb * sizeof *b), "cuMemcpyHtoD") ||
        check(drv.cuMemcpyHtoD_p(dbias, bias, (size_t)n * sizeof *bias), "cuMemcpyHtoD"))
        return 1;
    void *params[] = {&da, &db, &dbias, &dc, &m, &n, &k};
    unsigned gx = (unsigned)((n + tile - 1) / tile), gy = (unsigned)((m + tile - 1) / tile);
    if (check(drv.cuLaunchKernel_p((CUfunction)kernel, gx, gy, 1, (unsigned)tile, (unsigned)tile,
                                   1, 0, NULL, params, NULL),
              "cuLaunchKernel") ||
        check(drv.cuCtxSynchronize_p(), "the kernel") ||
        check(drv.cuMemcpyDtoH_p(c, dc, sc * sizeof *c), "cuMemcpyDtoH"))
        return 1;

    /* The sample's check, for the default epilogue (relu): C against the
     * host's A @ B + bias in double, rtol = atol = 1e-3. */
    size_t bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = bias[j];
            for (int p = 0; p < k; p++)
                acc += (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
            double want = acc > 0 ? acc : 0;
            if (!(fabs(c[(size_t)i * n + j] - want) <= 1e-3 + 1e-3 * fabs(want)))
                bad++;
        }
    printf("sm_%d%d: %zu-byte CUBIN, %dx%dx%d, %s\n", major, minor, size, m, n, k,
           bad ? "FAILED" : "PASSED");
    drv.cuMemFree_p(da);
    drv.cuMemFree_p(db);
    drv.cuMemFree_p(dbias);
    drv.cuMemFree_p(dc);
    drv.cuLibraryUnload_p(library);
    drv.cuDevicePrimaryCtxRelease_p(dev);
    free(a);
    free(b);
    free(bias);
    free(c);
    free(cubin);
    return bad ? 1 : 0;
}
