/* Internal: puts that finish in the background (async_put.c). */
#ifndef PROGCACHE_CACHE_ASYNC_PUT_H
#define PROGCACHE_CACHE_ASYNC_PUT_H

#include "cache/flight.h"
#include "progcache/cache.h"

/* Queue a put of a copy of data under key on the cache's background thread
 * (started on first use), with a copy of meta's kind and records (meta may
 * be NULL). When flight holds a single-flight lock, the job
 * takes it over and releases it only after the put, so waiters never see
 * the lock free before the entry exists (flight is reset to empty).
 * PROGCACHE_OK when queued; otherwise (out of memory, no thread) a negative
 * code with a message, nothing queued and flight untouched: the caller
 * stores synchronously instead. log, if set, hears of a put that fails in
 * the background. */
int progcache__cache_put_async(progcache *cache, const void *key, size_t key_len,
                               const void *data, size_t size, const progcache_entry_meta *meta,
                               progcache__flight *flight, progcache_log_fn log, void *log_ctx);

/* Called by progcache_close() first: drain the queue and stop the thread. */
void progcache__cache_async_close(progcache *cache);

#endif
