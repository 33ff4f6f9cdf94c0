/* persistentProgramCache: NVIDIA's Python sample of the same name
 * (cuda-samples, python/2_CoreConcepts), in C on progcache.
 *
 * Flow: open the device; open the cache; generate the kernel source for the
 * tile size (or, with --kernel fast, the tile shape: --config, or the winner
 * of --autotune) and epilogue; compile-or-load it through the cache (key,
 * lookup, compile and store on a miss, load); run it on seeded random
 * inputs, timed with CUDA events; check it against a host reference in
 * double precision.
 * Run it twice and the second run is a cache HIT: the compile is skipped and
 * host preparation drops from tens of milliseconds to tens of microseconds.
 * After the Python sample's lines, --kernel fast adds its throughput and
 * --autotune what the tuning did (cold: compiled and timed; warm: the
 * cached winner).
 *
 * Uses only the public progcache headers; the CUDA driver is reached through
 * progcache's function table, so the sample starts (and, with --arch, runs
 * the whole cache flow) on a machine without a GPU. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_device.h"

#define PROG "persistentProgramCache"
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

/* Open the device. Returns -1 to go on (with or without a device) or an
 * exit status. */
static int open_device(sample_gpu *out, const sample_args *args, char *no_device, size_t len)
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

static void close_device(sample_gpu *g)
{
    if (g->api && g->context) {
        g->api->cuCtxSetCurrent(NULL);
        g->api->cuDevicePrimaryCtxRelease(g->device);
    }
}

/* The inputs on the host and on the device. */
typedef struct workload {
    float *a, *b, *bias, *c;
    device_workload dev;
} workload;

static void workload_free(const sample_gpu *g, workload *w)
{
    CUdeviceptr ptrs[] = {w->dev.a, w->dev.b, w->dev.bias, w->dev.c};
    for (int i = 0; i < 4; i++)
        if (ptrs[i])
            g->api->cuMemFree(ptrs[i]);
    free(w->a);
    free(w->b);
    free(w->bias);
    free(w->c);
    memset(w, 0, sizeof *w);
}

/* Seeded inputs, copied to the device. Returns -1 to go on or an exit
 * status. */
static int workload_setup(workload *w, const sample_gpu *g, const sample_args *args)
{
    const progcache_cuda_api *api = g->api;
    const size_t m = (size_t)args->m, n = (size_t)args->n, k = (size_t)args->k;
    const size_t a_bytes = m * k * sizeof(float), b_bytes = k * n * sizeof(float);
    const size_t bias_bytes = n * sizeof(float), c_bytes = m * n * sizeof(float);
    w->dev.m = args->m;
    w->dev.n = args->n;
    w->dev.k = args->k;
    w->a = malloc(a_bytes);
    w->b = malloc(b_bytes);
    w->bias = malloc(bias_bytes);
    w->c = malloc(c_bytes);
    if (!w->a || !w->b || !w->bias || !w->c) {
        fprintf(stderr, PROG ": out of memory for %zux%zux%zu matrices on the host\n", m, n, k);
        return EXIT_FAILED;
    }
    fill_normal(w->a, m, k, 0x5eed0001ull);
    fill_normal(w->b, k, n, 0x5eed0002ull);
    fill_normal(w->bias, 1, n, 0x5eed0003ull);
    if (progcache_cuda_check(api->cuMemAlloc(&w->dev.a, a_bytes), "cuMemAlloc of A") ||
        progcache_cuda_check(api->cuMemAlloc(&w->dev.b, b_bytes), "cuMemAlloc of B") ||
        progcache_cuda_check(api->cuMemAlloc(&w->dev.bias, bias_bytes), "cuMemAlloc of bias") ||
        progcache_cuda_check(api->cuMemAlloc(&w->dev.c, c_bytes), "cuMemAlloc of C") ||
        progcache_cuda_check(api->cuMemcpyHtoD(w->dev.a, w->a, a_bytes), "cuMemcpyHtoD of A") ||
        progcache_cuda_check(api->cuMemcpyHtoD(w->dev.b, w->b, b_bytes), "cuMemcpyHtoD of B") ||
        progcache_cuda_check(api->cuMemcpyHtoD(w->dev.bias, w->bias, bias_bytes),
                             "cuMemcpyHtoD of bias"))
        return fail("cannot set up the inputs on the device");
    return -1;
}

