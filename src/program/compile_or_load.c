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
 *     the caller may reuse, one structure check, one library load. A
 *     program that reads headers adds a stat per header (program_key.c).
 *  4. Never load the wrong kernel: a name expression's kernel comes from
 *     NVRTC, from the record kept with the entry, or from the artifact's
 *     own kernels where that is certain, else the program is compiled once
 *     to learn it (program_names.c). */
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
#include "cuda/driver.h"
#include "error.h"
#include "program/explain.h"
#include "program/program_key.h"
#include "program/program_load.h"
#include "program/program_names.h"
#include "key/key_options.h"
#include "key/nvrtc_lib.h"
#include "cuda/nvrtc_record.h"
#include "options.h"
#include "pch/pch.h"
#include "progcache/cuda.h"

/* What one call carries between its steps besides the result. */
typedef struct call {
    progcache_program_result *out;
    progcache *cache;
    const progcache_program *program;
    progcache__program_key key;  /* the headers the key covers */
    progcache_buf lowered;       /* the name expressions' lowered names */
    int names;                   /* lowered holds them */
    const char *nvrtc_how;       /* where the key's NVRTC version came from, or NULL (the caller) */
} call;


/* progcache_program as version 1 laid it out, when progcache_key_nvrtc_options
 * (embedded by value) had no headers: a caller built against that header
 * passes this shape, and every field after nvrtc sits elsewhere. */
typedef struct key_options_v1 {
    unsigned int version;
    const char *source;
    size_t source_len;
    progcache_target target;
    const char *const *options;
    size_t num_options;
    const char *name;
    const char *const *name_expressions;
    size_t num_name_expressions;
    int name_expressions_are_bytes;
    const unsigned char *extra_digest;
    size_t extra_digest_len;
    int nvrtc_major;
    int nvrtc_minor;
} key_options_v1;

typedef struct program_v1 {
    unsigned int version;
    key_options_v1 nvrtc;
    const char *kernel;
    unsigned int flags;
    progcache_log_fn log;
    void *log_ctx;
    unsigned int wait_timeout_ms;
} program_v1;

/* A version-1 program into this version's struct (dst set to defaults). */
static void program_from_v1(progcache_program *dst, const program_v1 *src)
{
    dst->nvrtc.version = src->nvrtc.version;
    dst->nvrtc.source = src->nvrtc.source;
    dst->nvrtc.source_len = src->nvrtc.source_len;
    dst->nvrtc.target = src->nvrtc.target;
    dst->nvrtc.options = src->nvrtc.options;
    dst->nvrtc.num_options = src->nvrtc.num_options;
    dst->nvrtc.name = src->nvrtc.name;
    dst->nvrtc.name_expressions = src->nvrtc.name_expressions;
    dst->nvrtc.num_name_expressions = src->nvrtc.num_name_expressions;
    dst->nvrtc.name_expressions_are_bytes = src->nvrtc.name_expressions_are_bytes;
    dst->nvrtc.extra_digest = src->nvrtc.extra_digest;
    dst->nvrtc.extra_digest_len = src->nvrtc.extra_digest_len;
    dst->nvrtc.nvrtc_major = src->nvrtc.nvrtc_major;
    dst->nvrtc.nvrtc_minor = src->nvrtc.nvrtc_minor;
    dst->kernel = src->kernel;
    dst->flags = src->flags;
    dst->log = src->log;
    dst->log_ctx = src->log_ctx;
    dst->wait_timeout_ms = src->wait_timeout_ms;
}

/* The caller's program as this library's struct: a version-1 one from its
 * own layout, a later one by the versioned-struct rule (fields it did not
 * know keep their defaults); its nvrtc member by the key options' rule. */
