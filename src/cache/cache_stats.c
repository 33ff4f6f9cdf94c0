/* progcache_stats_get / progcache_stats_reset on a cache handle: the
 * counters live with the cache directory, i.e. in the bottom (file) tier,
 * and store/stats_file.c keeps them. */
#include "cache/cache_stats.h"

#include "cache/cache.h"
#include "error.h"
#include "progcache/remote.h"
#include "progcache/stats.h"

void progcache__cache_fold_remote(progcache *cache)
{
    if (!cache || cache->remote >= cache->num_tiers)
        return;
    progcache_redis_counters c = PROGCACHE_REDIS_COUNTERS_INIT;
    if (progcache_redis_counters_get(&c, cache->tiers[cache->remote]) != PROGCACHE_OK)
        return;
    /* The Redis store counts per process; the directory's statistics are
     * shared and persistent, so each cache adds what happened since it last
     * looked. Calls skipped during back-off and puts dropped from a full
     * queue are failures of the tier as much as errors are. */
    const uint64_t now[5] = {c.hits, c.misses, c.errors + c.skipped_backoff + c.dropped, c.stores,
                             c.rejected};
    static const progcache__counter counters[5] = {
        PROGCACHE__REMOTE_HITS, PROGCACHE__REMOTE_MISSES, PROGCACHE__REMOTE_ERRORS,
        PROGCACHE__REMOTE_STORES, PROGCACHE__REMOTE_REJECTED};
    uint64_t delta[5];
    pthread_mutex_lock(&cache->async_lock);
    for (int i = 0; i < 5; i++) {
        delta[i] = now[i] - cache->remote_seen[i];
        cache->remote_seen[i] = now[i];
    }
    pthread_mutex_unlock(&cache->async_lock);
    for (int i = 0; i < 5; i++)
        progcache__stats_add(progcache__cache_stats(cache), counters[i], delta[i]);
}

progcache__stats *progcache__cache_stats(progcache *cache)
{
    return cache ? progcache__store_stats(cache->tiers[cache->home]) : NULL;
}

int progcache_stats_get(progcache_stats *out, progcache *cache)
{
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_stats_get: cache is NULL");
    progcache__cache_fold_remote(cache);
    return progcache_store_stats_get(out, cache->tiers[cache->home]);
}

int progcache_stats_reset(progcache *cache)
{
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_stats_reset: cache is NULL");
    return progcache_store_stats_reset(cache->tiers[cache->home]);
}
