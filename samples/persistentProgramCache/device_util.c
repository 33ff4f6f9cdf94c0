/* Building and timing the sample's kernels: shared by the sample,
 * --autotune and bench/bench_matmul.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample_device.h"

#define KERNEL_NAME "matmul_epilogue"

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int build_program(progcache_program_result *out, progcache *cache, const char *source,
                  const char *arch, unsigned flags)
{
    /* The options cuda.core's ProgramOptions(arch=..., std="c++17") gives
     * NVRTC, in its order, so both derive the same key. */
    char arch_option[64];
    snprintf(arch_option, sizeof arch_option, "-arch=%s", arch);
    const char *options[] = {arch_option, "--std=c++17"};
    progcache_program program = PROGCACHE_PROGRAM_INIT;
    program.nvrtc.source = source;
    program.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    program.nvrtc.options = options;
    program.nvrtc.num_options = 2;
    program.kernel = KERNEL_NAME;
    program.flags = flags;
    return progcache_compile_or_load(out, cache, &program);
}

int build_program_named(progcache_program_result *out, progcache *cache, const char *source,
                        const char *arch, const char *expression, unsigned flags)
{
    char arch_option[64];
    snprintf(arch_option, sizeof arch_option, "-arch=%s", arch);
    const char *options[] = {arch_option, "--std=c++17"};
    const char *expressions[] = {expression};
    progcache_program program = PROGCACHE_PROGRAM_INIT;
    program.nvrtc.source = source;
    program.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    program.nvrtc.options = options;
    program.nvrtc.num_options = 2;
    program.nvrtc.name_expressions = expressions;
    program.nvrtc.num_name_expressions = 1;
    program.flags = flags;
    return progcache_compile_or_load(out, cache, &program);
}

int launch_matmul(const progcache_cuda_api *api, CUkernel kernel, launch_dims d,
                  const device_workload *w)
{
    CUdeviceptr a = w->a, b = w->b, bias = w->bias, c = w->c;
    int m = w->m, n = w->n, k = w->k;
    void *params[] = {&a, &b, &bias, &c, &m, &n, &k};
    /* cuLaunchKernel takes a CUkernel cast to CUfunction and runs it in the
     * current context, loading its code there on first use. */
    return progcache_cuda_check(api->cuLaunchKernel((CUfunction)kernel, d.grid_x, d.grid_y, 1,
                                                    d.block_x, d.block_y, 1, 0, NULL, params,
                                                    NULL),
                                "cuLaunchKernel");
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int time_kernel_median(double *out_ms, const progcache_cuda_api *api, CUkernel kernel,
                       launch_dims dims, const device_workload *w, int warmup, int iterations)
{
    if (iterations < 1)
        iterations = 1;
    CUevent ev[2] = {NULL, NULL};
    double *times = calloc((size_t)iterations, sizeof *times);
    if (!times)
        return progcache_cuda_check(CUDA_ERROR_OUT_OF_MEMORY, "timing the kernel");
    int rc = progcache_cuda_check(api->cuEventCreate(&ev[0], CU_EVENT_DEFAULT), "cuEventCreate");
    if (!rc)
        rc = progcache_cuda_check(api->cuEventCreate(&ev[1], CU_EVENT_DEFAULT), "cuEventCreate");
    for (int i = 0; !rc && i < warmup; i++)
        rc = launch_matmul(api, kernel, dims, w);
    for (int i = 0; !rc && i < iterations; i++) {
        float ms = 0;
        rc = progcache_cuda_check(api->cuEventRecord(ev[0], NULL), "cuEventRecord");
        if (!rc)
            rc = launch_matmul(api, kernel, dims, w);
        if (!rc)
            rc = progcache_cuda_check(api->cuEventRecord(ev[1], NULL), "cuEventRecord");
        if (!rc)
            rc = progcache_cuda_check(api->cuEventSynchronize(ev[1]), "the kernel");
        if (!rc)
            rc = progcache_cuda_check(api->cuEventElapsedTime(&ms, ev[0], ev[1]),
                                      "cuEventElapsedTime");
        times[i] = ms;
    }
    if (!rc) {
        qsort(times, (size_t)iterations, sizeof *times, cmp_double);
        *out_ms = iterations % 2 ? times[iterations / 2]
                                 : 0.5 * (times[iterations / 2 - 1] + times[iterations / 2]);
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            api->cuEventDestroy(ev[i]);
    free(times);
    return rc;
}
