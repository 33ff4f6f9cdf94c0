/* progcache._native: the calls with many inputs or outputs: the counters,
 * a key, and compile-or-load. */
#include "_native.h"

#include <stddef.h>
#include <string.h>

#include <progcache/cuda.h>

/* The counters of progcache_stats, by name (the names `progcache stats
 * --json` uses). */
#define FIELD(n) {#n, offsetof(progcache_stats, n)}
static const struct {
    const char *name;
    size_t offset;
} counters[] = {
    FIELD(hits), FIELD(misses), FIELD(lookup_errors), FIELD(stores), FIELD(store_errors),
    FIELD(evictions), FIELD(evicted_bytes), FIELD(corrupt_removed), FIELD(singleflight_waits),
    FIELD(remote_hits), FIELD(remote_misses), FIELD(remote_errors), FIELD(remote_stores),
    FIELD(remote_rejected), FIELD(entries), FIELD(total_size), FIELD(max_size),
    FIELD(names_learned), FIELD(remote_timeouts), FIELD(remote_backoffs),
    FIELD(remote_store_errors), FIELD(remote_dropped), FIELD(remote_newer),
    FIELD(remote_too_large), FIELD(remote_bad_tag), FIELD(remote_waits), FIELD(wait_timeouts),
    FIELD(remote_takeovers), FIELD(pch_hits), FIELD(pch_misses), FIELD(pch_created),
    FIELD(pch_rejected), FIELD(pch_ms_saved), FIELD(pch_fallbacks), FIELD(sidecar_seals),
    FIELD(flight_leases), FIELD(flight_takeovers), FIELD(lock_failures), FIELD(lock_fallbacks),
    FIELD(other_writer_rescans), FIELD(other_writer_bytes), FIELD(remote_over_bound),
    FIELD(remote_deadlines), FIELD(nvrtc_key_loads), FIELD(nvrtc_missing),
    FIELD(foreign_not_stored), FIELD(modes_fixed), FIELD(files_refused), FIELD(pch_deferred),
    FIELD(pch_warm), FIELD(pch_warm_failures), FIELD(links_refused), FIELD(records_untrusted),
    FIELD(entries_untrusted), FIELD(intercept_compiles), FIELD(intercept_hits),
    FIELD(intercept_misses), FIELD(intercept_pass_options), FIELD(intercept_pass_headers),
    FIELD(intercept_pass_callback), FIELD(intercept_pass_other), FIELD(intercept_real_programs),
    FIELD(intercept_failed), FIELD(intercept_standin_hits), FIELD(intercept_standin_loads),
    FIELD(intercept_standin_version_loads), FIELD(intercept_standin_refused),
    FIELD(intercept_failed),
    /* i32-scale */
    FIELD(shards_rescanned), FIELD(evict_steps), FIELD(evict_step_entries), FIELD(state_seeds),
    FIELD(intercept_failed), FIELD(tier_backoffs), FIELD(tier_skipped),
    FIELD(remote_files_refused),
    FIELD(intercept_failed), FIELD(explain_made), FIELD(explain_records),
    FIELD(explain_refused), FIELD(entries_resealed),
};
#undef FIELD

PyObject *pcpy_cache_stats(pcpy_cache *self, PyObject *unused)
{
    progcache *cache = pcpy_acquire(self);
    if (!cache)
        return NULL;
    progcache_stats s = PROGCACHE_STATS_INIT;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = progcache_stats_get(&s, cache);
    Py_END_ALLOW_THREADS
    pcpy_release(self);
    if (rc)
        return pcpy_raise(rc, progcache_error_last());
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s + counters[i].offset, sizeof v);
        PyObject *o = PyLong_FromUnsignedLongLong(v);
        if (!o || PyDict_SetItemString(d, counters[i].name, o)) {
            Py_XDECREF(o);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(o);
    }
    PyObject *since = PyLong_FromLongLong((long long)s.since);
    PyObject *available = PyBool_FromLong(s.available);
    int bad = !since || !available || PyDict_SetItemString(d, "since", since) ||
              PyDict_SetItemString(d, "available", available);
    Py_XDECREF(since);
    Py_XDECREF(available);
    if (bad) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* --- the inputs of a key --------------------------------------------- */

