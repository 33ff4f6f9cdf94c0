/* Internal: statistics at the cache layer (cache_stats.c, cache.c). */
#ifndef PROGCACHE_CACHE_CACHE_STATS_H
#define PROGCACHE_CACHE_CACHE_STATS_H

#include "progcache/cache.h"
#include "store/file/file_stats.h"

/* The statistics of the cache's directory (its bottom tier's), or NULL for
 * a cache without a file store. For counting events the cache layer sees
 * (corrupt entries healed, single-flight waits):
 *   progcache__stats_add(progcache__cache_stats(cache), PROGCACHE__..., 1); */
progcache__stats *progcache__cache_stats(progcache *cache);

/* Add what the remote (Redis) tier counted since the last fold to the
 * directory's statistics. Called by progcache_stats_get and
 * progcache_close. */
void progcache__cache_fold_remote(progcache *cache);

/* progcache_get, also saying whether the bytes came from the cache
 * directory, matched the seal they were stored with and were a whole
 * artifact when stored (*sealed = 1; compile-or-load's hit path). */
int progcache__cache_get_sealed(progcache_buf *out, progcache *cache, const void *key,
                                size_t key_len, int *sealed);

/* progcache_get without counting a hit or miss: for lookups that are not
 * the caller's (polling while another process compiles the key). */
int progcache__cache_get_quiet(progcache_buf *out, progcache *cache, const void *key,
                               size_t key_len);

/* After a progcache_put that failed: whether key's entry is in the
 * persistent tier all the same (a put can fail after its entry is in
 * place, when making it durable failed; or another process stored the key
 * meanwhile). Reads the entry once, uncounted; the thread's error is left
 * as it was. */
int progcache__cache_holds(progcache *cache, const void *key, size_t key_len);

#endif
