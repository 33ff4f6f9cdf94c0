/* progcache_stats_get / progcache_stats_reset on a cache handle: the
 * counters live with the home tier (for a cache directory, progcache/stats,
 * shared by every process), behind the store's statistics ops; the remote
 * tiers' own per-process counts are folded into them. */
#include "cache/cache_stats.h"

#include <stddef.h>
#include <string.h>

#include "cache/cache_handle.h"
#include "error.h"
#include "store/store_calls.h"

/* Each field of progcache_store_counters that is folded, and the statistic
 * it adds to. */
#define FOLD(field, stat) {offsetof(progcache_store_counters, field), stat}
static const struct {
    size_t offset;
    progcache_stat stat;
} folded[PROGCACHE__REMOTE_FOLDED] = {
    FOLD(hits, PROGCACHE_STAT_REMOTE_HITS),
    FOLD(misses, PROGCACHE_STAT_REMOTE_MISSES),
    FOLD(errors, PROGCACHE_STAT_REMOTE_ERRORS),
    FOLD(stores, PROGCACHE_STAT_REMOTE_STORES),
    FOLD(rejected, PROGCACHE_STAT_REMOTE_REJECTED),
    FOLD(timeouts, PROGCACHE_STAT_REMOTE_TIMEOUTS),
    FOLD(backoffs, PROGCACHE_STAT_REMOTE_BACKOFFS),
    FOLD(store_errors, PROGCACHE_STAT_REMOTE_STORE_ERRORS),
    FOLD(dropped, PROGCACHE_STAT_REMOTE_DROPPED),
    FOLD(newer, PROGCACHE_STAT_REMOTE_NEWER),
    FOLD(too_large, PROGCACHE_STAT_REMOTE_TOO_LARGE),
    FOLD(bad_tag, PROGCACHE_STAT_REMOTE_BAD_TAG),
    FOLD(over_bound, PROGCACHE_STAT_REMOTE_OVER_BOUND),
    FOLD(deadlines, PROGCACHE_STAT_REMOTE_DEADLINES),
};
#undef FOLD

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
        uint64_t delta[PROGCACHE__REMOTE_FOLDED];
        pthread_mutex_lock(&cache->async_lock);
        for (size_t i = 0; i < PROGCACHE__REMOTE_FOLDED; i++) {
            uint64_t now;
            memcpy(&now, (const char *)&c + folded[i].offset, sizeof now);
            delta[i] = now - cache->remote_seen[t][i];
            cache->remote_seen[t][i] = now;
        }
        pthread_mutex_unlock(&cache->async_lock);
        for (size_t i = 0; i < PROGCACHE__REMOTE_FOLDED; i++)
            if (delta[i])
                progcache__cache_record(cache, folded[i].stat, delta[i]);
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
