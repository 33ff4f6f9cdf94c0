/* nvrtcCompileProgram of an intercepted program: key, lookup, and either a
 * replay of the stored bundle (no real program, no real compile) or the
 * real compile with every answer captured and stored.
 *
 * The key is compile-or-load's (program/program_key.c: cuda.core's recipe,
 * the headers on disk through the include scanner and the cache's header
 * manifest) for the program as NVRTC was given it, with its NVRTC version
 * as the library the program loaded answers it, inside a bundle key that
 * adds that library's build ID and the NVRTC_* environment (docs/KEY.md,
 * "Compile bundles"). Whatever no key covers runs on the real NVRTC untouched and
 * is counted by reason; a failed compile is not stored. Under the cache's
 * single-flight, one process (or thread) compiles a program at a time and
 * the others replay its bundle; the store runs in the background, finished
 * at exit. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cache/async_put.h"
#include "cache/cache_stats.h"
#include "cache/flight.h"
#include "config.h"
#include "error.h"
#include "intercept/intercept.h"
#include "key/frame.h"
#include "key/key_options.h"
#include "program/explain.h"
#include "program/program_key.h"

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static progcache *the_cache;
static pid_t cache_pid;

/* At exit, the stores still queued in the background are finished (the
 * cache is never closed: other threads may still be compiling). Not in a
 * forked child, which has the queue's state without its thread. A process
 * that ends otherwise (_exit, a signal) loses those stores, never an
 * entry's bytes: the next run compiles again. */
static void flush_at_exit(void)
{
    if (the_cache && getpid() == cache_pid) {
        /* A call the interceptor leaves to NVRTC (nvrtcGetSupportedArchs,
         * say) may have loaded it behind a stand-in since the last compile. */
        for (int i = 0; progcache__slots && i < PROGCACHE__INTERCEPT_SLOTS; i++)
            if (progcache__slots[i].used && progcache__slots[i].logged)
                progcache__standin_note_load(&progcache__slots[i]);
        (void)progcache_flush(the_cache);
    }
}

static void open_cache(void)
{
    if (progcache_open(&the_cache, NULL, NULL) != PROGCACHE_OK) {
        the_cache = NULL;
        progcache__intercept_log(PROGCACHE_LOG_WARN, "no cache: %s; compiles pass through",
                                 progcache_error_last());
        return;
    }
    cache_pid = getpid();
    if (atexit(flush_at_exit) != 0)
        cache_pid = 0; /* no handler: every store is made synchronously */
}

progcache *progcache__intercept_cache(void)
{
    pthread_once(&cache_once, open_cache);
    return the_cache;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The bundle key: base (the program's key) with the library's identity
 * and the NVRTC_* variables, which NVRTC reads (NVRTC_APPEND_FLAGS adds
 * options). */
static int bundle_key(unsigned char out[32], const unsigned char base[32],
                      const progcache__nvrtc_slot *s)
{
    char **env = progcache__config_environ();
    const char *vars[256];
    size_t n = 0;
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], "NVRTC_", 6)) {
            if (n == sizeof vars / sizeof vars[0])
                return progcache__error(PROGCACHE_EUNSAFEKEY, "more than %zu NVRTC_ variables",
                                        n);
            vars[n++] = env[i];
        }
    qsort(vars, n, sizeof vars[0], by_name);
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return PROGCACHE_ENOMEM;
    int rc = progcache__frame_str(h, "progcache", "nvrtc-bundle-1") ||
             progcache__frame(h, "program_key", base, 32) ||
             progcache__frame_count(h, "nvrtc_major", (size_t)s->major) ||
             progcache__frame_count(h, "nvrtc_minor", (size_t)s->minor);
    if (!rc && s->build_id_len)
        rc = progcache__frame(h, "build_id", s->build_id, s->build_id_len);
    else if (!rc)
        rc = progcache__frame_str(h, "library", s->path) ||
             progcache__frame_count(h, "library_size", (size_t)s->file_size);
    rc = rc || progcache__frame_count(h, "env", n);
    for (size_t i = 0; !rc && i < n; i++)
        rc = progcache__frame_str(h, "env", vars[i]);
    if (rc) {
        progcache__sha256_free(h);
        return PROGCACHE_ENOMEM;
    }
    return progcache__sha256_final(h, out); /* frees h */
}

