/* progcache_stats_get / progcache_stats_reset on a cache handle: the
 * counters live with the home tier (for a cache directory, progcache/stats,
 * shared by every process), behind the store's statistics ops; the remote
 * tiers' own per-process counts are folded into them. */
#include "cache/cache_stats.h"

#include "cache/cache.h"
#include "error.h"
#include "store/store.h"

/* The order of progcache_store_counters' fields after version. */
static const progcache_stat remote_stats[5] = {
    PROGCACHE_STAT_REMOTE_HITS, PROGCACHE_STAT_REMOTE_MISSES, PROGCACHE_STAT_REMOTE_ERRORS,
    PROGCACHE_STAT_REMOTE_STORES, PROGCACHE_STAT_REMOTE_REJECTED};

void progcache__cache_fold_remote(progcache *cache)
{
    if (!cache)
        return;
    /* A remote tier counts per process; the home tier's statistics are
     * shared and persistent, so each cache adds what happened since it
     * last looked. */
    for (size_t t = cache->home + 1; t < cache->num_tiers; t++) {
        progcache_store_counters c = PROGCACHE_STORE_COUNTERS_INIT;
        if (progcache_store_counters_get(&c, cache->tiers[t]) != PROGCACHE_OK)
            continue;
        const uint64_t now[5] = {c.hits, c.misses, c.errors, c.stores, c.rejected};
        uint64_t delta[5];
        pthread_mutex_lock(&cache->async_lock);
        for (int i = 0; i < 5; i++) {
            delta[i] = now[i] - cache->remote_seen[t][i];
            cache->remote_seen[t][i] = now[i];
        }
        pthread_mutex_unlock(&cache->async_lock);
        for (int i = 0; i < 5; i++)
            if (delta[i])
                progcache__cache_record(cache, remote_stats[i], delta[i]);
    }
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
