/* The cache handle: tiers of stores, top (fastest) first:
 *
 *     memory tier  ->  home directory  ->  remote tiers
 *
 * The home tier is the cache's own record and the source of truth for this
 * machine; the tiers above it only ever hold copies of what it held, and
 * the remote tiers below it are shared with other machines. Hence the
 * orders below:
 *  - get walks top down and copies a hit into every tier above it (a
 *    remote hit lands in the home tier too);
 *  - put writes the home tier first, then the remote tiers (which queue
 *    and never fail a put), and only after the home tier took it the tiers
 *    above (when it failed, the key is dropped from them instead, so no
 *    tier serves a value the home tier does not have);
 *  - remove and clear go bottom up, so a concurrent get cannot copy an
 *    entry back into a tier that was already emptied from a tier below
 *    that still had it.
 * A failure in a tier never fails a call that the tiers below could
 * answer: it is logged and the call goes on. Which tier is which comes
 * from the stores' flags (home_tier), never from their names or types. */
#include "cache/cache_handle.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "error.h"
#include "options.h"
#include "cache/async_put.h"
#include "cache/flight.h"
#include "cache/cache_stats.h"
#include "store/store_calls.h"

void progcache__cache_log(const progcache *cache, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(cache->log, cache->log_ctx, level, fmt, ap);
    va_end(ap);
}

static const char *tier_name(const progcache_store *store)
{
    return store->name ? store->name : "unnamed";
}

int progcache__cache_check_key(const progcache *cache, const void *key, size_t key_len,
                               const char *fn)
{
    if (!cache)
        return progcache__error(PROGCACHE_EINVAL, "%s: cache is NULL; open one with progcache_open",
                                fn);
    if (!key || key_len == 0)
        return progcache__error(PROGCACHE_EINVAL, "%s: the key is empty (key NULL or key_len 0)",
                                fn);
    return PROGCACHE_OK;
}

const char *progcache_path(const progcache *cache) { return cache ? cache->path : NULL; }

void *progcache__cache_data(progcache *cache, const char *name, void *(*make)(void *arg),
                            void *arg, void (*destroy)(void *state))
{
    if (!cache || !name)
        return NULL;
    void *data = NULL;
    pthread_mutex_lock(&cache->async_lock);
    struct progcache__cache_slot *free_slot = NULL;
    for (size_t i = 0; i < PROGCACHE__CACHE_SLOTS; i++) {
        struct progcache__cache_slot *slot = &cache->slots[i];
        if (slot->name && !strcmp(slot->name, name)) {
            data = slot->data;
            goto done;
        }
        if (!slot->name && !free_slot)
            free_slot = slot;
    }
    if (free_slot && (data = make(arg)) != NULL)
        *free_slot = (struct progcache__cache_slot){name, data, destroy};
done:
    pthread_mutex_unlock(&cache->async_lock);
    return data;
}

/* ---- get and put ------------------------------------------------------- */

/* Write a copy into an upper tier. A failure is logged, not returned: the
 * tier below holds the entry. The key is then dropped from that tier, since
 * a store whose put failed may still hold an older value. */
static void put_upper(progcache *cache, size_t i, const void *key, size_t key_len,
                      const void *data, size_t size, const progcache_entry_meta *meta)
{
    progcache_store *t = cache->tiers[i];
    if (i == cache->home && cache->no_writes)
        return; /* PROGCACHE_READONLY: said once at open */
    if (i == cache->home && cache->foreign) {
        /* Another user's directory: said once at open, counted here. */
        progcache__cache_record(cache, PROGCACHE_STAT_FOREIGN_NOT_STORED, 1);
        return;
    }
    if (progcache__tier_off(cache, i))
        return;
    int rc = progcache__store_put_meta(t, key, key_len, data, size, meta);
    progcache__tier_result(cache, i, rc);
    if (rc == PROGCACHE_OK)
        return;
    progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                         "could not copy an entry of %zu bytes into the %s tier: %s", size,
                         tier_name(t), progcache_error_last());
    progcache__store_remove(t, key, key_len);
}

PROGCACHE_HOT
void progcache__cache_record(progcache *cache, progcache_stat stat, uint64_t n)
{
    if (cache)
        progcache__store_record(cache->tiers[cache->home], stat, n);
}

/* The lookup through the tiers, top down. With meta, each tier is asked for
 * the entry's metadata too (what the tier checked: its seal state; the
 * records kept with it), and a hit is copied into the tiers above with it. */