/* Every answer of the real program after a successful compile. */
static int capture(progcache__bundle *b, progcache__iprog *p, nvrtcResult compiled)
{
    const progcache__real_nvrtc *r = &p->slot->real;
    b->compile_rc = compiled;
    for (int k = 0; k < OUT_COUNT; k++) {
        size_t size = 0;
        b->size_rc[k] = r->GetSize[k](p->real, &size);
        /* After a failed size, the bytes call is not made (it could write
         * any length): a replay answers it with the size's error. */
        b->bytes_rc[k] = b->size_rc[k];
        if (b->size_rc[k] != NVRTC_SUCCESS)
            continue;
        if (progcache__buf_reserve(&b->out[k], size + 1))
            return PROGCACHE_ENOMEM;
        b->bytes_rc[k] = r->GetBytes[k](p->real, (char *)b->out[k].data);
        progcache__buf_set_size(&b->out[k], size);
    }
    b->pch_status_rc = r->GetPCHCreateStatus(p->real);
    size_t heap = 0;
    b->pch_heap_rc = r->GetPCHHeapSizeRequired(p->real, &heap);
    b->pch_heap = heap;
    if (p->num_exprs) {
        b->exprs = progcache__calloc(p->num_exprs, sizeof *b->exprs);
        b->lowered = progcache__calloc(p->num_exprs, sizeof *b->lowered);
        b->lowered_rc = progcache__calloc(p->num_exprs, sizeof *b->lowered_rc);
        if (!b->exprs || !b->lowered || !b->lowered_rc)
            return PROGCACHE_ENOMEM;
    }
    for (size_t i = 0; i < p->num_exprs; i++) {
        const char *low = NULL;
        b->num_names = i + 1;
        b->lowered_rc[i] = r->GetLoweredName(p->real, p->exprs[i], &low);
        b->exprs[i] = progcache__strdup(p->exprs[i]);
        b->lowered[i] = b->lowered_rc[i] == NVRTC_SUCCESS && low ? progcache__strdup(low) : NULL;
        if (!b->exprs[i] || (b->lowered_rc[i] == NVRTC_SUCCESS && low && !b->lowered[i]))
            return PROGCACHE_ENOMEM;
    }
    return PROGCACHE_OK;
}

/* The real compile, on the real program (made now if need be). */
static nvrtcResult real_compile(progcache__iprog *p)
{
    nvrtcResult rc = progcache__iprog_materialize(p);
    if (rc != NVRTC_SUCCESS)
        return rc;
    p->compiled_real = 1;
    return p->slot->real.CompileProgram(p->real, p->num_options, (const char *const *)p->options);
}

static nvrtcResult pass(progcache__iprog *p, progcache *cache, progcache_stat why,
                        const char *fmt, const char *detail)
{
    progcache__cache_record(cache, why, 1);
    progcache__intercept_log(PROGCACHE_LOG_WARN, fmt, detail);
    return real_compile(p);
}

static int keep_options(progcache__iprog *p, int num, const char *const *options)
{
    for (int i = 0; i < p->num_options; i++)
        progcache__free(p->options[i]);
    progcache__free(p->options);
    p->options = NULL;
    p->num_options = 0;
    if (num <= 0)
        return 0;
    if (!(p->options = progcache__calloc((size_t)num, sizeof *p->options)))
        return -1;
    for (int i = 0; i < num; i++) {
        p->num_options = i + 1;
        if (options[i] && !(p->options[i] = progcache__strdup(options[i])))
            return -1;
    }
    return 0;
}

/* Whether the program holds a stand-in that has not loaded NVRTC. */
static int not_mapped(const progcache__nvrtc_slot *s)
{
    return s->standin && !atomic_load(s->loaded_by);
}

/* Behind a stand-in whose version came from the cache's record: the NVRTC
 * that compiled (loaded now) must be the file the key names, of the
 * version the key carries; otherwise the bundle is not stored. 0 when it
 * is, else -1 with the error set. */
