/* bench_matmul: TFLOP/s of the persistentProgramCache sample's kernels for
 * C = relu(A @ B + bias) in FP32 against cuBLAS, and what compiling and
 * tuning them costs, cold and warm.
 *
 *   bench_matmul [--sizes 512,1024,2048,4096,8192] [--cache-dir DIR]
 *
 * Per size (M = N = K), on the same seeded inputs: the tiled kernel (tile
 * 16 and 32), the fast kernel (default shape), the fast kernel with the
 * shape --autotune picks, and cuBLAS (cublasSgemm, default math mode: FP32,
 * no TF32) followed by a bias + ReLU kernel, plus cuBLAS's GEMM alone.
 * Each is timed with CUDA events around batches of launches (at least
 * ~20 ms a batch), median of 5 batches after a warm-up batch. The fast
 * kernels' outputs are checked against cuBLAS's (allclose, rtol = atol =
 * 1e-3). Compile times are NVRTC's on a fresh cache (MISS) and the host
 * prep of the next call (HIT); tuning is timed cold (no record; the first
 * size also compiles the candidates) and warm (record found).
 *
 * Everything but cuBLAS goes through progcache's driver table; cuBLAS and
 * the runtime are linked into this benchmark only (when CMake finds them;
 * without them the cuBLAS columns say n/a). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "sample_device.h"

#ifdef BENCH_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

#define MAX_SIZES 16

typedef struct bench {
    sample_gpu g;
    progcache *cache;
    char arch[32];
    CUkernel bias_relu; /* cuBLAS's epilogue */
    progcache_program_result bias_res;
} bench;

static int die(const char *what)
{
    fprintf(stderr, "bench_matmul: %s: %s\n", what, progcache_error_last());
    exit(1);
}

static const char bias_relu_source[] =
    "// C = relu(C + bias) in place, rows of N; the epilogue after cuBLAS's GEMM.\n"
    "extern \"C\" __global__ void matmul_epilogue(float *C, const float *__restrict__ bias,\n"
    "                                            int M, int N)\n"
    "{\n"
    "    for (int row = blockIdx.x; row < M; row += gridDim.x) {\n"
    "        float *c = C + (size_t)row * N;\n"
    "        for (int col = threadIdx.x; col < N; col += blockDim.x) {\n"
    "            const float v = c[col] + bias[col];\n"
    "            c[col] = v > 0.0f ? v : 0.0f;\n"
    "        }\n"
    "    }\n"
    "}\n";

/* What to time: one launch of something, on w. */
typedef struct timed {
    int kind; /* 0: a matmul_epilogue kernel; 1: cuBLAS + epilogue; 2: cuBLAS alone */
    CUkernel kernel;
    launch_dims dims;
#ifdef BENCH_HAVE_CUBLAS
    cublasHandle_t handle;
#endif
} timed;

static int launch_once(const bench *b, const timed *t, const device_workload *w)
{
    const progcache_cuda_api *api = b->g.api;
    if (t->kind == 0)
        return launch_matmul(api, t->kernel, t->dims, w);
#ifdef BENCH_HAVE_CUBLAS
    /* Row-major C = A @ B is column-major C^T = B^T A^T: swap the operands. */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasSgemm(t->handle, CUBLAS_OP_N, CUBLAS_OP_N, w->n, w->m, w->k, &one,
                                    (const float *)(uintptr_t)w->b, w->n,
                                    (const float *)(uintptr_t)w->a, w->k, &zero,
                                    (float *)(uintptr_t)w->c, w->n);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_matmul: cublasSgemm failed (%d)\n", (int)st);
        return -1;
    }
    if (t->kind == 2)
        return 0;
    CUdeviceptr c = w->c, bias = w->bias;
    int m = w->m, n = w->n;
    void *params[] = {&c, &bias, &m, &n};
    return progcache_cuda_check(api->cuLaunchKernel((CUfunction)b->bias_relu, 132 * 16, 1, 1, 256,
                                                    1, 1, 0, NULL, params, NULL),
                                "cuLaunchKernel of the bias epilogue");
#else
    return -1;
#endif
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

/* Milliseconds per launch: batches of launches between two events, sized
 * to about 20 ms, median of 5 after a warm-up batch. */
