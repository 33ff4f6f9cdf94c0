/* progcache._native: the C extension under the progcache package.
 *
 * A CPython extension written against the stable parts of the C API (not
 * cffi, not ctypes): it needs nothing at run time but the interpreter, and
 * a call costs one METH_FASTCALL dispatch, a read lock on the handle (so
 * that close() cannot free it under a call running in another thread) and
 * one release of the GIL around the library call, which may do I/O or
 * compile (docs/PYTHON.md, "How it is bound"). The library is linked in
 * statically (libprogcache.a, built by the project's CMake).
 *
 * Every failure raises the exception class the Python side registered for
 * the code (_set_errors), carrying progcache_error_last() and the code. */
#include "_native.h"

#include <string.h>

static PyObject *error_classes; /* dict: code (int) -> exception class */

PyObject *pcpy_raise(int rc, const char *message)
{
    PyObject *code = PyLong_FromLong(rc);
    PyObject *cls = code && error_classes ? PyDict_GetItemWithError(error_classes, code) : NULL;
    if (!cls && !PyErr_Occurred())
        cls = PyExc_RuntimeError;
    if (cls) {
        const char *text = message && *message ? message : progcache_strerror(rc);
        PyObject *args = Py_BuildValue("(si)", text, rc);
        if (args) {
            PyErr_SetObject(cls, args);
            Py_DECREF(args);
        }
    }
    Py_XDECREF(code);
    return NULL;
}

/* --- the handle ------------------------------------------------------ */

static void cache_dealloc(pcpy_cache *self)
{
    if (self->lock_ready) {
        pthread_rwlock_wrlock(&self->lock);
        progcache_close(self->cache);
        self->cache = NULL;
        pthread_rwlock_unlock(&self->lock);
        pthread_rwlock_destroy(&self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A byte count from Python: None or 0 is "not set" (the directory's
 * setting), -1 is PROGCACHE_SIZE_NONE ("none"). */
static int size_arg(PyObject *o, uint64_t *out)
{
    *out = 0;
    if (o == Py_None)
        return 0;
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < -1) {
        PyErr_SetString(PyExc_ValueError, "a size must be positive, 0 (the setting) or -1 (none)");
        return -1;
    }
    *out = v == -1 ? PROGCACHE_SIZE_NONE : (uint64_t)v;
    return 0;
}

static int cache_init(pcpy_cache *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"path", "max_size", "memory_size", "max_artifact_size",
                             "remote_url", "flags", NULL};
    const char *path = NULL, *remote = NULL;
    PyObject *max_size = Py_None, *memory_size = Py_None, *max_artifact = Py_None;
    unsigned int flags = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zOOOzI", kwlist, &path, &max_size,
                                     &memory_size, &max_artifact, &remote, &flags))
        return -1;
    if (self->lock_ready) {
        PyErr_SetString(PyExc_RuntimeError, "the cache is open already");
        return -1;
    }
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    if (size_arg(max_size, &opts.max_size) || size_arg(memory_size, &opts.memory_size) ||
        size_arg(max_artifact, &opts.max_artifact_size))
        return -1;
    opts.remote_url = remote;
    opts.flags = flags;
    progcache *cache = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = progcache_open(&cache, path, &opts);
    Py_END_ALLOW_THREADS
    if (rc) {
        pcpy_raise(rc, progcache_error_last());
        return -1;
    }
    if (pthread_rwlock_init(&self->lock, NULL)) {
        progcache_close(cache);
        PyErr_SetString(PyExc_MemoryError, "cannot make the handle's lock");
        return -1;
    }
    self->cache = cache;
    self->lock_ready = 1;
    return 0;
}

/* Take the handle for a call with the GIL released; NULL (exception set,
 * GIL held) when the cache is closed. */
progcache *pcpy_acquire(pcpy_cache *self)
{
    if (!self->lock_ready) {
        PyErr_SetString(PyExc_ValueError, "the cache is not open");
        return NULL;
    }
    pthread_rwlock_rdlock(&self->lock);
    if (!self->cache) {
        pthread_rwlock_unlock(&self->lock);
        PyErr_SetString(PyExc_ValueError, "operation on a closed cache");
        return NULL;
    }
    return self->cache;
}

void pcpy_release(pcpy_cache *self)
{
    pthread_rwlock_unlock(&self->lock);
}

