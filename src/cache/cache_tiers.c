/* The cache handle's calls over all its tiers at once: remove and clear
 * (bottom up, so a concurrent get cannot copy an entry back into a tier
 * already emptied; cache.c says why), the home tier's accounting, and the
 * back-off of a tier that fails (cache.h). */
#include <stdint.h>

#include "error.h"
#include "cache/cache_handle.h"
#include "cache/cache_stats.h"
#include "remote/remote_health.h"
#include "store/store_calls.h"

/* ---- a failing tier: the cache's back-off -------------------------------- */

/* Any tier (a remote one, a memory tier, a program's own store through
 * progcache_open_tiers) may fail call after call: a server gone, a disk
 * full. Without a back-off, each lookup pays that tier's failure (its
 * timeout, for a remote one) and each failure is a warning. The remote
 * tiers back off inside themselves too; this is the cache's own, for
 * every tier but the home one, with the remote tiers' rules. */
static const char *tier_name(const progcache_store *store)
{
    return store->name ? store->name : "unnamed";
}

PROGCACHE_HOT
int progcache__tier_off(progcache *cache, size_t i)
{
    if (i == cache->home ||
        !progcache__remote_is_off(&cache->health[i], progcache__remote_now_ms()))
        return 0;
    progcache__cache_record(cache, PROGCACHE_STAT_TIER_SKIPPED, 1);
    return 1;
}

PROGCACHE_HOT
void progcache__tier_result(progcache *cache, size_t i, int rc)
{
    if (i == cache->home)
        return;
    progcache__remote_health *h = &cache->health[i];
    if (rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND) {
        if (progcache__remote_ok(h))
            progcache__cache_log(cache, PROGCACHE_LOG_INFO,
                                 "the %s tier answers again; back in use",
                                 tier_name(cache->tiers[i]));
        return;
    }
    unsigned int n = progcache__remote_failed(h, 0, 0, progcache__remote_now_ms());
    if (!n)
        return;
    progcache__cache_record(cache, PROGCACHE_STAT_TIER_BACKOFFS, 1);
    if (progcache__remote_first(h, PROGCACHE__CAUSE_BACKOFF))
        progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                             "the %s tier failed %u times in a row: not used for %u ms (its "
                             "gets miss, copies into it are not written), then tried again "
                             "(told once until it answers again; counted in progcache stats: "
                             "tier_backoffs, tier_skipped)",
                             tier_name(cache->tiers[i]), n, PROGCACHE__TIER_BACKOFF_MS);
}

int progcache_remove(progcache *cache, const void *key, size_t key_len)
{
    int rc = progcache__cache_check_key(cache, key, key_len, "progcache_remove");
    if (rc)
        return rc;
    int found = 0, failed = PROGCACHE_OK;
    for (size_t i = cache->num_tiers; i-- > 0;) {
        progcache_store *t = cache->tiers[i];
        rc = progcache__store_remove(t, key, key_len);
        if (rc == PROGCACHE_OK)
            found = 1;
        else if (rc != PROGCACHE_ENOTFOUND)
            failed = rc;
    }
    if (failed)
        return failed;
    return found ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}

int progcache_clear(progcache *cache)
{
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_clear: cache is NULL");
    int failed = PROGCACHE_OK;
    for (size_t i = cache->num_tiers; i-- > 0;) {
        progcache_store *t = cache->tiers[i];
        int rc = progcache__store_clear(t);
        if (rc)
            failed = rc;
    }
    return failed;
}

int progcache_count(uint64_t *out, progcache *cache)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_count: out is NULL");
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_count: cache is NULL");
    progcache_store *t = cache->tiers[cache->home];
    return progcache__store_count(out, t);
}

int progcache_total_size(uint64_t *out, progcache *cache)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_total_size: out is NULL");
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "progcache_total_size: cache is NULL");
    progcache_store *t = cache->tiers[cache->home];
    return progcache__store_total_size(out, t);
}
