/* progcache_compile_or_load: key -> lookup -> (compile -> store) -> load.
 *
 * The rules, in the order they matter:
 *  1. Never lose a compiled artifact to the cache. A failing lookup is
 *     treated as a miss, a failing store is reported in the result, and
 *     either way the caller gets its code.
 *  2. Never trust cached bytes blindly. A cached artifact that fails the
 *     structure check or that the driver refuses is removed and rebuilt
 *     ("healed"); a freshly compiled artifact that the driver refuses is the
 *     caller's problem and is reported as such.
 *  3. Keep the hit path short: one key derivation, one read into a buffer
 *     the caller may reuse, one structure check, one library load. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "artifact/expect.h"
#include "buf.h"
#include "clock.h"
#include "cache/async_put.h"
#include "cache/cache_stats.h"
#include "cache/flight.h"
#include "driver.h"
#include "error.h"
#include "key/key_options.h"
#include "options.h"
#include "progcache/cuda.h"


void progcache_program_init(progcache_program *program)
{
    if (!program)
        return;
    memset(program, 0, sizeof *program);
    program->version = PROGCACHE_PROGRAM_VERSION;
    progcache_key_nvrtc_options_init(&program->nvrtc);
}

const char *progcache_status_name(progcache_status status)
{
    switch (status) {
    case PROGCACHE_STATUS_HIT: return "HIT";
    case PROGCACHE_STATUS_DISABLED: return "DISABLED";
    default: return "MISS";
    }
}

static void say(const progcache_program *program, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4);

static void say(const progcache_program *program, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(program->log, program->log_ctx, level, fmt, ap);
    va_end(ap);
}

/* The steps of a call that can fail without failing it (rule 1). */
typedef enum cache_step { STEP_LOOKUP, STEP_REMOVE, STEP_STORE } cache_step;

/* Whether out has the fields of version 2 (a caller built against an older
 * header has a shorter struct: they must not be written). */
static int has_v2(const progcache_program_result *out) { return out->version >= 2; }

/* Record a cache failure of this call in the result (rule 1): the first one
 * in cache_error/cache_message; with version 2, each step's code, and every
 * message whole in cache_detail. what names the step in the message. */
static void cache_failed(progcache_program_result *out, const progcache_program *program,
                         int rc, cache_step step, const char *what)
{
    /* Kept before anything else runs: the log callback is the caller's
     * code, and may call into the library. */
    progcache__error_saved why;
    progcache__error_save(&why);
    const char *text = why.message ? why.message : why.cut;
    say(program, PROGCACHE_LOG_WARN, "progcache: cache %s failed: %s", what, text);
    if (!out->cache_error) {
        out->cache_error = rc;
        snprintf(out->cache_message, sizeof out->cache_message, "cache %s failed: %s", what,
                 text);
    }
    if (has_v2(out)) {
        int *code = step == STEP_LOOKUP   ? &out->lookup_error
                    : step == STEP_REMOVE ? &out->remove_error
                                          : &out->store_error;
        if (!*code)
            *code = rc;
        /* Best effort: without memory the line is missing, the code is not. */
        progcache_buf *d = &out->cache_detail;
        size_t at = d->size;
        if (progcache__buf_append(d, "cache ", 6) || progcache__buf_append(d, what, strlen(what)) ||
            progcache__buf_append(d, " failed: ", 9) ||
            progcache__buf_append(d, text, strlen(text)) || progcache__buf_append(d, "\n", 1))
            progcache__buf_set_size(d, at);
    }
    progcache__error_restore(&why);
}

/* Before compiling a missed key: take its compile lock, or wait for the
 * thread or process holding it. Returns 1 when the wait ended with that
 * compile's result in out->artifact (nothing left to compile). */