static int load_program(progcache_program *p, const progcache_program *program)
{
    static const size_t program_size[] = {0, sizeof(program_v1), sizeof(progcache_program)};
    progcache_program_init(p);
    if (!program)
        return PROGCACHE_OK;
    int rc = progcache__options_load(p, program, program_size, PROGCACHE_PROGRAM_VERSION,
                                     "progcache_compile_or_load", "progcache_program");
    if (rc)
        return rc;
    progcache_key_nvrtc_options given;
    if (program->version == 1) {
        progcache_program_init(p);
        program_from_v1(p, (const program_v1 *)(const void *)program);
        given = p->nvrtc;
    } else {
        given = program->nvrtc;
    }
    if (given.version > 1 && program->version == 1)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_compile_or_load: a version-1 progcache_program holds "
                                "a version-1 nvrtc member, not version %u",
                                given.version);
    return progcache__key_load(&p->nvrtc, &given, "progcache_compile_or_load");
}

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
                       progcache_entry_meta *meta, progcache *cache,
                       const progcache_program *program)
{
    if (!cache || (program->flags & PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT))
        return 0;
    int owner = 1;
    double waited = 0;
    unsigned int timeout = program->wait_timeout_ms ? program->wait_timeout_ms
                                                    : progcache__cache_wait_timeout(cache);
    flight->log = program->log;
    flight->log_ctx = program->log_ctx;
    int rc = progcache__flight_begin(flight, &owner, &waited, &out->artifact, meta, cache,
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

/* Store the artifact in out (with its lowered names) under out->key:
 * synchronously, or handed to the background thread (which takes flight
 * over). A failure is recorded in out (rule 1), not returned. */
static void store(call *c, progcache__flight *flight, const char *what)
{
    progcache_program_result *out = c->out;
    const progcache_program *program = c->program;
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    double t = progcache__clock_ms();
    /* Headers that changed while NVRTC read them: the artifact may be of
     * other bytes than the key covers, so it is not stored (the next call
     * compiles again). */
    int rc = c->key.reads ? progcache__program_key_unchanged(&c->key) : PROGCACHE_OK;
    if (!rc && c->names)
        rc = progcache__names_add_record(&meta, &program->nvrtc, &c->lowered);
    if (rc) {
        cache_failed(out, program, rc, STEP_STORE, what);
        goto done;
    }
    if (progcache__cache_writes_off(c->cache))
        goto done; /* PROGCACHE_DISABLE or _READONLY: said once at open */
    if (progcache__cache_foreign(c->cache)) {
        /* Another user's cache directory: compiled, not stored (said once
         * at open; counted). Whatever the tiers below hold is left. */
        progcache__cache_record(c->cache, PROGCACHE_STAT_FOREIGN_NOT_STORED, 1);
        goto done;
    }
    if ((program->flags & PROGCACHE_PROGRAM_ASYNC_STORE) && flight &&
        progcache__cache_put_async(c->cache, out->key, sizeof out->key, out->artifact.data,
                                   out->artifact.size, &meta, flight, program->log,
                                   program->log_ctx) == PROGCACHE_OK) {
        /* The background put takes the compile lock over and drops it
         * once the entry exists, so no waiter wakes to an empty cache. */
        out->store_pending = 1;
    } else {
        int put = progcache__cache_put_meta(c->cache, out->key, sizeof out->key,
                                            out->artifact.data, out->artifact.size, &meta);
        if (put)
            cache_failed(out, program, put, STEP_STORE, what);
        if (has_v2(out))
            out->stored = !put || progcache__cache_holds(c->cache, out->key, sizeof out->key);
        if (put && !(has_v2(out) && out->stored))
            goto done;
    }
    progcache__explain_note(c->cache, &program->nvrtc, &c->key, out->key, program->log,
                            program->log_ctx);
    progcache__program_key_store(&c->key, c->cache, program->log, program->log_ctx);
done:
    out->store_ms += progcache__clock_ms() - t;
    progcache_entry_meta_release(&meta);
}

/* Compile into out->artifact, with the lowered names into c->lowered. */
static int compile(call *c, progcache_buf *into)
{
    double t = progcache__clock_ms();
    const progcache_key_nvrtc_options *o = &c->program->nvrtc;
    /* NVRTC is loaded and checked there (progcache__nvrtc_for_compile),
     * where the compile runs in this process. */
    int rc = progcache__pch_compile(into, &c->out->log,
                                    o->num_name_expressions ? &c->lowered : NULL, c->cache,
                                    c->program, c->nvrtc_how);
    c->names = !rc && o->num_name_expressions;
    c->out->compile_ms += progcache__clock_ms() - t;
    return rc;
}

static int learn_names(call *c);

static int compile_and_store(call *c)
{
    progcache_program_result *out = c->out;
    const progcache_program *program = c->program;
    progcache__flight flight = PROGCACHE__FLIGHT_INIT;
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    int rc = PROGCACHE_OK;
    if (join_flight(&flight, out, &meta, c->cache, program)) {
        /* Bytes found by looking again are checked like any hit (rule 2):
         * they may be the very entry a heal could not remove, or another
         * bad one. Unusable, they are compiled over: the store below
         * replaces the entry. */
        if (!progcache__artifact_check(out->artifact.data, out->artifact.size,
                                       program->nvrtc.target, meta.seal == PROGCACHE_SEAL_WHOLE,
                                       out->heal_reason, sizeof out->heal_reason)) {
            /* The names come with the entry that appeared (a record of the
             * compile we waited for); without them, the caller learns
             * them as from any hit. */
            if (out->version >= 3 && program->nvrtc.num_name_expressions) {
                rc = progcache__names_of_entry(&c->lowered, &program->nvrtc, &meta,
                                               &out->artifact);
                c->names = rc == 1;
                rc = rc < 0 ? rc : c->names ? PROGCACHE_OK : learn_names(c);
            }
            goto done;
        }
        say(program, PROGCACHE_LOG_WARN, "progcache: the cached entry found on a second look is "
            "unusable (%s); compiling again", out->heal_reason);
        out->status = PROGCACHE_STATUS_MISS;
        out->healed = 1;
    }
    rc = compile(c, &out->artifact);
    if (!rc && c->cache)
        store(c, &flight, "store");
done:
    progcache__flight_end(&flight);
    progcache_entry_meta_release(&meta);
    return rc;
}

/* A hit on an entry without the lowered names the call needs (written by
 * cuda.core or an older progcache, or whose records could not be kept):
 * compile once to learn them. The same bytes as the entry: the names are
 * the entry's, and are stored with it (the same bytes again), so the next
 * hit needs no compile. Other bytes (another NVRTC build, an entry not of
 * this compile): the fresh artifact is used and replaces the entry. */
static int learn_names(call *c)
{
    progcache_program_result *out = c->out;
    const progcache_program *program = c->program;
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    progcache_key_hex(hex, out->key, sizeof out->key);
    say(program, PROGCACHE_LOG_INFO, "progcache: entry %.16s... written without lowered names; "
        "compiling once to learn them", hex);
    progcache__cache_record(c->cache, PROGCACHE_STAT_NAMES_LEARNED, 1);
    progcache_buf fresh = PROGCACHE_BUF_INIT;
    int rc = compile(c, &fresh);
    if (rc)
        goto done;
    if (fresh.size != out->artifact.size || memcmp(fresh.data, out->artifact.data, fresh.size)) {
        snprintf(out->heal_reason, sizeof out->heal_reason,
                 "it had no lowered names, and compiling again gave other bytes (%zu, not %zu)",
                 fresh.size, out->artifact.size);
        say(program, PROGCACHE_LOG_WARN, "progcache: cached entry %.16s... %s; replacing it",
            hex, out->heal_reason);
        progcache_buf swap = out->artifact;
        out->artifact = fresh;
        fresh = swap;
        out->healed = 1;
        out->status = PROGCACHE_STATUS_MISS;
    }
    if (out->version >= 3)
        out->names_learned = 1;
    store(c, NULL, "store of the lowered names");
done:
    progcache_buf_free(&fresh);
    return rc;
}
static int check_args(progcache_program_result *out, const progcache_program *program)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_compile_or_load: out is NULL");
    int bad = progcache__version_check(out, PROGCACHE_PROGRAM_RESULT_VERSION,
                                       "progcache_compile_or_load", "out",
                                       "progcache_program_result");
    if (bad)
        return bad;
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
static int heal(call *c)
{
    progcache_program_result *out = c->out;
    progcache *cache = c->cache;
    const progcache_program *program = c->program;
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
    return compile_and_store(c);
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
    if (out->version >= 3) {
        out->num_names = 0;
        out->lowered_names = NULL;
        out->kernels = NULL;
        out->functions = NULL;
        out->names_learned = 0;
        out->names_memory.size = 0;
    }
}

/* The lookup and what a hit needs before it is used: its check (rule 2)
 * and its names (rule 4). Sets *have when the cache had the entry. */
PROGCACHE_HOT
static int look_up(call *c, progcache_entry_meta *meta, int *have)
{
    progcache_program_result *out = c->out;
    const progcache_program *program = c->program;
    double t = progcache__clock_ms();
    *have = 0;
    if (!c->cache) {
        out->status = PROGCACHE_STATUS_DISABLED;
        out->lookup_ms = progcache__clock_ms() - t;
        return PROGCACHE_OK;
    }
    int rc = progcache__cache_get_meta(&out->artifact, meta, c->cache, out->key, sizeof out->key);
    if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND)
        cache_failed(out, program, rc, STEP_LOOKUP, "lookup");
    if (rc != PROGCACHE_OK) {
        out->lookup_ms = progcache__clock_ms() - t;
        return PROGCACHE_OK;
    }
    *have = 1;
    out->status = PROGCACHE_STATUS_HIT;
    if (progcache__artifact_check(out->artifact.data, out->artifact.size, program->nvrtc.target,
                                  meta->seal == PROGCACHE_SEAL_WHOLE, out->heal_reason,
                                  sizeof out->heal_reason)) {
        out->lookup_ms = progcache__clock_ms() - t;
        return heal(c);
    }
    /* Names matter to a result that returns them; an older result's
     * caller names its kernel itself. */
    if (out->version >= 3 && program->nvrtc.num_name_expressions) {
        rc = progcache__names_of_entry(&c->lowered, &program->nvrtc, meta, &out->artifact);
        c->names = rc == 1;
        if (rc < 0) {
            out->lookup_ms = progcache__clock_ms() - t;
            return rc;
        }
    }
    out->lookup_ms = progcache__clock_ms() - t;
    if (out->version >= 3 && program->nvrtc.num_name_expressions && !c->names)
        return learn_names(c);
    /* A hit whose manifest was missing or out of date: keep the new one. */
    progcache__program_key_store(&c->key, c->cache, program->log, program->log_ctx);
    return PROGCACHE_OK;
}

PROGCACHE_HOT
int progcache_compile_or_load(progcache_program_result *out, progcache *cache,
                              const progcache_program *program)
{
    /* The caller's program, as this library's version of the struct: an
     * older caller's keeps the defaults for what it did not know. */
    progcache_program p;
    int rc = load_program(&p, program);
    if (!rc)
        rc = check_args(out, program ? &p : NULL);
    if (rc)
        return rc;
    reset(out);
    call c = {out, cache, &p, PROGCACHE__PROGRAM_KEY_INIT, PROGCACHE_BUF_INIT, 0, NULL};
    /* What the tier that hit knows of the bytes: the seal state, which
     * spares a whole structure check, and the records (lowered names). */
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;

    double t = progcache__clock_ms();
    /* The key's NVRTC version without loading NVRTC where a record says
     * it (nvrtc_record.c): a hit never maps NVRTC. */
    if (!p.nvrtc.nvrtc_major && !p.nvrtc.nvrtc_minor)
        rc = progcache__nvrtc_key_version(&p.nvrtc.nvrtc_major, &p.nvrtc.nvrtc_minor,
                                          &c.nvrtc_how, cache);
    if (!rc)
        rc = progcache__program_key_derive(out->key, &c.key, cache, &p.nvrtc);
    out->key_ms = progcache__clock_ms() - t;
    if (rc)
        goto done;
    int have = 0;
    rc = look_up(&c, &meta, &have);
    if (!rc && !have)
        progcache__explain_miss(cache, &p.nvrtc, &c.key, out->key, p.log, p.log_ctx);
    if (!rc && !have)
        rc = compile_and_store(&c);
    if (!rc && out->version >= 3 && c.names)
        rc = progcache__names_to_result(out, &p.nvrtc, &c.lowered);
    if (!rc && (p.flags & PROGCACHE_PROGRAM_NO_LOAD))
        rc = progcache__program_check_kernel(out, &p);
    if (rc || (p.flags & PROGCACHE_PROGRAM_NO_LOAD))
        goto done;
    int refused = 0;
    rc = progcache__program_load(out, &p, &refused);
    if (rc && refused && out->status == PROGCACHE_STATUS_HIT) {
        snprintf(out->heal_reason, sizeof out->heal_reason, "the driver refused it: %s",
                 progcache_error_last());
        rc = heal(&c);
        if (!rc && out->version >= 3 && c.names)
            rc = progcache__names_to_result(out, &p.nvrtc, &c.lowered);
        if (!rc)
            rc = progcache__program_load(out, &p, &refused);
    }
done:
    /* NVRTC loaded (to compile, or to learn the key's version): its record,
     * so that the next process's hit need not load it. */
    if (c.nvrtc_how == PROGCACHE__NVRTC_LOADED_FOR_KEY && out->status == PROGCACHE_STATUS_HIT)
        progcache__cache_record(cache, PROGCACHE_STAT_NVRTC_KEY_LOADS, 1);
    progcache__nvrtc_record_loaded(cache);
    progcache_entry_meta_release(&meta);
    progcache__program_key_free(&c.key);
    progcache_buf_free(&c.lowered);
    return rc;
}

void progcache_program_result_release(progcache_program_result *result)
{
    if (!result)
        return;
    progcache__program_unload(progcache__cuda_loaded(), result);
    progcache_buf_free(&result->artifact);
    progcache_buf_free(&result->log);
    unsigned int version = result->version;
    /* Only as much as the caller's version of the struct has. */
    size_t size = sizeof *result;
    if (version >= 2)
        progcache_buf_free(&result->cache_detail);
    if (version >= 3)
        progcache_buf_free(&result->names_memory);
    if (version == 2)
        size = offsetof(progcache_program_result, num_names);
    else if (version < 2)
        size = offsetof(progcache_program_result, lookup_error);
    memset(result, 0, size);
    result->version = version;
}