static int key_arg(PyObject *o, Py_buffer *view)
{
    if (!PyBytes_Check(o)) {
        PyErr_Format(PyExc_TypeError, "a key must be bytes here, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    return PyObject_GetBuffer(o, view, PyBUF_SIMPLE);
}

static PyObject *cache_get(pcpy_cache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1)
        return PyErr_Format(PyExc_TypeError, "get() takes one key");
    Py_buffer key;
    if (key_arg(args[0], &key))
        return NULL;
    progcache *cache = pcpy_acquire(self);
    if (!cache) {
        PyBuffer_Release(&key);
        return NULL;
    }
    progcache_buf out = PROGCACHE_BUF_INIT;
    PyObject *result = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = progcache_get(&out, cache, key.buf, (size_t)key.len);
    Py_END_ALLOW_THREADS
    pcpy_release(self);
    if (rc == PROGCACHE_OK)
        result = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.size);
    else if (rc == PROGCACHE_ENOTFOUND)
        result = Py_NewRef(Py_None);
    else
        pcpy_raise(rc, progcache_error_last());
    progcache_buf_free(&out);
    PyBuffer_Release(&key);
    return result;
}

static PyObject *cache_put(pcpy_cache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "put() takes a key and the bytes");
    Py_buffer key, data;
    if (key_arg(args[0], &key))
        return NULL;
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE)) {
        PyBuffer_Release(&key);
        return NULL;
    }
    progcache *cache = pcpy_acquire(self);
    int rc = 0;
    if (cache) {
        Py_BEGIN_ALLOW_THREADS
        rc = progcache_put(cache, key.buf, (size_t)key.len, data.buf, (size_t)data.len);
        Py_END_ALLOW_THREADS
        pcpy_release(self);
    }
    PyBuffer_Release(&key);
    PyBuffer_Release(&data);
    if (!cache)
        return NULL;
    if (rc)
        return pcpy_raise(rc, progcache_error_last());
    Py_RETURN_NONE;
}

static PyObject *cache_remove(pcpy_cache *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1)
        return PyErr_Format(PyExc_TypeError, "remove() takes one key");
    Py_buffer key;
    if (key_arg(args[0], &key))
        return NULL;
    progcache *cache = pcpy_acquire(self);
    int rc = 0;
    if (cache) {
        Py_BEGIN_ALLOW_THREADS
        rc = progcache_remove(cache, key.buf, (size_t)key.len);
        Py_END_ALLOW_THREADS
        pcpy_release(self);
    }
    PyBuffer_Release(&key);
    if (!cache)
        return NULL;
    if (rc == PROGCACHE_ENOTFOUND)
        Py_RETURN_FALSE;
    if (rc)
        return pcpy_raise(rc, progcache_error_last());
    Py_RETURN_TRUE;
}

/* The calls that take the handle alone and return a code (and maybe a
 * count). */
enum simple_op { OP_CLEAR, OP_FLUSH, OP_COUNT, OP_SIZE, OP_RESET };

static PyObject *simple(pcpy_cache *self, enum simple_op op)
{
    progcache *cache = pcpy_acquire(self);
    if (!cache)
        return NULL;
    uint64_t n = 0;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    switch (op) {
    case OP_CLEAR: rc = progcache_clear(cache); break;
    case OP_FLUSH: rc = progcache_flush(cache); break;
    case OP_COUNT: rc = progcache_count(&n, cache); break;
    case OP_SIZE: rc = progcache_total_size(&n, cache); break;
    case OP_RESET: rc = progcache_stats_reset(cache); break;
    }
    Py_END_ALLOW_THREADS
    pcpy_release(self);
    if (rc)
        return pcpy_raise(rc, progcache_error_last());
    if (op == OP_COUNT || op == OP_SIZE)
        return PyLong_FromUnsignedLongLong(n);
    Py_RETURN_NONE;
}

static PyObject *cache_clear(pcpy_cache *self, PyObject *unused) { return simple(self, OP_CLEAR); }
static PyObject *cache_flush(pcpy_cache *self, PyObject *unused) { return simple(self, OP_FLUSH); }
static PyObject *cache_count(pcpy_cache *self, PyObject *unused) { return simple(self, OP_COUNT); }
static PyObject *cache_size(pcpy_cache *self, PyObject *unused) { return simple(self, OP_SIZE); }
static PyObject *cache_reset(pcpy_cache *self, PyObject *unused) { return simple(self, OP_RESET); }