static int join_flight(progcache__flight *flight, progcache_program_result *out,
                       progcache *cache, const progcache_program *program)
{
    if (!cache || (program->flags & PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT))
        return 0;
    int owner = 1;
    double waited = 0;
    unsigned int timeout = program->wait_timeout_ms ? program->wait_timeout_ms
                                                    : progcache__cache_wait_timeout(cache);
    flight->log = program->log;
    flight->log_ctx = program->log_ctx;
    int rc = progcache__flight_begin(flight, &owner, &waited, &out->artifact, NULL, cache,
                                     out->key, sizeof out->key, timeout);
    out->wait_ms += waited;
    if (waited > 0)
        progcache__cache_record(cache, PROGCACHE_STAT_SINGLEFLIGHT_WAITS, 1);
    if (rc) {
        cache_failed(out, program, rc, STEP_LOOKUP,
                     waited > 0 ? "lookup after waiting for another compile"
                                : "lookup under the compile lock");
        return 0;
    }
    if (owner)
        return 0;
    out->waited = 1;
    out->status = PROGCACHE_STATUS_HIT;
    return 1;
}

static int compile_and_store(progcache_program_result *out, progcache *cache,
                             const progcache_program *program)
{
    progcache__flight flight = PROGCACHE__FLIGHT_INIT;
    if (join_flight(&flight, out, cache, program)) {
        /* Bytes found by looking again are checked like any hit (rule 2):
         * they may be the very entry a heal could not remove, or another
         * bad one. Unusable, they are compiled over: the store below
         * replaces the entry. */
        if (!progcache__artifact_check(out->artifact.data, out->artifact.size,
                                       program->nvrtc.target, 0, out->heal_reason,
                                       sizeof out->heal_reason))
            return PROGCACHE_OK;
        say(program, PROGCACHE_LOG_WARN, "progcache: the cached entry found on a second look is "
            "unusable (%s); compiling again", out->heal_reason);
        out->status = PROGCACHE_STATUS_MISS;
        out->healed = 1;
    }
    double t = progcache__clock_ms();
    int rc = progcache_nvrtc_compile(&out->artifact, &out->log, NULL, &program->nvrtc);
    out->compile_ms += progcache__clock_ms() - t;
    if (rc || !cache)
        goto done;

    t = progcache__clock_ms();
    if (program->flags & PROGCACHE_PROGRAM_ASYNC_STORE) {
        /* The background put takes the compile lock over and drops it once
         * the entry exists, so no waiter wakes to an empty cache. */
        if (progcache__cache_put_async(cache, out->key, sizeof out->key, out->artifact.data,
                                       out->artifact.size, &flight, program->log,
                                       program->log_ctx) == PROGCACHE_OK)
            out->store_pending = 1;
    }
    if (!out->store_pending) {
        int put = progcache_put(cache, out->key, sizeof out->key, out->artifact.data,
                                out->artifact.size);
        if (put)
            cache_failed(out, program, put, STEP_STORE, "store");
        if (has_v2(out))
            out->stored = !put || progcache__cache_holds(cache, out->key, sizeof out->key);
    }
    out->store_ms += progcache__clock_ms() - t;
done:
    progcache__flight_end(&flight);
    return rc;
}

/* Driver results that mean "these bytes are no good", as opposed to "the
 * driver or the context is in trouble", which recompiling cannot fix.
 * CUDA_ERROR_NOT_FOUND (no such kernel) is not one: it is almost always a
 * wrong kernel name, and healing it would recompile on every call. */
static int image_refused(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND: return 1;
    default: return 0;
    }
}

static void unload(const progcache_cuda_api *api, progcache_program_result *out)
{
    if (api && out->library)
        api->cuLibraryUnload(out->library);
    if (api && out->module)
        api->cuModuleUnload(out->module);
    out->library = NULL;
    out->kernel = NULL;
    out->module = NULL;
    out->function = NULL;
}

/* Load the artifact and fetch the kernel. *refused is set when the driver
 * rejected the bytes themselves (see image_refused). */
