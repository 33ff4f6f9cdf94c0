/* progcache._native's files share the handle type and the error call. */
#ifndef PROGCACHE_PYTHON_NATIVE_H
#define PROGCACHE_PYTHON_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include <progcache/cuda.h>
#include <progcache/progcache.h>

typedef struct pcpy_cache {
    PyObject_HEAD
    progcache *cache;      /* NULL once closed */
    pthread_rwlock_t lock; /* calls read-lock it; close write-locks it */
    int lock_ready;
} pcpy_cache;

/* Raise the registered class for rc with message; returns NULL. */
PyObject *pcpy_raise(int rc, const char *message);

/* The handle for a call (read-locked), or NULL with an exception set. */
progcache *pcpy_acquire(pcpy_cache *self);
void pcpy_release(pcpy_cache *self);

PyObject *pcpy_cache_stats(pcpy_cache *self, PyObject *unused);
PyObject *pcpy_compile_or_load(pcpy_cache *self, PyObject *args, PyObject *kwds);
PyObject *pcpy_key_nvrtc(PyObject *mod, PyObject *args, PyObject *kwds);

#endif
