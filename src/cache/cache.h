/* Internal: the cache handle, shared by the files of the cache layer.
 *
 * After progcache_open returns, the tiers and path never change until
 * progcache_close: every mutable thing lives in the stores, which lock for
 * themselves, or in the background-put state, which has its own mutex.
 * That is what makes one handle safe for many threads. */
#ifndef PROGCACHE_CACHE_CACHE_H
#define PROGCACHE_CACHE_CACHE_H

#include <pthread.h>

#include "error.h" /* PROGCACHE_PRINTF */
#include "progcache/cache.h"

struct progcache {
    progcache_store **tiers; /* top (fastest) first; the last is the persistent one */
    size_t num_tiers;
    char *path; /* the cache directory, or NULL (progcache_open_tiers) */

    progcache_log_fn log; /* optional */
    void *log_ctx;

    pthread_mutex_t async_lock;     /* guards async */
    struct progcache__async *async; /* background puts (async_put.c), or NULL */
};

/* Pass a formatted message to the cache's log callback, if any. */
void progcache__cache_log(const progcache *cache, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4);

#endif