static int standin_checked(progcache__iprog *p)
{
    progcache__nvrtc_slot *s = p->slot;
    int major = 0, minor = 0;
    if (!s->standin)
        return 0;
    progcache__standin_note_load(s);
    if (s->real_changed)
        return progcache__error(PROGCACHE_ECOMPILE, "%s changed between the stand-in's look "
                                "at it and its load", s->path);
    if (s->real.Version(&major, &minor) != NVRTC_SUCCESS)
        return progcache__error(PROGCACHE_ECOMPILE, "%s: nvrtcVersion failed", s->path);
    if (major != s->major || minor != s->minor) {
        /* The record is mended for the next process; this one's keys keep
         * the version they were derived with, and store nothing. */
        progcache__standin_mend(s, major, minor);
        return progcache__error(PROGCACHE_ECOMPILE, "%s is NVRTC %d.%d, not the %d.%d its "
                                "record says (record mended)", s->path, major, minor,
                                s->major, s->minor);
    }
    return 0;
}

/* A HIT: the program answers from the bundle from now on. */
static nvrtcResult replay(progcache__iprog *p, progcache *cache, const progcache_buf *bytes)
{
    if (progcache__bundle_decode(&p->bundle, bytes->data, bytes->size) != PROGCACHE_OK)
        return (nvrtcResult)-1;
    progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_HITS, 1);
    if (not_mapped(p->slot))
        progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_STANDIN_HITS, 1);
    p->state = IPROG_REPLAY;
    return (nvrtcResult)p->bundle.compile_rc;
}

static nvrtcResult miss(progcache__iprog *p, progcache *cache, const unsigned char key[32],
                        const progcache_key_nvrtc_options *o, progcache__program_key *pk)
{
    progcache__flight flight = PROGCACHE__FLIGHT_INIT;
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    progcache__bundle b = {0};
    int owner = 1;
    double waited = 0;
    nvrtcResult rc;
    int began = progcache__flight_begin(&flight, &owner, &waited, &bytes, &meta, cache, key, 32,
                                        progcache__cache_wait_timeout(cache));
    if (waited > 0)
        progcache__cache_record(cache, PROGCACHE_STAT_SINGLEFLIGHT_WAITS, 1);
    if (began == PROGCACHE_OK && !owner && (rc = replay(p, cache, &bytes)) != (nvrtcResult)-1)
        goto done;
    progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_MISSES, 1);
    rc = real_compile(p);
    if (rc != NVRTC_SUCCESS) {
        progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_FAILED, 1);
        goto done;
    }
    progcache_buf enc = PROGCACHE_BUF_INIT;
    int st = standin_checked(p);
    if (!st)
        st = capture(&b, p, rc);
    /* Headers that changed while NVRTC read them: not stored. */
    if (!st && pk->reads)
        st = progcache__program_key_unchanged(pk);
    if (!st)
        st = progcache__bundle_encode(&enc, &b);
    /* Off the critical path when the exit handler is there to finish it:
     * the background put takes the compile lock over and drops it once the
     * entry exists, so no waiter wakes to an empty cache. */
    if (!st && !(cache_pid == getpid() &&
                 progcache__cache_put_async(cache, key, 32, enc.data, enc.size, NULL, &flight,
                                            NULL, NULL) == PROGCACHE_OK))
        st = progcache__cache_put_meta(cache, key, 32, enc.data, enc.size, NULL);
    if (st)
        progcache__intercept_log(PROGCACHE_LOG_WARN, "compile not stored: %s",
                                 progcache_error_last());
    else {
        progcache__program_key_store(pk, cache, NULL, NULL);
        /* The bundle's inputs in the explain index, as compile-or-load's
         * entries (docs/OPERATIONS.md, "Explained misses"). */
        progcache__explain_note(cache, o, pk, key, NULL, NULL);
    }
    progcache_buf_free(&enc);
done:
    progcache__flight_end(&flight);
    progcache_entry_meta_release(&meta);
    progcache_buf_free(&bytes);
    progcache__bundle_free(&b);
    return rc;
}

