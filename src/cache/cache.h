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
    progcache_store **tiers; /* top (fastest) first */
    size_t num_tiers;
    /* The tier that is the cache's own record: the file store (the last
     * one, if several), else the bottom tier. Puts write it first; counts,
     * sizes and statistics come from it. Tiers below it are shared remote
     * tiers (Redis): written after it, never allowed to fail a call. */
    size_t home;
    size_t remote; /* index of the Redis tier, or num_tiers when none */
    char *path; /* the cache directory, or NULL (progcache_open_tiers) */

    progcache_log_fn log; /* optional */
    void *log_ctx;

    pthread_mutex_t async_lock;     /* guards async and remote_seen */
    struct progcache__async *async; /* background puts (async_put.c), or NULL */
    /* The remote tier's counters as last added to the directory's
     * statistics (cache_stats.c folds in the difference). */
    uint64_t remote_seen[5];
    /* Set (atomically, once) when the single-flight lock file was found
     * unusable and the log was told: the one field written outside the
     * stores and the background-put state, and only ever from 0 to 1. */
    int flight_warned;
};

/* Pass a formatted message to the cache's log callback, if any. */
void progcache__cache_log(const progcache *cache, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4) PROGCACHE_COLD;

#endif