/* A sequence of bytes as C strings, borrowed from a tuple of them (seq). */
typedef struct strings {
    PyObject *seq;
    const char **items;
    size_t count;
} strings;

static int strings_get(strings *out, PyObject *o, const char *what)
{
    memset(out, 0, sizeof *out);
    /* A tuple: the strings stay alive and in place while the GIL is
     * released (a list could be changed by another thread meanwhile). */
    out->seq = PySequence_Tuple(o);
    if (!out->seq)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(out->seq);
    out->items = PyMem_Calloc((size_t)n + 1, sizeof *out->items);
    if (!out->items) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(out->seq, i);
        char *s;
        Py_ssize_t len;
        if (!PyBytes_Check(item) || PyBytes_AsStringAndSize(item, &s, &len) < 0 ||
            (size_t)len != strlen(s)) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "%s: item %zd is not bytes without a NUL byte",
                             what, i);
            }
            return -1;
        }
        out->items[i] = s;
    }
    out->count = (size_t)n;
    return 0;
}

static void strings_free(strings *s)
{
    PyMem_Free(s->items);
    Py_XDECREF(s->seq);
}

typedef struct inputs {
    progcache_key_nvrtc_options opts;
    strings options, names;
    Py_buffer source, digest;
    int have_digest;
} inputs;

static void inputs_free(inputs *in)
{
    strings_free(&in->options);
    strings_free(&in->names);
    if (in->source.obj)
        PyBuffer_Release(&in->source);
    if (in->have_digest)
        PyBuffer_Release(&in->digest);
}

/* Fill in from the arguments every key call takes. */
static int inputs_get(inputs *in, PyObject *source, int target, PyObject *options,
                      const char *name, PyObject *names, int names_are_bytes,
                      PyObject *digest)
{
    memset(in, 0, sizeof *in);
    progcache_key_nvrtc_options_init(&in->opts);
    if (!PyBytes_Check(source)) {
        PyErr_SetString(PyExc_TypeError, "the source must be bytes (UTF-8) here");
        return -1;
    }
    if (PyObject_GetBuffer(source, &in->source, PyBUF_SIMPLE) ||
        strings_get(&in->options, options, "options") ||
        strings_get(&in->names, names, "name_expressions"))
        return -1;
    if (digest != Py_None) {
        if (PyObject_GetBuffer(digest, &in->digest, PyBUF_SIMPLE))
            return -1;
        in->have_digest = 1;
        in->opts.extra_digest = in->digest.buf;
        in->opts.extra_digest_len = (size_t)in->digest.len;
    }
    in->opts.source = in->source.buf;
    in->opts.source_len = (size_t)in->source.len;
    in->opts.target = (progcache_target)target;
    in->opts.options = in->options.items;
    in->opts.num_options = in->options.count;
    in->opts.name = name;
    in->opts.name_expressions = in->names.items;
    in->opts.num_name_expressions = in->names.count;
    in->opts.name_expressions_are_bytes = names_are_bytes;
    return 0;
}

PyObject *pcpy_key_nvrtc(PyObject *mod, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"source", "target", "options", "name", "name_expressions",
                             "names_are_bytes", "extra_digest", "nvrtc_major",
                             "nvrtc_minor", NULL};
    PyObject *source, *options = Py_None, *names = Py_None, *digest = Py_None;
    const char *name = NULL;
    int target = 0, names_are_bytes = 0, major = 0, minor = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|OzOpOii", kwlist, &source, &target,
                                     &options, &name, &names, &names_are_bytes, &digest,
                                     &major, &minor))
        return NULL;
    PyObject *empty = PyTuple_New(0);
    inputs in;
    int rc = 1;
    if (empty && !inputs_get(&in, source, target, options == Py_None ? empty : options, name,
                             names == Py_None ? empty : names, names_are_bytes, digest)) {
        unsigned char key[PROGCACHE_KEY_SIZE];
        in.opts.nvrtc_major = major;
        in.opts.nvrtc_minor = minor;
        Py_BEGIN_ALLOW_THREADS
        rc = progcache_key_nvrtc(key, &in.opts);
        Py_END_ALLOW_THREADS
        inputs_free(&in);
        Py_DECREF(empty);
        if (rc)
            return pcpy_raise(rc, progcache_error_last());
        return PyBytes_FromStringAndSize((const char *)key, sizeof key);
    }
    if (empty)
        inputs_free(&in);
    Py_XDECREF(empty);
    return NULL;
}

