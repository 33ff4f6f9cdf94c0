/*
 * progcache/warm.h - warming a cache: compile many programs, for several
 * GPU architectures, in parallel, into a cache, so that the machines that
 * run them later find every one (the `progcache warm` command is built on
 * this). Needs NVRTC, no GPU.
 */
#ifndef PROGCACHE_WARM_H
#define PROGCACHE_WARM_H

#include "cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One compile of a warm: programs[program] for archs[arch], as handed to
 * a progcache_warm_fn. Everything is borrowed for the duration of the
 * call. */
typedef struct progcache_warm_item {
    size_t program; /* index into the programs given */
    /* index into opts->archs; opts->num_archs when the program was compiled
     * as given (no archs, or the program names its own -arch) */
    size_t arch;
    /* "sm_90": the architecture warm put first among the NVRTC options
     * ("-arch=sm_90"); NULL when the program was compiled as given. */
    const char *arch_name;
    /* PROGCACHE_OK: the artifact is in the cache. Else why not:
     * PROGCACHE_ECOMPILE or PROGCACHE_EUNSAFEKEY (the program's fault), or
     * another code (the cache's or the system's: a store that failed, no
     * NVRTC, out of memory). */
    int rc;
    /* With rc 0: PROGCACHE_STATUS_HIT (it was cached already) or
     * PROGCACHE_STATUS_MISS (compiled and stored now). */
    progcache_status status;
    int has_key; /* 1 when key was derived (even if the compile failed) */
    unsigned char key[PROGCACHE_KEY_SIZE];
    double ms;           /* this compile's wall time */
    const char *message; /* with rc != 0: why, whole; else NULL */
    /* The NVRTC options compiled with ("-arch=sm_90" first, then the
     * program's), num_options of them. */
    const char *const *options;
    size_t num_options;
} progcache_warm_item;

/* Called after each compile, one call at a time (the calls are
 * serialised, from the warm's threads), with done of total compiles
 * finished. Return 0 to go on; anything else stops the warm: no new
 * compile starts and progcache_warm returns that value. */
typedef int (*progcache_warm_fn)(void *ctx, const progcache_warm_item *item, uint64_t done,
                                 uint64_t total);

typedef struct progcache_warm_options {
    unsigned int version; /* PROGCACHE_WARM_OPTIONS_VERSION */
    /* Compile every program for each of these architectures ("sm_80",
     * "sm_90a", "compute_90": "-arch=<it>" goes first among the program's
     * NVRTC options), num_archs of them; a program whose options name
     * their own -arch (or --gpu-architecture) is compiled once, as given.
     * NULL/0: every program as given. */
    const char *const *archs;
    size_t num_archs;
    /* Compiles at once; 0: the number of CPUs online. At most 256. */
    unsigned int jobs;
    progcache_warm_fn on_item; /* optional */
    void *ctx;                 /* passed to on_item */
} progcache_warm_options;

#define PROGCACHE_WARM_OPTIONS_VERSION 1
#define PROGCACHE_WARM_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_warm_options, PROGCACHE_WARM_OPTIONS_VERSION)
PROGCACHE_API void progcache_warm_options_init(progcache_warm_options *opts);

typedef struct progcache_warm_result {
    unsigned int version; /* PROGCACHE_WARM_RESULT_VERSION */
    uint64_t compiled; /* compiled and stored now */
    uint64_t cached;   /* in the cache already */
    uint64_t failed;   /* not in the cache: see each item's rc */
    /* of the failures, those that are the program's (ECOMPILE,
     * EUNSAFEKEY); the others are the cache's or the system's */
    uint64_t program_errors;
} progcache_warm_result;

#define PROGCACHE_WARM_RESULT_VERSION 1
#define PROGCACHE_WARM_RESULT_INIT \
    PROGCACHE__INIT(progcache_warm_result, PROGCACHE_WARM_RESULT_VERSION)

/*
 * progcache_warm() : compile every program, for every architecture of
 * opts->archs, into the cache, opts->jobs at a time, in one pass.
 *
 * Each compile is progcache_compile_or_load() with
 * PROGCACHE_PROGRAM_NO_LOAD added to the program's flags, so its key is
 * the one a program asking for the same compile derives (and `progcache
 * key` prints for the same options), and a program already in the cache
 * is not compiled again. Compiles are ordered architecture by
 * architecture within each program (program 0 for every architecture,
 * then program 1...), and spread over the threads as they free up.
 * A compile that fails does not stop the others.
 * @param out      [out, optional] the counts.
 * @param cache    the cache (required).
 * @param programs count programs (each as for progcache_compile_or_load).
 * @param opts     NULL for defaults.
 * @return PROGCACHE_OK when every compile ran (see out and each item's rc
 *         for what became of it); PROGCACHE_EINVAL (no cache, no programs,
 *         an entry of archs that is not an architecture name: the message
 *         names it, and nothing is compiled; a duplicate architecture;
 *         bad versions); PROGCACHE_ENOMEM; on_item's non-zero value.
 * Thread-safe; the cache may serve other threads meanwhile.
 */
PROGCACHE_API int progcache_warm(progcache_warm_result *out, progcache *cache,
                                 const progcache_program *programs, size_t count,
                                 const progcache_warm_options *opts);

/* progcache_arch_valid() : 1 when name is an architecture name NVRTC's
 * -arch takes in form: "sm_" or "compute_", digits, an optional "a" or
 * "f" ("sm_90", "sm_90a", "sm_100f", "compute_80"); else 0. Whether the
 * loaded NVRTC supports it is found when it compiles. */
PROGCACHE_API int progcache_arch_valid(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_WARM_H */