/* Launch, time and validate. Returns the exit status; *kernel_ms is the
 * mean time of a launch (0 when the launches failed). */
static int run_kernel(const sample_gpu *g, const sample_args *args, workload *w, CUkernel kernel,
                      double *kernel_ms)
{
    const progcache_cuda_api *api = g->api;
    const size_t c_bytes = (size_t)args->m * (size_t)args->n * sizeof(float);
    int status = EXIT_FAILED;
    CUevent start = NULL, stop = NULL;
    *kernel_ms = 0;
    const launch_dims dims = args->kernel == KERNEL_FAST
                                 ? launch_dims_fast(&args->config, args->m, args->n)
                                 : launch_dims_tiled(args->tile, args->m, args->n);
    if (progcache_cuda_check(api->cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate") ||
        progcache_cuda_check(api->cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate")) {
        status = fail("cannot set up the timing events");
        goto done;
    }
    for (int i = 0; i < args->warmup; i++)
        if (launch_matmul(api, kernel, dims, &w->dev)) {
            status = fail("cannot launch the kernel");
            goto done;
        }
    float ms = 0;
    int bad = progcache_cuda_check(api->cuEventRecord(start, NULL), "cuEventRecord");
    for (int i = 0; !bad && i < args->iterations; i++)
        bad = launch_matmul(api, kernel, dims, &w->dev);
    if (bad || progcache_cuda_check(api->cuEventRecord(stop, NULL), "cuEventRecord") ||
        progcache_cuda_check(api->cuEventSynchronize(stop), "the kernel") ||
        progcache_cuda_check(api->cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime") ||
        progcache_cuda_check(api->cuMemcpyDtoH(w->c, w->dev.c, c_bytes), "cuMemcpyDtoH of C")) {
        status = fail("the timed launches failed");
        goto done;
    }
    *kernel_ms = (double)ms / args->iterations;
    line("Kernel time:", "%.3f ms", *kernel_ms);

    double max_error = 0;
    int ok = validate(w->a, w->b, w->bias, w->c, args->m, args->n, args->k, args->epilogue, RTOL,
                      ATOL, &max_error);
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
    return status;
}
/* Open the cache; NULL when it cannot be used, with the reason in *reason
 * (malloc'd: the library's message, whole, which may name a long path).
 * The run goes on without a cache, and says so: on stderr now, and in
 * the Cache status line. */
static progcache *open_cache(const sample_args *args, char **reason)
{
    progcache *cache = NULL;
    *reason = NULL;
    if (progcache_open(&cache, args->cache_dir, NULL)) {
        *reason = strdup(progcache_error_last());
        fprintf(stderr, PROG ": warning: running without a cache: %s\n",
                progcache_error_last());
        return NULL;
    }
    if (args->clear_cache && progcache_clear(cache))
        fprintf(stderr, PROG ": warning: --clear-cache: %s\n", progcache_error_last());
    return cache;
}

/* Each cache failure of the call, whole, one warning per line of
 * res->cache_detail. */
static void warn_cache_failures(const progcache_program_result *res)
{
    const char *p = (const char *)res->cache_detail.data;
    if (!p || !*p) {
        if (res->cache_error) /* no memory was left for the whole text */
            fprintf(stderr, PROG ": warning: %s\n", res->cache_message);
        return;
    }
    while (*p) {
        size_t n = strcspn(p, "\n");
        fprintf(stderr, PROG ": warning: %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

/* The step lines say which step failed: a failed lookup was compiled
 * instead, and only a failed store means the artifact is not in the cache
 * (a failed lookup or removal says nothing about the store). */
static void print_cache_lines(const progcache_program_result *res, const char *disabled,
                              int have_device)
{
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    progcache_key_hex(hex, res->key, sizeof res->key);
    if (res->status == PROGCACHE_STATUS_DISABLED)
        line("Cache status:", "DISABLED (%s)", disabled ? disabled : "no cache");
    else if (res->healed)
        line("Cache status:", "MISS (healed: %s%s)", res->heal_reason,
             res->remove_error ? "; the unusable entry could not be removed" : "");
    else
        line("Cache status:", "%s", progcache_status_name(res->status));
    line("Cache key:", "%.24s...", hex);
    line("Artifact size:", "%.1f KiB", (double)res->artifact.size / 1024.0);
    line("Cache lookup:", "%.3f ms%s", res->lookup_ms,
         !res->lookup_error                   ? ""
         : res->status == PROGCACHE_STATUS_HIT ? " (FAILED, then found on a second look)"
                                               : " (FAILED: compiled instead)");
    if (res->status == PROGCACHE_STATUS_HIT)
        line("Compile time:", "skipped");
    else
        line("Compile time:", "%.3f ms", res->compile_ms);
    if (res->status == PROGCACHE_STATUS_MISS)
        line("Cache store:", "%.3f ms%s", res->store_ms,
             res->store_pending  ? " (in the background)"
             : !res->store_error ? ""
             : res->stored       ? " (FAILED after the entry was in place: see the warning)"
                                 : " (FAILED: not stored)");
    if (have_device)
        line("Module load:", "%.3f ms", res->load_ms);
    else
        line("Module load:", "skipped (no CUDA device)");
    line("Host prep time:", "%.3f ms",
         res->lookup_ms + res->compile_ms + res->store_ms + res->load_ms);
    warn_cache_failures(res);
}

/* The lines after the standard ones: the fast kernel's throughput and what
 * --autotune did. */
static void print_extra_lines(const sample_args *args, const autotune_result *tune,
                              double kernel_ms)
{
    if (args->kernel == KERNEL_FAST && kernel_ms > 0)
        line("Throughput:", "%.2f TFLOP/s",
             2.0 * args->m * (double)args->n * args->k / (kernel_ms * 1e-3) / 1e12);
    if (!tune)
        return;
    char best[48];
    fast_config_format(best, sizeof best, &tune->best);
    if (tune->mode == AUTOTUNE_WARM)
        line("Autotune:", "warm (cached record), %.3f ms: %s (tuned at %.3f ms)",
             tune->total_ms, best, tune->best_ms);
    else if (tune->mode == AUTOTUNE_NO_DEVICE)
        line("Autotune:",
             "no device: %zu candidates compiled on %d threads (%zu MISS, %zu HIT) in %.1f ms; "
             "timing skipped (no CUDA device)",
             tune->candidates, tune->threads, tune->misses, tune->hits, tune->compile_ms);
    else
        line("Autotune:",
             "cold, %zu candidates compiled on %d threads (%zu MISS, %zu HIT) in %.1f ms, "
             "timed in %.1f ms; total %.1f ms; best %s at %.3f ms%s%s%s",
             tune->candidates, tune->threads, tune->misses, tune->hits, tune->compile_ms,
             tune->timing_ms, tune->total_ms, best, tune->best_ms,
             tune->retuned[0] ? " (cached record not used: " : "", tune->retuned,
             tune->retuned[0] ? ")" : "");
    if (tune->store_error[0])
        fprintf(stderr, PROG ": warning: the autotune record was not stored: %s\n",
                tune->store_error);
}

static char *generate_source(const sample_args *args)
{
    if (args->templated)
        return kernel_source_templated();
    return args->kernel == KERNEL_FAST ? kernel_source_fast(&args->config, args->epilogue)
                                       : kernel_source(args->tile, args->epilogue);
}

int main(int argc, char **argv)
{
    sample_args args;
    int status = sample_parse_args(&args, argc, argv);
    if (status >= 0)
        return status;

    char *source = NULL;
    sample_gpu g;
    workload w;
    progcache *cache = NULL;
    char *disabled = NULL; /* why there is no cache */
    progcache_program_result res = PROGCACHE_PROGRAM_RESULT_INIT;
    autotune_result tune;
    int tuned = 0;
    double kernel_ms = 0;
    memset(&g, 0, sizeof g);
    memset(&w, 0, sizeof w);
    if (args.print_source) {
        /* --config's source, or the default's: --autotune is not run. */
        source = generate_source(&args);
        if (source)
            fputs(source, stdout);
        status = source ? EXIT_PASSED : EXIT_FAILED;
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

    cache = open_cache(&args, &disabled);
    /* The inputs are made after the cache flow, as in the Python sample,
     * except that --autotune needs them to time its candidates. */
    if (args.autotune && g.api && (status = workload_setup(&w, &g, &args)) >= 0)
        goto done;
    if (args.autotune) {
        if (autotune_run(&tune, cache, &g, arch, args.epilogue, g.api ? &w.dev : NULL)) {
            fprintf(stderr, PROG ": --autotune failed: %s\n", tune.error);
            status = EXIT_FAILED;
            goto done;
        }
        tuned = 1;
        args.config = tune.best;
    }
    source = generate_source(&args);
    if (!source) {
        fprintf(stderr, PROG ": out of memory\n");
        status = EXIT_FAILED;
        goto done;
    }

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
    if (args.kernel == KERNEL_FAST) {
        char config[48];
        fast_config_format(config, sizeof config, &args.config);
        line("Tile size:", "%s (fast kernel, BMxBNxBK:TMxTN, %d threads)", config,
             fast_config_threads(&args.config));
    } else {
        line("Tile size:", "%d", args.tile);
    }
    char expression[64] = "";
    if (args.templated) {
        templated_expression(expression, sizeof expression, args.tile, args.epilogue);
        line("Name expression:", "%s", expression);
    }
    line("Timed launches:", "warmup=%d, iterations=%d", args.warmup, args.iterations);
    putchar('\n');

    /* The result lives until the end of the run, so the driver may use
     * the artifact in place (no copy at load). */
    unsigned flags = PROGCACHE_PROGRAM_PRESERVE_BINARY;
    if (!g.api)
        flags |= PROGCACHE_PROGRAM_NO_LOAD;
    if (args.async_store)
        flags |= PROGCACHE_PROGRAM_ASYNC_STORE;
    if (args.templated ? build_program_named(&res, cache, source, arch, expression, flags)
                       : build_program(&res, cache, source, arch, flags)) {
        status = fail("cannot build the kernel");
        goto done;
    }
    print_cache_lines(&res, disabled, g.api != NULL);
    CUkernel kernel = res.kernel;
    if (args.templated) {
        /* The same on a miss and on a hit, in any process: NVRTC's lowered
         * name, kept with the cache entry. */
        line("Lowered name:", "%s%s", res.num_names ? res.lowered_names[0] : "(none)",
             res.names_learned ? " (learned by compiling: the entry had none)" : "");
        kernel = res.num_names ? res.kernels[0] : NULL;
        if (g.api && !kernel) {
            fprintf(stderr, PROG ": %s is not a kernel of the program\n", expression);
            status = EXIT_FAILED;
            goto done;
        }
    }

    if (!g.api) {
        line("Kernel time:", "skipped (no CUDA device)");
        line("Max error:", "skipped (no CUDA device)");
        line("Validation:", "SKIPPED (no CUDA device present: the launch and the validation "
                            "need a GPU; the cache flow ran for %s)",
             arch);
        status = EXIT_PASSED;
    } else if (args.autotune || (status = workload_setup(&w, &g, &args)) < 0) {
        status = run_kernel(&g, &args, &w, kernel, &kernel_ms);
    }
    print_extra_lines(&args, tuned ? &tune : NULL, kernel_ms);

done:
    fflush(stdout);
    progcache_program_result_release(&res);
    if (g.api)
        workload_free(&g, &w);
    close_device(&g);
    /* Waits for a background store (--async-store). */
    progcache_close(cache);
    free(disabled);
    free(source);
    sample_args_free(&args);
    return status;
}
