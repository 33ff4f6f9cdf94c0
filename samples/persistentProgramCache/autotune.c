/* --autotune: pick the fast kernel's tile shape by measurement, once per
 * (device, architecture, M, N, K, epilogue), and remember the winner in the
 * program cache.
 *
 * Cold: every candidate's source is compiled through the cache on parallel
 * threads (PROGCACHE_PROGRAM_NO_LOAD: NVRTC is thread-safe and so is the
 * cache, and no thread but the main one touches the device), so a
 * candidate is compiled once, ever, whatever the size being tuned. The main
 * thread then loads each artifact, times it on the caller's buffers (a
 * probe launch sizes the run to about 100 ms, then the median of 3 to 15
 * launches timed with events), keeps the fastest and stores the record
 * (autotune_record.c). Warm: the record is read and the run goes straight
 * to the winner. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_device.h"

#define KERNEL_NAME "matmul_epilogue"
#define MAX_COMPILE_THREADS 64

typedef struct compile_job {
    progcache *cache;
    const char *arch;
    char **sources;
    progcache_program_result *results;
    int *rcs;
    char (*errors)[512];
    size_t count;
    atomic_size_t next;
} compile_job;

static void *compile_worker(void *arg)
{
    compile_job *j = arg;
    size_t i;
    while ((i = atomic_fetch_add(&j->next, 1)) < j->count) {
        j->rcs[i] = build_program(&j->results[i], j->cache, j->sources[i], j->arch,
                                  PROGCACHE_PROGRAM_NO_LOAD);
        if (j->rcs[i])
            snprintf(j->errors[i], sizeof j->errors[i], "%s", progcache_error_last());
    }
    return NULL;
}

/* Compile every candidate on up to host_threads() threads (the caller's
 * included). Returns 0, or the first failure's code (its message is in
 * j->errors). */
static int compile_all(compile_job *j, int *threads_used)
{
    int threads = host_threads();
    if ((size_t)threads > j->count)
        threads = (int)j->count;
    if (threads > MAX_COMPILE_THREADS)
        threads = MAX_COMPILE_THREADS;
    pthread_t tids[MAX_COMPILE_THREADS];
    int started[MAX_COMPILE_THREADS] = {0};
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, compile_worker, j) == 0;
    compile_worker(j);
    for (int t = 1; t < threads; t++)
        if (started[t])
            pthread_join(tids[t], NULL);
    *threads_used = threads;
    for (size_t i = 0; i < j->count; i++)
        if (j->rcs[i])
            return j->rcs[i];
    return 0;
}

/* Load one compiled candidate and time it on w. */
static int time_candidate(double *out_ms, const sample_gpu *g, const progcache_buf *cubin,
                          const fast_config *c, const device_workload *w)
{
    const progcache_cuda_api *api = g->api;
    CUlibrary lib = NULL;
    CUkernel kernel = NULL;
    int rc = progcache_cuda_check(
        api->cuLibraryLoadData(&lib, cubin->data, NULL, NULL, 0, NULL, NULL, 0),
        "cuLibraryLoadData of a candidate");
    if (!rc)
        rc = progcache_cuda_check(api->cuLibraryGetKernel(&kernel, lib, KERNEL_NAME),
                                  "cuLibraryGetKernel");
    launch_dims dims = launch_dims_fast(c, w->m, w->n);
    double probe = 0;
    if (!rc)
        rc = time_kernel_median(&probe, api, kernel, dims, w, 1, 1);
    if (!rc) {
        int iterations = probe > 0 ? (int)(100.0 / probe) : 15;
        if (iterations < 3)
            iterations = 3;
        if (iterations > 15)
            iterations = 15;
        rc = time_kernel_median(out_ms, api, kernel, dims, w, 1, iterations);
    }
    if (lib)
        api->cuLibraryUnload(lib);
    return rc;
}

/* The cached record, when there is a usable one. Returns 1 (found: *best,
 * *best_ms set), 0 (none, or unusable: why says why when there was one). */
static int read_record(fast_config *best, double *best_ms, progcache *cache, const char *key,
                       size_t key_len, const autotune_target *t, char *why, size_t why_len)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int found = 0;
    int rc = progcache_get(&buf, cache, key, key_len);
    if (rc == PROGCACHE_OK)
        found = autotune_record_parse(best, best_ms, buf.data, buf.size, t, why, why_len) == 0;
    else if (rc != PROGCACHE_ENOTFOUND)
        snprintf(why, why_len, "the record could not be read: %s", progcache_error_last());
    progcache_buf_free(&buf);
    return found;
}