PROGCACHE_HOT
static int load(progcache_program_result *out, const progcache_program *program, int *refused)
{
    *refused = 0;
    const progcache_cuda_api *api;
    int rc = progcache_cuda_load(&api);
    if (rc)
        return rc;
    const char *kernel = program->kernel;
    const char *target = progcache_target_name(program->nvrtc.target);
    double t = progcache__clock_ms();
    CUresult r;
    if (program->flags & PROGCACHE_PROGRAM_MODULE_API) {
        r = api->cuModuleLoadData(&out->module, out->artifact.data);
        if (r) {
            rc = progcache__cuda_error(r, "cuModuleLoadData of a %zu-byte %s", out->artifact.size,
                                       target);
            goto done;
        }
        if (kernel && (r = api->cuModuleGetFunction(&out->function, out->module, kernel))) {
            rc = progcache__cuda_error(r, "cuModuleGetFunction of kernel '%s'", kernel);
            goto done;
        }
    } else {
        /* With PRESERVE_BINARY the driver keeps pointing at out->artifact,
         * which release frees only after unloading. */
        CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
        void *value = (void *)(uintptr_t)1;
        unsigned int nopt = (program->flags & PROGCACHE_PROGRAM_PRESERVE_BINARY) ? 1 : 0;
        r = api->cuLibraryLoadData(&out->library, out->artifact.data, NULL, NULL, 0,
                                   nopt ? &opt : NULL, nopt ? &value : NULL, nopt);
        if (r) {
            rc = progcache__cuda_error(r, "cuLibraryLoadData of a %zu-byte %s",
                                       out->artifact.size, target);
            goto done;
        }
        if (kernel && (r = api->cuLibraryGetKernel(&out->kernel, out->library, kernel))) {
            rc = progcache__cuda_error(r, "cuLibraryGetKernel of kernel '%s'", kernel);
            goto done;
        }
        if (kernel && (program->flags & PROGCACHE_PROGRAM_GET_FUNCTION)) {
            r = api->cuKernelGetFunction(&out->function, out->kernel);
            if (r) {
                rc = progcache__cuda_error(r, "cuKernelGetFunction of kernel '%s' (is a context "
                                              "current on this thread?)",
                                           kernel);
                /* The bytes loaded fine: this is about the context. */
                r = CUDA_SUCCESS;
                goto done;
            }
        }
    }
done:
    out->load_ms += progcache__clock_ms() - t;
    if (rc) {
        *refused = image_refused(r);
        unload(api, out);
    }
    return rc;
}

static int check_args(progcache_program_result *out, const progcache_program *program)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_compile_or_load: out is NULL");
    if (out->version == 0 || out->version > PROGCACHE_PROGRAM_RESULT_VERSION)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_compile_or_load: out->version is %u; this library "
                                "takes 1 to %u (start from PROGCACHE_PROGRAM_RESULT_INIT)",
                                out->version, PROGCACHE_PROGRAM_RESULT_VERSION);
    if (out->library || out->module)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_compile_or_load: out still holds loaded code; call "
                                "progcache_program_result_release() on it first");
    if (!program)
        return progcache__error(PROGCACHE_EINVAL, "progcache_compile_or_load: program is NULL");
    if (program->nvrtc.target == PROGCACHE_TARGET_LTOIR &&
        !(program->flags & PROGCACHE_PROGRAM_NO_LOAD))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_compile_or_load: the driver cannot load LTO-IR; link "
                                "it with nvJitLink, or pass PROGCACHE_PROGRAM_NO_LOAD");
    return PROGCACHE_OK;
}

/* Forget the cached entry and build the program again (rule 2). */
static int heal(progcache_program_result *out, progcache *cache, const progcache_program *program)
{
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    progcache_key_hex(hex, out->key, sizeof out->key);
    say(program, PROGCACHE_LOG_WARN, "progcache: cached entry %.16s... is unusable (%s); "
        "removing it and compiling again", hex, out->heal_reason);
    int rc = progcache_remove(cache, out->key, sizeof out->key);
    if (rc == PROGCACHE_OK)
        progcache__cache_record(cache, PROGCACHE_STAT_CORRUPT_REMOVED, 1);
    else if (rc != PROGCACHE_ENOTFOUND)
        cache_failed(out, program, rc, STEP_REMOVE, "removal of the unusable entry");
    out->healed = 1;
    out->status = PROGCACHE_STATUS_MISS;
    return compile_and_store(out, cache, program);
}