static double time_ms(const bench *b, const timed *t, const device_workload *w)
{
    const progcache_cuda_api *api = b->g.api;
    CUevent e0, e1;
    if (progcache_cuda_check(api->cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate") ||
        progcache_cuda_check(api->cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate"))
        die("events");
    int batch = 1;
    double runs[5];
    for (int r = -1; r < 5; r++) {
        float ms = 0;
        api->cuEventRecord(e0, NULL);
        for (int i = 0; i < batch; i++)
            if (launch_once(b, t, w))
                die("launch");
        api->cuEventRecord(e1, NULL);
        if (progcache_cuda_check(api->cuEventSynchronize(e1), "the timed launches") ||
            progcache_cuda_check(api->cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime"))
            die("timing");
        if (r < 0) {
            /* the warm-up batch sizes the others */
            double per = ms / batch;
            batch = per > 0 ? (int)(20.0 / per) : 1000;
            batch = batch < 1 ? 1 : batch > 1000 ? 1000 : batch;
            continue;
        }
        runs[r] = (double)ms / batch;
    }
    api->cuEventDestroy(e0);
    api->cuEventDestroy(e1);
    qsort(runs, 5, sizeof *runs, cmp_double);
    return runs[2];
}

static double tflops(int n, double ms)
{
    return ms > 0 ? 2.0 * n * (double)n * n / (ms * 1e-3) / 1e12 : 0;
}

/* Compile-or-load one program; *cold_ms is NVRTC's time when it was a
 * MISS, *hit_ms the host prep of a second call (a HIT). */
static CUkernel build(bench *b, progcache_program_result *res, const char *source,
                      double *cold_ms, double *hit_ms)
{
    if (build_program(res, b->cache, source, b->arch, 0))
        die("compile");
    if (cold_ms)
        *cold_ms = res->status == PROGCACHE_STATUS_MISS ? res->compile_ms : 0;
    if (hit_ms) {
        progcache_program_result again = PROGCACHE_PROGRAM_RESULT_INIT;
        if (build_program(&again, b->cache, source, b->arch, 0))
            die("compile (again)");
        *hit_ms = again.lookup_ms + again.compile_ms + again.store_ms + again.load_ms;
        progcache_program_result_release(&again);
    }
    return res->kernel;
}

/* max |x - ref| and whether allclose(x, ref, 1e-3, 1e-3). */
static int compare(const float *x, const float *ref, size_t count, double *max_diff)
{
    int ok = 1;
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double d = x[i] > ref[i] ? (double)x[i] - ref[i] : (double)ref[i] - x[i];
        double r = ref[i] < 0 ? -(double)ref[i] : ref[i];
        if (!(d <= 1e-3 + 1e-3 * r))
            ok = 0;
        if (!(d <= worst))
            worst = d;
    }
    *max_diff = worst;
    return ok;
}

typedef struct row {
    int n;
    double ms[6]; /* tiled16, tiled32, fast, tuned, cublas+epi, cublas gemm */
    char tuned[48];
    double tune_cold_ms, tune_warm_ms;
    double tune_compile_ms, tune_timing_ms; /* the cold tuning's two parts */
    int tune_cold_compiled; /* the cold tuning compiled the candidates */
    size_t candidates;
    double candidate_ms[AUTOTUNE_MAX_CANDIDATES];
    double diff_fast, diff_tuned;
    int ok_fast, ok_tuned;
} row;

static void bench_size(bench *b, row *r, int n, const CUkernel tiled[2], CUkernel fast)
{
    const progcache_cuda_api *api = b->g.api;
    const size_t count = (size_t)n * n, bytes = count * sizeof(float);
    float *a = malloc(bytes), *bm = malloc(bytes), *bias = malloc((size_t)n * sizeof(float));
    float *ref = malloc(bytes), *out = malloc(bytes);
    if (!a || !bm || !bias || !ref || !out) {
        fprintf(stderr, "bench_matmul: out of host memory at %d\n", n);
        exit(1);
    }
    fill_normal(a, (size_t)n, (size_t)n, 0x5eed0001ull);
    fill_normal(bm, (size_t)n, (size_t)n, 0x5eed0002ull);
    fill_normal(bias, 1, (size_t)n, 0x5eed0003ull);
    device_workload w = {0, 0, 0, 0, n, n, n};
    if (progcache_cuda_check(api->cuMemAlloc(&w.a, bytes), "cuMemAlloc") ||
        progcache_cuda_check(api->cuMemAlloc(&w.b, bytes), "cuMemAlloc") ||
        progcache_cuda_check(api->cuMemAlloc(&w.c, bytes), "cuMemAlloc") ||
        progcache_cuda_check(api->cuMemAlloc(&w.bias, (size_t)n * sizeof(float)), "cuMemAlloc") ||
        progcache_cuda_check(api->cuMemcpyHtoD(w.a, a, bytes), "cuMemcpyHtoD") ||
        progcache_cuda_check(api->cuMemcpyHtoD(w.b, bm, bytes), "cuMemcpyHtoD") ||
        progcache_cuda_check(api->cuMemcpyHtoD(w.bias, bias, (size_t)n * sizeof(float)),
                             "cuMemcpyHtoD"))
        die("inputs");
    memset(r, 0, sizeof *r);
    r->n = n;

    /* --autotune, cold (no record for this size yet), then warm. */
    autotune_result tune;
    if (autotune_run(&tune, b->cache, &b->g, b->arch, EPILOGUE_RELU, &w)) {
        fprintf(stderr, "bench_matmul: autotune: %s\n", tune.error);
        exit(1);
    }
    r->tune_cold_ms = tune.total_ms;
    r->tune_compile_ms = tune.compile_ms;
    r->tune_timing_ms = tune.timing_ms;
    r->tune_cold_compiled = tune.misses > 0;
    r->candidates = tune.candidates;
    memcpy(r->candidate_ms, tune.candidate_ms, sizeof r->candidate_ms);
    if (tune.mode != AUTOTUNE_COLD)
        fprintf(stderr, "bench_matmul: note: a record for %d was already cached\n", n);
    if (autotune_run(&tune, b->cache, &b->g, b->arch, EPILOGUE_RELU, &w) ||
        tune.mode != AUTOTUNE_WARM) {
        fprintf(stderr, "bench_matmul: autotune did not find its record: %s\n", tune.error);
        exit(1);
    }
    r->tune_warm_ms = tune.total_ms;
    fast_config_format(r->tuned, sizeof r->tuned, &tune.best);
    char *tuned_source = kernel_source_fast(&tune.best, EPILOGUE_RELU);
    progcache_program_result tuned_res = PROGCACHE_PROGRAM_RESULT_INIT;
    CUkernel tuned = build(b, &tuned_res, tuned_source, NULL, NULL);

    timed t = {0};
    int tiles[2] = {16, 32};
    for (int i = 0; i < 2; i++) {
        t.kernel = tiled[i];
        t.dims = launch_dims_tiled(tiles[i], n, n);
        r->ms[i] = time_ms(b, &t, &w);
    }
    t.kernel = fast;
    t.dims = launch_dims_fast(&fast_default_config, n, n);
    r->ms[2] = time_ms(b, &t, &w);
    if (progcache_cuda_check(api->cuMemcpyDtoH(out, w.c, bytes), "cuMemcpyDtoH"))
        die("output");
    t.kernel = tuned;
    t.dims = launch_dims_fast(&tune.best, n, n);
    r->ms[3] = time_ms(b, &t, &w);
    float *out_tuned = malloc(bytes);
    if (!out_tuned || progcache_cuda_check(api->cuMemcpyDtoH(out_tuned, w.c, bytes), "DtoH"))
        die("output");
#ifdef BENCH_HAVE_CUBLAS
    if (cublasCreate(&t.handle) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(t.handle, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_matmul: cublasCreate failed\n");
        exit(1);
    }
    t.kind = 2;
    r->ms[5] = time_ms(b, &t, &w);
    t.kind = 1;
    r->ms[4] = time_ms(b, &t, &w);
    if (progcache_cuda_check(api->cuMemcpyDtoH(ref, w.c, bytes), "cuMemcpyDtoH"))
        die("output");
    cublasDestroy(t.handle);
    r->ok_fast = compare(out, ref, count, &r->diff_fast);
    r->ok_tuned = compare(out_tuned, ref, count, &r->diff_tuned);
#else
    r->ok_fast = r->ok_tuned = -1;
#endif
    progcache_program_result_release(&tuned_res);
    free(tuned_source);
    free(out_tuned);
    api->cuMemFree(w.a);
    api->cuMemFree(w.b);
    api->cuMemFree(w.c);
    api->cuMemFree(w.bias);
    free(a);
    free(bm);
    free(bias);
    free(ref);
    free(out);
}

static void open_gpu(bench *b)
{
    const progcache_cuda_api *api;
    if (progcache_cuda_load(&api))
        die("no GPU");
    sample_gpu *g = &b->g;
    if (progcache_cuda_check(api->cuDeviceGet(&g->device, 0), "cuDeviceGet") ||
        progcache_cuda_check(api->cuDeviceGetName(g->name, sizeof g->name, g->device),
                             "cuDeviceGetName") ||
        progcache_cuda_check(api->cuDeviceGetAttribute(
                                 &g->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                 g->device),
                             "cuDeviceGetAttribute") ||
        progcache_cuda_check(api->cuDeviceGetAttribute(
                                 &g->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                 g->device),
                             "cuDeviceGetAttribute") ||
        progcache_cuda_check(api->cuDevicePrimaryCtxRetain(&g->context, g->device),
                             "cuDevicePrimaryCtxRetain") ||
        progcache_cuda_check(api->cuCtxSetCurrent(g->context), "cuCtxSetCurrent"))
        die("device");
    g->api = api;
    snprintf(b->arch, sizeof b->arch, "sm_%d%d", g->major, g->minor);
}

static const char usage_text[] =
    "usage: bench_matmul [--sizes 512,1024,...] [--cache-dir DIR] [--json FILE]\n"
    "\n"
    "TFLOP/s of the sample's matmul kernels against cuBLAS, and what compiling and\n"
    "tuning them costs (needs a GPU).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    int sizes[MAX_SIZES] = {512, 1024, 2048, 4096, 8192};
    int num_sizes = 5;
    char dir[4096] = "";
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            num_sizes = 0;
            for (char *p = argv[++i]; *p && num_sizes < MAX_SIZES;) {
                sizes[num_sizes++] = (int)strtol(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else if (!strcmp(argv[i], "--cache-dir") && i + 1 < argc) {
            snprintf(dir, sizeof dir, "%s", argv[++i]);
        } else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    for (int i = 0; i < num_sizes; i++)
        if (sizes[i] < 1) {
            fprintf(stderr, "bench_matmul: sizes must be positive integers\n");
            return 2;
        }
    if (!dir[0]) {
        /* A fresh cache, so that the cold figures are cold. */
        snprintf(dir, sizeof dir, "%s/bench-matmul-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR")
                                                                              : "/tmp");
        if (!mkdtemp(dir)) {
            perror("bench_matmul: mkdtemp");
            return 1;
        }
    }
    bench b;
    memset(&b, 0, sizeof b);
    b.bias_res = (progcache_program_result)PROGCACHE_PROGRAM_RESULT_INIT;
    open_gpu(&b);
    if (progcache_open(&b.cache, dir, NULL))
        die("cache");
    printf("device: %s (%s), cache: %s, host threads: %d\n", b.g.name, b.arch, dir,
           host_threads());

    /* Compile cold (MISS) and warm (HIT host prep). */
    double cold[4], warm[4];
    progcache_program_result res[3] = {PROGCACHE_PROGRAM_RESULT_INIT, PROGCACHE_PROGRAM_RESULT_INIT,
                                       PROGCACHE_PROGRAM_RESULT_INIT};
    CUkernel tiled[2];
    for (int i = 0; i < 2; i++) {
        char *src = kernel_source(i ? 32 : 16, EPILOGUE_RELU);
        tiled[i] = build(&b, &res[i], src, &cold[i], &warm[i]);
        free(src);
    }
    char *src = kernel_source_fast(&fast_default_config, EPILOGUE_RELU);
    CUkernel fast = build(&b, &res[2], src, &cold[2], &warm[2]);
    free(src);
    b.bias_relu = build(&b, &b.bias_res, bias_relu_source, &cold[3], &warm[3]);
    printf("\ncompile, NVRTC on a fresh cache (MISS) / host prep of the next call (HIT):\n");
    char fast_name[64], default_name[48];
    fast_config_format(default_name, sizeof default_name, &fast_default_config);
    snprintf(fast_name, sizeof fast_name, "fast %s", default_name);
    const char *names[] = {"tiled 16", "tiled 32", fast_name, "bias+relu (cuBLAS)"};
    for (int i = 0; i < 4; i++)
        printf("  %-22s %9.1f ms / %.3f ms\n", names[i], cold[i], warm[i]);

    row rows[MAX_SIZES];
    for (int s = 0; s < num_sizes; s++) {
        bench_size(&b, &rows[s], sizes[s], tiled, fast);
        const row *r = &rows[s];
        fprintf(stderr, "done %d: fast %.2f, tuned %.2f (%s), cuBLAS %.2f TFLOP/s\n", r->n,
                tflops(r->n, r->ms[2]), tflops(r->n, r->ms[3]), r->tuned,
                tflops(r->n, r->ms[4]));
    }

    printf("\nTFLOP/s, C = relu(A @ B + bias), FP32, M = N = K:\n\n");
    printf("| size | tiled 16 | tiled 32 | fast (default) | autotuned | autotuned shape | "
           "cuBLAS + epilogue | cuBLAS GEMM alone | fast / cuBLAS | autotuned / cuBLAS |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (int s = 0; s < num_sizes; s++) {
        const row *r = &rows[s];
        double c = tflops(r->n, r->ms[4]);
        printf("| %d | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.0f%% | %.0f%% |\n", r->n,
               tflops(r->n, r->ms[0]), tflops(r->n, r->ms[1]), tflops(r->n, r->ms[2]),
               tflops(r->n, r->ms[3]), r->tuned, c, tflops(r->n, r->ms[5]),
               c > 0 ? 100 * tflops(r->n, r->ms[2]) / c : 0,
               c > 0 ? 100 * tflops(r->n, r->ms[3]) / c : 0);
    }
    printf("\nkernel times (ms) and checks against cuBLAS + epilogue:\n\n");
    printf("| size | tiled 16 | tiled 32 | fast | autotuned | cuBLAS + epi | cuBLAS GEMM | "
           "max diff fast | max diff autotuned | allclose |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int s = 0; s < num_sizes; s++) {
        const row *r = &rows[s];
        printf("| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2e | %.2e | %s |\n", r->n,
               r->ms[0], r->ms[1], r->ms[2], r->ms[3], r->ms[4], r->ms[5], r->diff_fast,
               r->diff_tuned,
               r->ok_fast < 0 ? "n/a" : r->ok_fast && r->ok_tuned ? "yes" : "NO");
    }
    printf("\nautotune (cold = no record: compile the candidates through the cache, then "
           "time them; warm = record found):\n\n");
    printf("| size | cold | of which compile | of which timing | warm | winner |\n"
           "| ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int s = 0; s < num_sizes; s++)
        printf("| %d | %.1f ms | %.1f ms%s | %.1f ms | %.3f ms | %s |\n", rows[s].n,
               rows[s].tune_cold_ms, rows[s].tune_compile_ms,
               rows[s].tune_cold_compiled ? " (compiled)" : " (all cached)", rows[s].tune_timing_ms,
               rows[s].tune_warm_ms, rows[s].tuned);

    const fast_config *configs;
    size_t count = fast_candidates(&configs);
    printf("\nautotune candidates, TFLOP/s (median of the tuning's timed launches):\n\n| shape |");
    for (int s = 0; s < num_sizes; s++)
        printf(" %d |", rows[s].n);
    printf("\n| --- |");
    for (int s = 0; s < num_sizes; s++)
        printf(" ---: |");
    printf("\n");
    for (size_t i = 0; i < count && i < AUTOTUNE_MAX_CANDIDATES; i++) {
        char name[48];
        fast_config_format(name, sizeof name, &configs[i]);
        printf("| %s |", name);
        for (int s = 0; s < num_sizes; s++)
            printf(" %.2f |", tflops(rows[s].n, rows[s].candidate_ms[i]));
        printf("\n");
    }

    FILE *json = bench_json_begin(json_path, "matmul", argc, argv);
    if (json) {
        fprintf(json, "{\"device\": \"%s\", \"arch\": \"%s\", \"sizes\": [", b.g.name, b.arch);
        for (int s = 0; s < num_sizes; s++) {
            const row *r = &rows[s];
            fprintf(json,
                    "%s{\"size\": %d, \"tflops\": {\"tiled 16\": %.3f, \"tiled 32\": %.3f, "
                    "\"fast\": %.3f, \"autotuned\": %.3f, \"cuBLAS + epilogue\": %.3f, "
                    "\"cuBLAS GEMM\": %.3f}, \"autotuned_shape\": \"%s\", "
                    "\"autotune_cold_ms\": %.1f, \"autotune_warm_ms\": %.3f}",
                    s ? ", " : "", r->n, tflops(r->n, r->ms[0]), tflops(r->n, r->ms[1]),
                    tflops(r->n, r->ms[2]), tflops(r->n, r->ms[3]), tflops(r->n, r->ms[4]),
                    tflops(r->n, r->ms[5]), r->tuned, r->tune_cold_ms, r->tune_warm_ms);
        }
        fprintf(json, "], \"compile_ms\": {");
        for (int i = 0; i < 4; i++)
            fprintf(json, "%s\"%s\": {\"cold\": %.1f, \"warm\": %.3f}", i ? ", " : "", names[i],
                    cold[i], warm[i]);
        fputs("}}", json);
        bench_json_end(json, json_path);
    }

    int failed = 0;
    for (int s = 0; s < num_sizes; s++)
        failed |= rows[s].ok_fast == 0 || rows[s].ok_tuned == 0;
    for (int i = 0; i < 3; i++)
        progcache_program_result_release(&res[i]);
    progcache_program_result_release(&b.bias_res);
    progcache_close(b.cache);
    return failed;
}