nvrtcResult progcache__intercept_compile(progcache__iprog *p, int num, const char *const *options)
{
    progcache *cache = progcache__intercept_cache();
    progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_COMPILES, 1);
    progcache__standin_note_load(p->slot);
    if (p->state != IPROG_RECORDED) {
        /* A flow callback, a real program made before the compile, a
         * program compiled again: NVRTC's own. */
        progcache__cache_record(cache, p->has_callback ? PROGCACHE_STAT_INTERCEPT_PASS_CALLBACK
                                                       : PROGCACHE_STAT_INTERCEPT_PASS_OTHER, 1);
        nvrtcResult rc = progcache__iprog_materialize(p);
        return rc ? rc : p->slot->real.CompileProgram(p->real, num, options);
    }
    if (num < 0 || (num && !options) || keep_options(p, num, options)) {
        progcache__cache_record(cache, PROGCACHE_STAT_INTERCEPT_PASS_OTHER, 1);
        nvrtcResult rc = progcache__iprog_materialize(p);
        return rc ? rc : p->slot->real.CompileProgram(p->real, num, options);
    }
    const char *bad = NULL;
    if (!cache)
        return pass(p, cache, PROGCACHE_STAT_INTERCEPT_PASS_OTHER, "%s",
                    "no cache: passed through");
    if (!progcache__intercept_options_known(options, num, &bad))
        return pass(p, cache, PROGCACHE_STAT_INTERCEPT_PASS_OPTIONS,
                    "option \"%s\" is not one the interceptor knows: passed through", bad);
    for (int i = 0; i < num; i++) {
        const char *what = NULL;
        if (progcache__option_classify(options[i], &what) != PROGCACHE__OPTION_PLAIN &&
            !progcache__option_reads_headers(options[i]))
            return pass(p, cache, PROGCACHE_STAT_INTERCEPT_PASS_OPTIONS,
                        "option \"%s\" has effects no key covers: passed through", options[i]);
    }
    progcache_header *headers = NULL;
    if (p->num_headers &&
        !(headers = progcache__calloc((size_t)p->num_headers, sizeof *headers)))
        return pass(p, cache, PROGCACHE_STAT_INTERCEPT_PASS_OTHER, "%s", "out of memory");
    for (int i = 0; i < p->num_headers; i++) {
        headers[i].name = p->include_names[i];
        headers[i].content = p->headers[i];
    }
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    o.source = p->source;
    o.target = PROGCACHE_TARGET_PTX; /* the bundle holds every output */
    o.options = (const char *const *)p->options;
    o.num_options = (size_t)p->num_options;
    o.name = p->name;
    o.name_expressions = (const char *const *)p->exprs;
    o.num_name_expressions = p->num_exprs;
    o.nvrtc_major = p->slot->major;
    o.nvrtc_minor = p->slot->minor;
    o.headers = headers;
    o.num_headers = (size_t)p->num_headers;
    progcache__program_key pk = PROGCACHE__PROGRAM_KEY_INIT;
    unsigned char base[32], key[32];
    nvrtcResult rc;
    int krc = progcache__program_key_derive(base, &pk, cache, &o);
    if (!krc)
        krc = bundle_key(key, base, p->slot);
    if (krc) {
        rc = pass(p, cache, krc == PROGCACHE_EUNSAFEKEY ? PROGCACHE_STAT_INTERCEPT_PASS_HEADERS
                                                        : PROGCACHE_STAT_INTERCEPT_PASS_OTHER,
                  "no key: %s; passed through", progcache_error_last());
        goto done;
    }
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    int have = progcache__cache_get_meta(&bytes, &meta, cache, key, 32) == PROGCACHE_OK;
    rc = have ? replay(p, cache, &bytes) : (nvrtcResult)-1;
    progcache_buf_free(&bytes);
    progcache_entry_meta_release(&meta);
    char hex[65];
    progcache_key_hex(hex, key, 32);
    int hit = rc != (nvrtcResult)-1;
    if (!hit) {
        /* PROGCACHE_EXPLAIN=1: why this compile was not in the cache. */
        progcache__explain_miss(cache, &o, &pk, key, NULL, NULL);
        rc = miss(p, cache, key, &o, &pk);
    }
    else
        progcache__program_key_store(&pk, cache, NULL, NULL);
    progcache__intercept_log(PROGCACHE_LOG_INFO, "compile of %s: %s %.16s (%s)%s",
                             p->name ? p->name : "default_program",
                             hit || p->state == IPROG_REPLAY ? "HIT" : "MISS", hex,
                             p->state == IPROG_REPLAY ? "replayed" : "compiled",
                             not_mapped(p->slot) ? ", NVRTC not mapped (stand-in)" : "");
done:
    progcache__program_key_free(&pk);
    progcache__free(headers);
    return rc;
}