static PyObject *cache_close(pcpy_cache *self, PyObject *unused)
{
    if (!self->lock_ready)
        Py_RETURN_NONE;
    /* Waits for calls in other threads to end; close waits for background
     * stores. Neither needs the GIL. */
    Py_BEGIN_ALLOW_THREADS
    pthread_rwlock_wrlock(&self->lock);
    progcache_close(self->cache);
    self->cache = NULL;
    pthread_rwlock_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *cache_path(pcpy_cache *self, void *unused)
{
    progcache *cache = pcpy_acquire(self);
    if (!cache)
        return NULL;
    const char *p = progcache_path(cache);
    PyObject *r = p ? PyUnicode_DecodeFSDefault(p) : Py_NewRef(Py_None);
    pcpy_release(self);
    return r;
}

static PyObject *cache_closed(pcpy_cache *self, void *unused)
{
    return PyBool_FromLong(!self->lock_ready || !self->cache);
}

static PyMethodDef cache_methods[] = {
    {"get", (PyCFunction)(void (*)(void))cache_get, METH_FASTCALL,
     "get(key) -> bytes | None"},
    {"put", (PyCFunction)(void (*)(void))cache_put, METH_FASTCALL, "put(key, data)"},
    {"remove", (PyCFunction)(void (*)(void))cache_remove, METH_FASTCALL,
     "remove(key) -> bool (False: no tier had it)"},
    {"clear", (PyCFunction)cache_clear, METH_NOARGS, "clear()"},
    {"flush", (PyCFunction)cache_flush, METH_NOARGS, "flush()"},
    {"count", (PyCFunction)cache_count, METH_NOARGS, "count() -> int"},
    {"total_size", (PyCFunction)cache_size, METH_NOARGS, "total_size() -> int"},
    {"stats", (PyCFunction)pcpy_cache_stats, METH_NOARGS, "stats() -> dict"},
    {"stats_reset", (PyCFunction)cache_reset, METH_NOARGS, "stats_reset()"},
    {"compile_or_load", (PyCFunction)(void (*)(void))pcpy_compile_or_load,
     METH_VARARGS | METH_KEYWORDS, "compile_or_load(...) -> dict"},
    {"close", (PyCFunction)cache_close, METH_NOARGS, "close()"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cache_getset[] = {
    {"path", (getter)cache_path, NULL, "the cache directory", NULL},
    {"closed", (getter)cache_closed, NULL, "whether close() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject cache_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "progcache._native.Cache",
    .tp_basicsize = sizeof(pcpy_cache),
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A progcache handle (progcache_open): the C library's cache.",
    .tp_methods = cache_methods,
    .tp_getset = cache_getset,
    .tp_init = (initproc)cache_init,
    .tp_new = PyType_GenericNew,
};

/* --- module functions ------------------------------------------------ */

static PyObject *set_errors(PyObject *mod, PyObject *classes)
{
    if (!PyDict_Check(classes))
        return PyErr_Format(PyExc_TypeError, "_set_errors takes a dict");
    Py_XSETREF(error_classes, Py_NewRef(classes));
    Py_RETURN_NONE;
}

static PyObject *nvrtc_version(PyObject *mod, PyObject *unused)
{
    int major = 0, minor = 0, rc;
    Py_BEGIN_ALLOW_THREADS
    rc = progcache_nvrtc_version(&major, &minor);
    Py_END_ALLOW_THREADS
    if (rc)
        return pcpy_raise(rc, progcache_error_last());
    return Py_BuildValue("(ii)", major, minor);
}

static PyMethodDef module_methods[] = {
    {"_set_errors", set_errors, METH_O, "the exception class of each code"},
    {"nvrtc_version", nvrtc_version, METH_NOARGS,
     "nvrtc_version() -> (major, minor) of the NVRTC the library would compile with"},
    {"key_nvrtc", (PyCFunction)(void (*)(void))pcpy_key_nvrtc, METH_VARARGS | METH_KEYWORDS,
     "key_nvrtc(...) -> bytes: progcache_key_nvrtc"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "progcache's C library, bound.", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void); /* the interpreter finds it by name */

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&cache_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Cache", (PyObject *)&cache_type) < 0 ||
        PyModule_AddStringConstant(m, "version", progcache_version_string()) < 0 ||
        PyModule_AddIntConstant(m, "FILE_NO_FSYNC", PROGCACHE_FILE_NO_FSYNC) < 0 ||
        PyModule_AddIntConstant(m, "FILE_FSYNC", PROGCACHE_FILE_FSYNC) < 0 ||
        PyModule_AddIntConstant(m, "NO_REMOTE", PROGCACHE_NO_REMOTE) < 0 ||
        PyModule_AddIntConstant(m, "PROGRAM_NO_SINGLE_FLIGHT",
                                PROGCACHE_PROGRAM_NO_SINGLE_FLIGHT) < 0 ||
        PyModule_AddIntConstant(m, "PROGRAM_NO_PCH", PROGCACHE_PROGRAM_NO_PCH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
