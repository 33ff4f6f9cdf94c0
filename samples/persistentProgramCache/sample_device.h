/* persistentProgramCache: the device side shared by the sample and
 * bench/bench_matmul.c (through progcache's driver table: nothing links
 * libcuda), and --autotune. */
#ifndef PERSISTENT_PROGRAM_CACHE_SAMPLE_DEVICE_H
#define PERSISTENT_PROGRAM_CACHE_SAMPLE_DEVICE_H

#include "progcache/cuda.h"
#include "progcache/progcache.h"
#include "sample.h"

/* The device, NULL api when there is none. */
typedef struct sample_gpu {
    const progcache_cuda_api *api;
    CUdevice device;
    CUcontext context;
    char name[256];
    int major, minor;
} sample_gpu;

/* The device buffers of one product C = epilogue(A @ B + bias). */
typedef struct device_workload {
    CUdeviceptr a, b, bias, c;
    int m, n, k;
} device_workload;

/* Compile-or-load generated source through the cache with the options the
 * sample always uses (-arch=<arch> --std=c++17, CUBIN, kernel
 * matmul_epilogue), so that cuda.core derives the same key. flags:
 * PROGCACHE_PROGRAM_*. Returns what progcache_compile_or_load returns. */
int build_program(progcache_program_result *out, progcache *cache, const char *source,
                  const char *arch, unsigned flags);

/* The same for a source whose kernel is instantiated by a name expression
 * (--templated): out->lowered_names[0] and out->kernels[0] are its. */
int build_program_named(progcache_program_result *out, progcache *cache, const char *source,
                        const char *arch, const char *expression, unsigned flags);

/* Launch kernel on w (matmul_epilogue's parameters) with dims once. */
int launch_matmul(const progcache_cuda_api *api, CUkernel kernel, launch_dims dims,
                  const device_workload *w);

/* Launch warmup times untimed, then time iterations launches one by one
 * with events; *out_ms is their median. Returns 0 or a progcache code
 * (message set). */
int time_kernel_median(double *out_ms, const progcache_cuda_api *api, CUkernel kernel,
                       launch_dims dims, const device_workload *w, int warmup, int iterations);

/* Wall-clock milliseconds since an arbitrary start. */
double now_ms(void);

/* ---- --autotune (autotune.c) --------------------------------------------- */

typedef enum {
    AUTOTUNE_WARM = 0,  /* the cached record named the winner */
    AUTOTUNE_COLD = 1,  /* candidates compiled (or found), timed, record stored */
    AUTOTUNE_NO_DEVICE = 2 /* candidates compiled, nothing timed */
} autotune_mode;

#define AUTOTUNE_MAX_CANDIDATES 16
#define AUTOTUNE_MESSAGE_MAX 16384

typedef struct autotune_result {
    autotune_mode mode;
    fast_config best;    /* COLD, WARM: the winner; NO_DEVICE: the default */
    double best_ms;      /* its median kernel time (WARM: as recorded) */
    size_t candidates;   /* how many were compiled */
    size_t misses, hits; /* their cache statuses */
    double compile_ms;   /* wall time of compiling them in parallel */
    double timing_ms;    /* wall time of loading and timing them */
    double total_ms;     /* wall time of the whole tuning */
    int threads;         /* compile threads */
    /* COLD: each candidate's median time, in fast_candidates() order */
    double candidate_ms[AUTOTUNE_MAX_CANDIDATES];
    /* Messages, whole: progcache's can name a path of 4096 bytes (its
     * messages are shorter than AUTOTUNE_MESSAGE_MAX). */
    char retuned[AUTOTUNE_MESSAGE_MAX];     /* why a cached record was not used (empty: none) */
    char store_error[AUTOTUNE_MESSAGE_MAX]; /* the record could not be stored (empty: stored) */
    char error[AUTOTUNE_MESSAGE_MAX];       /* why autotune_run failed */
} autotune_result;

/* Pick the fast kernel's tile shape for (device, arch, M, N, K, epilogue).
 * With a device: a valid cached record is used as is (WARM); otherwise
 * every candidate is compiled through the cache on parallel threads, loaded
 * and timed on w, and the winner recorded in the cache (COLD). Without a
 * device (g->api NULL, w NULL): the candidates are compiled and nothing is
 * timed (NO_DEVICE). cache may be NULL (compile every time, no record).
 * Returns 0, or a progcache code with the reason in out->error. */
int autotune_run(autotune_result *out, progcache *cache, const sample_gpu *g, const char *arch,
                 epilogue_kind epilogue, const device_workload *w);

/* ---- the autotune record (autotune_record.c, no device needed) --------- */

/* What a record is for. */
typedef struct autotune_target {
    const char *device; /* the device's name */
    const char *arch;   /* sm_XY */
    int m, n, k;
    epilogue_kind epilogue;
} autotune_target;

/* The cache key of the record for t (malloc'd text, *len bytes; NULL when
 * out of memory). Documented in docs/PERFORMANCE.md. */
char *autotune_record_key(size_t *len, const autotune_target *t);

/* The record's text (malloc'd; NULL when out of memory). */
char *autotune_record_format(const autotune_target *t, const fast_config *best, double best_ms);

/* Read a record. Returns 0 and the winner when data is a well-formed
 * record for t naming a valid configuration; -1 otherwise, with the reason
 * in why (malformed, another target, unsupported configuration). */
int autotune_record_parse(fast_config *out, double *best_ms, const void *data, size_t size,
                          const autotune_target *t, char *why, size_t why_len);

#endif
