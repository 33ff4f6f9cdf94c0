/* progcache_stats_get / progcache_stats_reset on a cache handle: the
 * counters live with the cache directory, i.e. in the bottom (file) tier,
 * and store/stats_file.c keeps them. */
#include "cache/cache_stats.h"

#include "cache/cache.h"
#include "error.h"
#include "progcache/stats.h"

progcache__stats *progcache__cache_stats(progcache *cache)
{
    return cache ? progcache__store_stats(cache->tiers[cache->num_tiers - 1]) : NULL;
}

int progcache_stats_get(progcache_stats *out, progcache *cache)
{
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_stats_get: cache is NULL");
    return progcache_store_stats_get(out, cache->tiers[cache->num_tiers - 1]);
}

int progcache_stats_reset(progcache *cache)
{
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_stats_reset: cache is NULL");
    return progcache_store_stats_reset(cache->tiers[cache->num_tiers - 1]);
}