static void reset(progcache_program_result *out)
{
    out->status = PROGCACHE_STATUS_MISS;
    memset(out->key, 0, sizeof out->key);
    out->artifact.size = 0;
    out->log.size = 0;
    if (out->log.data)
        out->log.data[0] = '\0';
    out->key_ms = out->lookup_ms = out->compile_ms = out->store_ms = out->load_ms = 0;
    out->healed = 0;
    out->heal_reason[0] = '\0';
    out->cache_error = 0;
    out->cache_message[0] = '\0';
    out->store_pending = 0;
    out->wait_ms = 0;
    out->waited = 0;
    if (has_v2(out)) {
        out->lookup_error = out->remove_error = out->store_error = out->stored = 0;
        out->cache_detail.size = 0;
        if (out->cache_detail.data)
            out->cache_detail.data[0] = '\0';
    }
}

/* The program struct's size in each version, for progcache__options_load. */
static const size_t program_size[] = {0, sizeof(progcache_program)};

PROGCACHE_HOT
int progcache_compile_or_load(progcache_program_result *out, progcache *cache,
                              const progcache_program *program)
{
    /* The caller's program, as this library's version of the struct: an
     * older caller's keeps the defaults for what it did not know. */
    progcache_program p;
    progcache_program_init(&p);
    int rc = progcache__options_load(&p, program, program_size, PROGCACHE_PROGRAM_VERSION,
                                     "progcache_compile_or_load", "progcache_program");
    if (!rc && program)
        rc = progcache__key_options_load(&p.nvrtc, &program->nvrtc, "progcache_compile_or_load");
    if (!rc)
        rc = check_args(out, program ? &p : NULL);
    if (rc)
        return rc;
    program = &p;
    reset(out);
    /* What the tier that hit knows of the bytes: the seal state, which
     * spares a whole structure check. */
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;

    double t = progcache__clock_ms();
    rc = progcache_key_nvrtc(out->key, &program->nvrtc);
    out->key_ms = progcache__clock_ms() - t;
    if (rc)
        goto done;
    t = progcache__clock_ms();
    int have = 0;
    if (!cache) {
        out->status = PROGCACHE_STATUS_DISABLED;
    } else {
        rc = progcache__cache_get_meta(&out->artifact, &meta, cache, out->key, sizeof out->key);
        if (rc == PROGCACHE_OK)
            have = 1;
        else if (rc != PROGCACHE_ENOTFOUND)
            cache_failed(out, program, rc, STEP_LOOKUP, "lookup");
        rc = PROGCACHE_OK;
    }
    if (have) {
        out->status = PROGCACHE_STATUS_HIT;
        if (progcache__artifact_check(out->artifact.data, out->artifact.size,
                                      program->nvrtc.target, meta.seal == PROGCACHE_SEAL_WHOLE,
                                      out->heal_reason,
                                      sizeof out->heal_reason)) {
            out->lookup_ms = progcache__clock_ms() - t;
            rc = heal(out, cache, program);
            goto loaded_or_not;
        }
    }
    out->lookup_ms = progcache__clock_ms() - t;
    if (!have)
        rc = compile_and_store(out, cache, program);

loaded_or_not:
    if (rc || (program->flags & PROGCACHE_PROGRAM_NO_LOAD))
        goto done;
    int refused = 0;
    rc = load(out, program, &refused);
    if (rc && refused && out->status == PROGCACHE_STATUS_HIT) {
        snprintf(out->heal_reason, sizeof out->heal_reason, "the driver refused it: %s",
                 progcache_error_last());
        rc = heal(out, cache, program);
        if (!rc)
            rc = load(out, program, &refused);
    }
done:
    progcache_entry_meta_release(&meta);
    return rc;
}

void progcache_program_result_release(progcache_program_result *result)
{
    if (!result)
        return;
    unload(progcache__cuda_loaded(), result);
    progcache_buf_free(&result->artifact);
    progcache_buf_free(&result->log);
    unsigned int version = result->version;
    /* Only as much as the caller's version of the struct has. */
    size_t size = sizeof *result;
    if (version >= 2)
        progcache_buf_free(&result->cache_detail);
    else
        size = offsetof(progcache_program_result, lookup_error);
    memset(result, 0, size);
    result->version = version;
}