int autotune_run(autotune_result *out, progcache *cache, const sample_gpu *g, const char *arch,
                 epilogue_kind epilogue, const device_workload *w)
{
    const double t0 = now_ms();
    const fast_config *configs;
    const size_t count = fast_candidates(&configs);
    const int have_device = g && g->api && w;
    memset(out, 0, sizeof *out);
    out->best = fast_default_config;
    out->candidates = count;

    int rc = 0;
    char *key = NULL;
    size_t key_len = 0;
    autotune_target target = {g ? g->name : "", arch, w ? w->m : 0, w ? w->n : 0,
                              w ? w->k : 0, epilogue};
    compile_job job = {cache, arch, NULL, NULL, NULL, NULL, count, 0};
    job.sources = calloc(count, sizeof *job.sources);
    job.results = calloc(count, sizeof *job.results);
    job.rcs = calloc(count, sizeof *job.rcs);
    job.errors = calloc(count, sizeof *job.errors);
    if (!job.sources || !job.results || !job.rcs || !job.errors)
        goto oom;
    for (size_t i = 0; i < count; i++)
        job.results[i] = (progcache_program_result)PROGCACHE_PROGRAM_RESULT_INIT;

    if (have_device && cache) {
        key = autotune_record_key(&key_len, &target);
        if (!key)
            goto oom;
        if (read_record(&out->best, &out->best_ms, cache, key, key_len, &target, out->retuned,
                        sizeof out->retuned)) {
            out->mode = AUTOTUNE_WARM;
            out->candidates = 0;
            goto done;
        }
    }

    for (size_t i = 0; i < count; i++) {
        job.sources[i] = kernel_source_fast(&configs[i], epilogue);
        if (!job.sources[i])
            goto oom;
    }
    double c0 = now_ms();
    rc = compile_all(&job, &out->threads);
    out->compile_ms = now_ms() - c0;
    for (size_t i = 0; i < count; i++) {
        if (job.rcs[i]) {
            if (!out->error[0]) {
                char name[48];
                fast_config_format(name, sizeof name, &configs[i]);
                snprintf(out->error, sizeof out->error, "candidate %s: %s", name,
                         job.errors[i]);
            }
            continue;
        }
        if (job.results[i].status == PROGCACHE_STATUS_HIT)
            out->hits++;
        else
            out->misses++;
    }
    if (rc)
        goto done;
    if (!have_device) {
        out->mode = AUTOTUNE_NO_DEVICE;
        goto done;
    }

    double s0 = now_ms();
    double best_ms = 0;
    for (size_t i = 0; i < count && !rc; i++) {
        double ms = 0;
        rc = time_candidate(&ms, g, &job.results[i].artifact, &configs[i], w);
        if (i < AUTOTUNE_MAX_CANDIDATES)
            out->candidate_ms[i] = ms;
        if (!rc && (best_ms == 0 || ms < best_ms)) {
            best_ms = ms;
            out->best = configs[i];
        }
    }
    out->timing_ms = now_ms() - s0;
    if (rc)
        goto done;
    out->best_ms = best_ms;
    out->mode = AUTOTUNE_COLD;
    if (cache) {
        char *record = autotune_record_format(&target, &out->best, best_ms);
        if (!record)
            goto oom;
        if (progcache_put(cache, key, key_len, record, strlen(record)))
            snprintf(out->store_error, sizeof out->store_error, "%s", progcache_error_last());
        free(record);
    }
    goto done;

oom:
    rc = progcache_cuda_check(CUDA_ERROR_OUT_OF_MEMORY, "autotune (host memory)");
done:
    if (rc && !out->error[0])
        snprintf(out->error, sizeof out->error, "%s", progcache_error_last());
    for (size_t i = 0; job.results && i < count; i++)
        progcache_program_result_release(&job.results[i]);
    for (size_t i = 0; job.sources && i < count; i++)
        free(job.sources[i]);
    free(job.sources);
    free(job.results);
    free(job.rcs);
    free(job.errors);
    free(key);
    out->total_ms = now_ms() - t0;
    return rc;
}