PROGCACHE_HOT
static int lookup_tiers(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                        const void *key, size_t key_len, size_t num_tiers, size_t *hit)
{
    int rc = progcache__cache_check_key(cache, key, key_len, "progcache_get");
    if (rc)
        return rc;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_get: out is NULL");
    /* PROGCACHE_DISABLE and PROGCACHE_RECACHE: no tier is read. */
    if (cache->disabled || cache->recache)
        return PROGCACHE_ENOTFOUND;

    /* The metadata travels with a hit copied into the tiers above, so the
     * records a remote tier kept (lowered names, ...) reach the home tier
     * even when the caller did not ask for them. */
    progcache_entry_meta own = PROGCACHE_ENTRY_META_INIT;
    if (!meta)
        meta = &own;

    /* A tier that fails does not hide the tiers below it. When none of them
     * hits, the last failure's code is returned with that failure's own
     * message, kept whole: a tier below that misses may have set the
     * thread's message meanwhile, and it must not be reported under the
     * failing tier's code. A remote tier's failure is never the caller's:
     * logged, counted, and a miss. */
    int failed = PROGCACHE_OK;
    progcache__error_saved why;
    for (size_t i = 0; i < num_tiers; i++) {
        progcache_store *t = cache->tiers[i];
        if (progcache__tier_off(cache, i))
            continue; /* a miss there */
        rc = progcache__store_get_meta(out, meta, t, key, key_len);
        progcache__tier_result(cache, i, rc);
        if (rc == PROGCACHE_OK) {
            *hit = i;
            if (failed)
                progcache__error_discard(&why);
            for (size_t j = i; j-- > 0;)
                put_upper(cache, j, key, key_len, out->data, out->size, meta);
            progcache_entry_meta_release(&own);
            return PROGCACHE_OK;
        }
        if (rc != PROGCACHE_ENOTFOUND && i > cache->home) {
            progcache__cache_record(cache, PROGCACHE_STAT_REMOTE_ERRORS, 1);
            progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                                 "get from the remote %s tier failed; taken as a miss: %s",
                                 tier_name(t), progcache_error_last());
        } else if (rc != PROGCACHE_ENOTFOUND) {
            if (failed)
                progcache__error_discard(&why);
            failed = rc;
            progcache__error_save(&why);
            if (i + 1 < num_tiers)
                progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                                     "get from the %s tier failed, trying the tier below: %s",
                                     tier_name(t), progcache_error_last());
        }
    }
    progcache_entry_meta_release(&own);
    if (!failed)
        return PROGCACHE_ENOTFOUND;
    progcache__error_restore(&why);
    return failed;
}

/* PROGCACHE_LOG=debug: every lookup, its key, the tier that answered and
 * the time it took (docs/OPERATIONS.md). Off, it costs one test. */
PROGCACHE_HOT
static int lookup(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                  const void *key, size_t key_len, size_t num_tiers)
{
    size_t hit = 0;
    if (!progcache__log_trace())
        return lookup_tiers(out, meta, cache, key, key_len, num_tiers, &hit);
    double t0 = progcache__clock_ms();
    int rc = lookup_tiers(out, meta, cache, key, key_len, num_tiers, &hit);
    double ms = progcache__clock_ms() - t0;
    if (!cache || !key)
        return rc;
    char hex[33];
    size_t n = key_len < 16 ? key_len : 16;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", ((const unsigned char *)key)[i]);
    hex[2 * n] = '\0';
    if (rc == PROGCACHE_OK)
        progcache__cache_log(cache, PROGCACHE_LOG_DEBUG, "lookup %s...: HIT in the %s tier "
                             "(%zu bytes, %.3f ms)", hex, tier_name(cache->tiers[hit]),
                             out->size, ms);
    else
        progcache__cache_log(cache, PROGCACHE_LOG_DEBUG, "lookup %s...: %s (%zu tiers, %.3f ms)",
                             hex, rc == PROGCACHE_ENOTFOUND ? "MISS" : progcache_strerror(rc),
                             num_tiers, ms);
    return rc;
}

PROGCACHE_HOT
int progcache__cache_get_meta(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                              const void *key, size_t key_len)
{
    int rc = lookup(out, meta, cache, key, key_len, cache ? cache->num_tiers : 0);
    if (rc == PROGCACHE_OK)
        progcache__cache_record(cache, PROGCACHE_STAT_HITS, 1);
    else if (rc == PROGCACHE_ENOTFOUND)
        progcache__cache_record(cache, PROGCACHE_STAT_MISSES, 1);
    else if (cache && key && key_len && out)
        progcache__cache_record(cache, PROGCACHE_STAT_LOOKUP_ERRORS, 1);
    return rc;
}

