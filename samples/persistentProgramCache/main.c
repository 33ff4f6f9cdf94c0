/* persistentProgramCache: NVIDIA's Python sample of the same name
 * (cuda-samples, python/2_CoreConcepts), in C on progcache.
 *
 * Flow: open the device; open the cache; generate the kernel source for the
 * tile size and epilogue; compile-or-load it through the cache (key, lookup,
 * compile and store on a miss, load); run it on seeded random inputs, timed
 * with CUDA events; check it against a host reference in double precision.
 * Run it twice and the second run is a cache HIT: the compile is skipped and
 * host preparation drops from tens of milliseconds to tens of microseconds.
 *
 * Uses only the public progcache headers; the CUDA driver is reached through
 * progcache's function table, so the sample starts (and, with --arch, runs
 * the whole cache flow) on a machine without a GPU. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progcache/cuda.h"
#include "progcache/progcache.h"
#include "sample.h"

#define PROG "persistentProgramCache"
#define KERNEL_NAME "matmul_epilogue"
#define RTOL 1e-3
#define ATOL 1e-3

/* One output line: the label padded to 20 columns, then the value. */
static void line(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line(const char *label, const char *fmt, ...)
{
    va_list ap;
    printf("%-20s", label);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static int fail(const char *what)
{
    fflush(stdout);
    fprintf(stderr, PROG ": %s: %s\n", what, progcache_error_last());
    return EXIT_FAILED;
}

/* The device side, NULL members when there is no device. */
typedef struct gpu {
    const progcache_cuda_api *api;
    CUdevice device;
    CUcontext context;
    char name[256];
    int major, minor;
} gpu;

/* Open the device. Returns -1 to go on (with or without a device) or an
 * exit status. */
static int open_device(gpu *out, const sample_args *args, char *no_device, size_t len)
{
    memset(out, 0, sizeof *out);
    const progcache_cuda_api *api;
    if (progcache_cuda_load(&api)) {
        if (!args->arch) {
            fprintf(stderr, PROG ": %s (to run the cache flow without a GPU, pass --arch "
                            "sm_XY)\n",
                    progcache_error_last());
            return EXIT_FAILED;
        }
        snprintf(no_device, len, "%s", progcache_error_last());
        return -1;
    }
    int count = 0;
    if (progcache_cuda_check(api->cuDeviceGetCount(&count), "cuDeviceGetCount"))
        return fail("cannot count CUDA devices");
    if (args->device >= count) {
        fprintf(stderr, PROG ": device %d does not exist (%d CUDA device%s present)\n",
                args->device, count, count == 1 ? "" : "s");
        return EXIT_USAGE;
    }
    if (progcache_cuda_check(api->cuDeviceGet(&out->device, args->device), "cuDeviceGet") ||
        progcache_cuda_check(api->cuDeviceGetName(out->name, sizeof out->name, out->device),
                             "cuDeviceGetName") ||
        progcache_cuda_check(
            api->cuDeviceGetAttribute(&out->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                      out->device),
            "cuDeviceGetAttribute") ||
        progcache_cuda_check(
            api->cuDeviceGetAttribute(&out->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                      out->device),
            "cuDeviceGetAttribute"))
        return fail("cannot query the device");
    if (progcache_cuda_check(api->cuDevicePrimaryCtxRetain(&out->context, out->device),
                             "cuDevicePrimaryCtxRetain") ||
        progcache_cuda_check(api->cuCtxSetCurrent(out->context), "cuCtxSetCurrent"))
        return fail("cannot create a context on the device");
    out->api = api;
    return -1;
}

static void close_device(gpu *g)
{
    if (g->api && g->context) {
        g->api->cuCtxSetCurrent(NULL);
        g->api->cuDevicePrimaryCtxRelease(g->device);
    }
}

/* Launch, time and validate. Returns the exit status. */
static int run_kernel(const gpu *g, const sample_args *args, CUkernel kernel)
{
    const progcache_cuda_api *api = g->api;
    const size_t m = (size_t)args->m, n = (size_t)args->n, k = (size_t)args->k;
    const size_t a_bytes = m * k * sizeof(float), b_bytes = k * n * sizeof(float);
    const size_t bias_bytes = n * sizeof(float), c_bytes = m * n * sizeof(float);
    int status = EXIT_FAILED;
    float *a = malloc(a_bytes), *b = malloc(b_bytes), *bias = malloc(bias_bytes);
    float *c = malloc(c_bytes);
    CUdeviceptr da = 0, db = 0, dbias = 0, dc = 0;
    CUevent start = NULL, stop = NULL;
    if (!a || !b || !bias || !c) {
        fprintf(stderr, PROG ": out of memory for %zux%zux%zu matrices on the host\n", m, n, k);
        goto done;
    }
    fill_normal(a, m, k, 0x5eed0001ull);
    fill_normal(b, k, n, 0x5eed0002ull);
    fill_normal(bias, 1, n, 0x5eed0003ull);

    if (progcache_cuda_check(api->cuMemAlloc(&da, a_bytes), "cuMemAlloc of A") ||
        progcache_cuda_check(api->cuMemAlloc(&db, b_bytes), "cuMemAlloc of B") ||
        progcache_cuda_check(api->cuMemAlloc(&dbias, bias_bytes), "cuMemAlloc of bias") ||
        progcache_cuda_check(api->cuMemAlloc(&dc, c_bytes), "cuMemAlloc of C") ||
        progcache_cuda_check(api->cuMemcpyHtoD(da, a, a_bytes), "cuMemcpyHtoD of A") ||
        progcache_cuda_check(api->cuMemcpyHtoD(db, b, b_bytes), "cuMemcpyHtoD of B") ||
        progcache_cuda_check(api->cuMemcpyHtoD(dbias, bias, bias_bytes),
                             "cuMemcpyHtoD of bias") ||
        progcache_cuda_check(api->cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate") ||
        progcache_cuda_check(api->cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate")) {
        status = fail("cannot set up the inputs on the device");
        goto done;
    }

    int im = args->m, in = args->n, ik = args->k;
    void *params[] = {&da, &db, &dbias, &dc, &im, &in, &ik};
    const unsigned tile = (unsigned)args->tile;
    const unsigned grid_x = (unsigned)((n + tile - 1) / tile);
    const unsigned grid_y = (unsigned)((m + tile - 1) / tile);
    /* cuLaunchKernel takes a CUkernel cast to CUfunction and runs it in the
     * current context, loading its code there on first use. */
    CUfunction f = (CUfunction)kernel;
    for (int i = 0; i < args->warmup; i++)
        if (progcache_cuda_check(api->cuLaunchKernel(f, grid_x, grid_y, 1, tile, tile, 1, 0, NULL,
                                                     params, NULL),
                                 "cuLaunchKernel")) {
            status = fail("cannot launch the kernel");
            goto done;
        }
    float ms = 0;
    int bad = progcache_cuda_check(api->cuEventRecord(start, NULL), "cuEventRecord");
    for (int i = 0; !bad && i < args->iterations; i++)
        bad = progcache_cuda_check(api->cuLaunchKernel(f, grid_x, grid_y, 1, tile, tile, 1, 0,
                                                       NULL, params, NULL),
                                   "cuLaunchKernel");
    if (bad || progcache_cuda_check(api->cuEventRecord(stop, NULL), "cuEventRecord") ||
        progcache_cuda_check(api->cuEventSynchronize(stop), "the kernel") ||
        progcache_cuda_check(api->cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime") ||
        progcache_cuda_check(api->cuMemcpyDtoH(c, dc, c_bytes), "cuMemcpyDtoH of C")) {
        status = fail("the timed launches failed");
        goto done;
    }
    line("Kernel time:", "%.3f ms", (double)ms / args->iterations);

    double max_error = 0;
    int ok = validate(a, b, bias, c, args->m, args->n, args->k, args->epilogue, RTOL, ATOL,
                      &max_error);
    if (ok < 0) {
        fprintf(stderr, PROG ": out of memory for the host reference\n");
        goto done;
    }
    line("Max error:", "%.6e", max_error);
    line("Validation:", "%s", ok ? "PASSED" : "FAILED");
    status = ok ? EXIT_PASSED : EXIT_FAILED;
done:
    if (start)
        api->cuEventDestroy(start);
    if (stop)
        api->cuEventDestroy(stop);
    if (da)
        api->cuMemFree(da);
    if (db)
        api->cuMemFree(db);
    if (dbias)
        api->cuMemFree(dbias);
    if (dc)
        api->cuMemFree(dc);
    free(a);
    free(b);
    free(bias);
    free(c);
    return status;
}

/* Open the cache; NULL with the reason in reason when it cannot be used. */
static progcache *open_cache(const sample_args *args, char *reason, size_t len)
{
    progcache *cache = NULL;
    if (progcache_open(&cache, args->cache_dir, NULL)) {
        snprintf(reason, len, "%s", progcache_error_last());
        fprintf(stderr, PROG ": warning: cannot use the cache directory, continuing without a "
                        "cache: %s\n",
                reason);
        return NULL;
    }
    if (args->clear_cache && progcache_clear(cache))
        fprintf(stderr, PROG ": warning: --clear-cache: %s\n", progcache_error_last());
    return cache;
}

static void print_cache_lines(const progcache_program_result *res, const char *disabled,
                              int have_device)
{
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    progcache_key_hex(hex, res->key, sizeof res->key);
    if (res->status == PROGCACHE_STATUS_DISABLED)
        line("Cache status:", "DISABLED (%s)", disabled);
    else if (res->healed)
        line("Cache status:", "MISS (healed: %s)", res->heal_reason);
    else
        line("Cache status:", "%s", progcache_status_name(res->status));
    line("Cache key:", "%.24s...", hex);
    line("Artifact size:", "%.1f KiB", (double)res->artifact.size / 1024.0);
    line("Cache lookup:", "%.3f ms", res->lookup_ms);
    if (res->status == PROGCACHE_STATUS_HIT)
        line("Compile time:", "skipped");
    else
        line("Compile time:", "%.3f ms", res->compile_ms);
    if (res->status == PROGCACHE_STATUS_MISS)
        line("Cache store:", "%.3f ms%s", res->store_ms,
             res->store_pending ? " (in the background)"
             : res->cache_error ? " (FAILED: not stored)"
                                : "");
    if (have_device)
        line("Module load:", "%.3f ms", res->load_ms);
    else
        line("Module load:", "skipped (no CUDA device)");
    line("Host prep time:", "%.3f ms",
         res->lookup_ms + res->compile_ms + res->store_ms + res->load_ms);
    if (res->cache_error)
        fprintf(stderr, PROG ": warning: %s\n", res->cache_message);
}

int main(int argc, char **argv)
{
    sample_args args;
    int status = sample_parse_args(&args, argc, argv);
    if (status >= 0)
        return status;

    char *source = kernel_source(args.tile, args.epilogue);
    gpu g;
    progcache *cache = NULL;
    progcache_program_result res = PROGCACHE_PROGRAM_RESULT_INIT;
    memset(&g, 0, sizeof g);
    if (!source) {
        fprintf(stderr, PROG ": out of memory\n");
        status = EXIT_FAILED;
        goto done;
    }
    if (args.print_source) {
        fputs(source, stdout);
        status = EXIT_PASSED;
        goto done;
    }

    char no_device[1024] = "";
    status = open_device(&g, &args, no_device, sizeof no_device);
    if (status >= 0)
        goto done;
    char arch[32];
    if (args.arch)
        snprintf(arch, sizeof arch, "%s", args.arch);
    else
        snprintf(arch, sizeof arch, "sm_%d%d", g.major, g.minor);
    char arch_option[64];
    snprintf(arch_option, sizeof arch_option, "-arch=%s", arch);

    char disabled[1024] = "";
    cache = open_cache(&args, disabled, sizeof disabled);

    puts("Persistent Program Cache");
    if (g.api) {
        line("Device:", "%s", g.name);
        line("Compute Capability:", "%d.%d", g.major, g.minor);
    } else {
        /* "no CUDA driver" or "no CUDA device": the headline of the reason. */
        line("Device:", "none (%.*s)", (int)strcspn(no_device, ":"), no_device);
        int digits = atoi(arch + 3);
        line("Compute Capability:", "%d.%d (from --arch %s)", digits / 10, digits % 10, arch);
    }
    line("Cache directory:", "%s", args.cache_dir);
    line("Workload:", "C = %s(A @ B + bias)", epilogue_name(args.epilogue));
    line("Matrix sizes:", "M=%d, N=%d, K=%d", args.m, args.n, args.k);
    line("Tile size:", "%d", args.tile);
    line("Timed launches:", "warmup=%d, iterations=%d", args.warmup, args.iterations);
    putchar('\n');

    /* The options cuda.core's ProgramOptions(arch=..., std="c++17") gives
     * NVRTC, in its order, so both derive the same key. */
    const char *options[] = {arch_option, "--std=c++17"};
    progcache_program program = PROGCACHE_PROGRAM_INIT;
    program.nvrtc.source = source;
    program.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    program.nvrtc.options = options;
    program.nvrtc.num_options = 2;
    program.kernel = KERNEL_NAME;
    if (!g.api)
        program.flags |= PROGCACHE_PROGRAM_NO_LOAD;
    if (args.async_store)
        program.flags |= PROGCACHE_PROGRAM_ASYNC_STORE;
    if (progcache_compile_or_load(&res, cache, &program)) {
        status = fail("cannot build the kernel");
        goto done;
    }
    print_cache_lines(&res, disabled, g.api != NULL);

    if (!g.api) {
        line("Kernel time:", "skipped (no CUDA device)");
        line("Max error:", "skipped (no CUDA device)");
        line("Validation:", "SKIPPED (no CUDA device present: the launch and the validation "
                            "need a GPU; the cache flow ran for %s)",
             arch);
        status = EXIT_PASSED;
        goto done;
    }
    status = run_kernel(&g, &args, res.kernel);

done:
    fflush(stdout);
    progcache_program_result_release(&res);
    close_device(&g);
    /* Waits for a background store (--async-store). */
    progcache_close(cache);
    free(source);
    sample_args_free(&args);
    return status;
}
