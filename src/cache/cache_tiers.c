/* The cache handle's calls over all its tiers at once: remove and clear
 * (bottom up, so a concurrent get cannot copy an entry back into a tier
 * already emptied; cache.c says why), and the home tier's accounting. */
#include <stdint.h>

#include "error.h"
#include "cache/cache_handle.h"
#include "store/store_calls.h"

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