int progcache_get(progcache_buf *out, progcache *cache, const void *key, size_t key_len)
{
    return progcache__cache_get_meta(out, NULL, cache, key, key_len);
}

int progcache__cache_get_quiet(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                               const void *key, size_t key_len)
{
    return lookup(out, meta, cache, key, key_len, cache ? cache->num_tiers : 0);
}

int progcache__cache_get_local(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                               const void *key, size_t key_len)
{
    return lookup(out, meta, cache, key, key_len, cache ? cache->home + 1 : 0);
}

int progcache__cache_read_only(const progcache *cache) { return cache && cache->read_only; }

int progcache__cache_foreign(const progcache *cache) { return cache && cache->foreign; }

int progcache__cache_writes_off(const progcache *cache)
{
    return cache && (cache->disabled || cache->no_writes);
}

progcache_store *progcache__cache_home(const progcache *cache)
{
    return cache && cache->home < cache->num_tiers ? cache->tiers[cache->home] : NULL;
}

const char *progcache__cache_path(const progcache *cache) { return cache ? cache->path : NULL; }

void progcache__cache_log_of(const progcache *cache, progcache_log_fn *log, void **log_ctx)
{
    *log = cache ? cache->log : NULL;
    *log_ctx = cache ? cache->log_ctx : NULL;
}

unsigned int progcache__cache_wait_timeout(const progcache *cache)
{
    return cache ? cache->wait_timeout_ms : PROGCACHE__FLIGHT_WAIT_MS;
}

int progcache__cache_holds(progcache *cache, const void *key, size_t key_len)
{
    progcache_store *t = cache->tiers[cache->home];
    progcache__error_saved saved;
    progcache__error_save(&saved);
    int rc = progcache__store_exists(t, key, key_len);
    progcache__error_restore(&saved);
    return rc == PROGCACHE_OK;
}

/* After the home tier refused a put: drop key from the tiers above it, so
 * none of them keeps serving the value the put meant to replace. The home
 * tier's message is what the caller needs, so it survives a failed drop. */
static void drop_from_upper(progcache *cache, const void *key, size_t key_len)
{
    if (cache->home == 0)
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    for (size_t i = 0; i < cache->home; i++) {
        progcache_store *t = cache->tiers[i];
        int rc = progcache__store_remove(t, key, key_len);
        if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND)
            progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                                 "could not drop a stale entry from the %s tier: %s",
                                 tier_name(t), progcache_error_last());
    }
    progcache__error_restore(&saved);
}

int progcache__cache_put_meta(progcache *cache, const void *key, size_t key_len,
                              const void *data, size_t size, const progcache_entry_meta *meta)
{
    int rc = progcache__cache_check_key(cache, key, key_len, "progcache_put");
    if (rc)
        return rc;
    if (!data && size)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_put: data is NULL but size is %zu", size);
    /* PROGCACHE_DISABLE and PROGCACHE_READONLY: nothing is written to any
     * tier; not a failure (the switch was asked for, and said at open). */
    if (cache->disabled || cache->no_writes)
        return PROGCACHE_OK;

    progcache_store *t = cache->tiers[cache->home];
    rc = progcache__store_put_meta(t, key, key_len, data, size, meta);
    if (rc) {
        progcache__cache_record(cache, PROGCACHE_STAT_STORE_ERRORS, 1);
        drop_from_upper(cache, key, key_len);
        return rc;
    }
    progcache__cache_record(cache, PROGCACHE_STAT_STORES, 1);
    /* Remote tiers below queue the write and never fail a put. */
    for (size_t i = cache->home + 1; i < cache->num_tiers; i++) {
        progcache_store *below = cache->tiers[i];
        if (progcache__tier_off(cache, i))
            continue;
        rc = progcache__store_put_meta(below, key, key_len, data, size, meta);
        progcache__tier_result(cache, i, rc);
        if (rc != PROGCACHE_OK)
            progcache__cache_log(cache, PROGCACHE_LOG_WARN, "put to the %s tier failed: %s",
                                 tier_name(below), progcache_error_last());
    }
    for (size_t i = cache->home; i-- > 0;)
        put_upper(cache, i, key, key_len, data, size, meta);
    return PROGCACHE_OK;
}

int progcache_put(progcache *cache, const void *key, size_t key_len, const void *data,
                  size_t size)
{
    return progcache__cache_put_meta(cache, key, key_len, data, size, NULL);
}