/* --- compile-or-load ------------------------------------------------- */

static PyObject *text(const progcache_buf *b)
{
    return PyUnicode_DecodeUTF8(b->data ? (const char *)b->data : "", (Py_ssize_t)b->size,
                                "replace");
}

static PyObject *result_dict(const progcache_program_result *r)
{
    PyObject *names = PyList_New((Py_ssize_t)r->num_names);
    if (!names)
        return NULL;
    for (size_t i = 0; i < r->num_names; i++) {
        const char *n = r->lowered_names[i] ? r->lowered_names[i] : "";
        PyObject *s = PyUnicode_DecodeUTF8(n, (Py_ssize_t)strlen(n), "surrogateescape");
        if (!s) {
            Py_DECREF(names);
            return NULL;
        }
        PyList_SET_ITEM(names, (Py_ssize_t)i, s);
    }
    PyObject *log = text(&r->log), *detail = text(&r->cache_detail);
    PyObject *d = NULL;
    if (log && detail)
        d = Py_BuildValue(
            "{s:s,s:y#,s:y#,s:O,s:d,s:d,s:d,s:d,s:d,s:d,s:i,s:i,s:i,s:i,s:s,s:O,s:O,s:i}",
            "status", progcache_status_name(r->status), "key", (const char *)r->key,
            (Py_ssize_t)sizeof r->key, "artifact",
            r->artifact.data ? (const char *)r->artifact.data : "",
            (Py_ssize_t)r->artifact.size, "log", log, "key_ms", r->key_ms, "lookup_ms",
            r->lookup_ms, "compile_ms", r->compile_ms, "store_ms", r->store_ms, "load_ms",
            r->load_ms, "wait_ms", r->wait_ms, "waited", r->waited, "healed", r->healed,
            "cache_error", r->cache_error, "stored", r->stored, "cache_message",
            r->cache_message, "cache_detail", detail, "lowered_names", names,
            "names_learned", r->names_learned);
    Py_XDECREF(log);
    Py_XDECREF(detail);
    Py_DECREF(names);
    return d;
}

PyObject *pcpy_compile_or_load(pcpy_cache *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"source", "target", "options", "name", "name_expressions",
                             "names_are_bytes", "extra_digest", "flags", "wait_timeout_ms",
                             NULL};
    PyObject *source, *options, *names, *digest = Py_None;
    const char *name = NULL;
    int target = 0, names_are_bytes = 0;
    unsigned int flags = 0, wait_ms = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OiOzO|pOII", kwlist, &source, &target,
                                     &options, &name, &names, &names_are_bytes, &digest, &flags,
                                     &wait_ms))
        return NULL;
    inputs in;
    if (inputs_get(&in, source, target, options, name, names, names_are_bytes, digest)) {
        inputs_free(&in);
        return NULL;
    }
    progcache *cache = pcpy_acquire(self);
    if (!cache) {
        inputs_free(&in);
        return NULL;
    }
    progcache_program program = PROGCACHE_PROGRAM_INIT;
    program.nvrtc = in.opts;
    /* The artifact only: cuda.core loads it (ObjectCode). */
    program.flags = flags | PROGCACHE_PROGRAM_NO_LOAD;
    program.wait_timeout_ms = wait_ms;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = progcache_compile_or_load(&r, cache, &program);
    Py_END_ALLOW_THREADS
    pcpy_release(self);
    inputs_free(&in);
    PyObject *d = rc ? pcpy_raise(rc, progcache_error_last()) : result_dict(&r);
    progcache_program_result_release(&r);
    return d;
}
