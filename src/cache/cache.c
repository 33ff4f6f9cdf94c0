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
#include "cache/cache.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "options.h"
#include "cache/async_put.h"
#include "cache/flight.h"
#include "config.h"
#include "cache/cache_stats.h"
#include "store/store.h"

void progcache_options_init(progcache_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_OPTIONS_VERSION);
}

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

/* ---- arguments --------------------------------------------------------- */

/* The struct's size in each version, for progcache__options_load. */
static const size_t options_size[] = {0, offsetof(progcache_options, max_artifact_size),
                                      offsetof(progcache_options, remote_url),
                                      sizeof(progcache_options)};

/* Load the caller's options (NULL: defaults) into o and check them. */
static int load_options(progcache_options *o, const progcache_options *opts, const char *fn)
{
    progcache_options_init(o);
    int rc = progcache__options_load(o, opts, options_size, PROGCACHE_OPTIONS_VERSION, fn,
                                     "progcache_options");
    if (rc)
        return rc;
    if (o->low_water_percent > 100)
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: opts->low_water_percent is %u; use 1-100 (0: the default, 90)",
                                fn, o->low_water_percent);
    return PROGCACHE_OK;
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

static int check_tier(progcache_store *const *tiers, size_t i)
{
    char what[32];
    snprintf(what, sizeof what, "tiers[%zu]", i);
    int rc = progcache__store_check(tiers[i], "progcache_open_tiers", what);
    if (rc)
        return rc;
    for (size_t j = 0; j < i; j++)
        if (tiers[j] == tiers[i])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_open_tiers: tiers[%zu] and tiers[%zu] are the "
                                    "same store; a store can be one tier only",
                                    j, i);
    return PROGCACHE_OK;
}

/* ---- open and close ---------------------------------------------------- */

/* The home tier (see struct progcache): chosen by what the stores say they
 * are, so a tier of the caller's own takes any place a built-in one can. */
static size_t home_tier(progcache_store *const *tiers, size_t num_tiers)
{
    for (size_t i = num_tiers; i-- > 0;) {
        unsigned int f = progcache__store_flags(tiers[i]);
        if ((f & PROGCACHE_STORE_PERSISTENT) && !(f & PROGCACHE_STORE_SHARED))
            return i;
    }
    for (size_t i = num_tiers; i-- > 0;)
        if (!(progcache__store_flags(tiers[i]) & PROGCACHE_STORE_SHARED))
            return i;
    return 0;
}

progcache_store *progcache__cache_lease_tier(const progcache *cache)
{
    for (size_t i = cache->home + 1; i < cache->num_tiers; i++)
        if (progcache__store_lease_ops(cache->tiers[i]))
            return cache->tiers[i];
    return NULL;
}

static int new_handle(progcache **out, progcache_store *const *tiers, size_t num_tiers,
                      const char *path, const progcache_options *opts)
{
    /* A bound that was set and cannot be used fails the open, like every
     * other setting (docs/CONFIG.md). */
    unsigned int wait_ms = PROGCACHE__FLIGHT_WAIT_MS;
    int rc = progcache__config_wait_timeout(&wait_ms);
    if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND) {
        progcache__error_prefix("%s", path ? "progcache_open" : "progcache_open_tiers");
        return rc;
    }
    rc = PROGCACHE_ENOMEM;
    progcache *cache = progcache__calloc(1, sizeof *cache);
    if (!cache)
        goto done;
    cache->tiers = progcache__calloc(num_tiers, sizeof *cache->tiers);
    if (!cache->tiers)
        goto done;
    if (path && !(cache->path = progcache__strdup(path)))
        goto done;
    cache->remote_seen = progcache__calloc(num_tiers, sizeof *cache->remote_seen);
    if (!cache->remote_seen)
        goto done;
    memcpy(cache->tiers, tiers, num_tiers * sizeof *tiers);
    pthread_mutex_init(&cache->async_lock, NULL);
    cache->num_tiers = num_tiers;
    cache->home = home_tier(tiers, num_tiers);
    cache->wait_timeout_ms = wait_ms;
    if (opts) {
        cache->log = opts->log;
        cache->log_ctx = opts->log_ctx;
    }
    *out = cache;
    cache = NULL;
    rc = PROGCACHE_OK;

done:
    if (cache) {
        progcache__free(cache->remote_seen);
        progcache__free(cache->tiers);
        progcache__free(cache);
    }
    if (rc)
        progcache__error(rc, "opening the cache: out of memory");
    return rc;
}

int progcache_open_tiers(progcache **out, progcache_store *const *tiers, size_t num_tiers,
                         const progcache_options *opts)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_open_tiers: out is NULL");
    *out = NULL;
    progcache_options o;
    int rc = load_options(&o, opts, "progcache_open_tiers");
    if (rc)
        return rc;
    if (!tiers || num_tiers == 0)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_open_tiers: no tiers (tiers NULL or num_tiers 0); "
                                "pass at least one store");
    for (size_t i = 0; i < num_tiers; i++)
        if ((rc = check_tier(tiers, i)))
            return rc;
    return new_handle(out, tiers, num_tiers, NULL, &o);
}

int progcache_open(progcache **out, const char *path, const progcache_options *opts)
{
    progcache_buf dir = PROGCACHE_BUF_INIT;
    progcache_store *tiers[3] = {NULL, NULL, NULL};
    size_t num_tiers = 0;
    progcache_store *file = NULL;
    int rc;

    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_open: out is NULL");
    *out = NULL;
    progcache_options o;
    if ((rc = load_options(&o, opts, "progcache_open")))
        return rc;
    opts = &o;
    if (path && !*path)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_open: path is empty; pass a directory, or NULL for "
                                "the default directory (progcache_default_dir)");
    if (!path) {
        if ((rc = progcache_default_dir(&dir)))
            goto done;
        path = (const char *)dir.data;
    }

    /* The file store resolves the directory's settings (its settings file,
     * the environment, then these options: progcache/settings.h); the
     * other tiers take theirs from what it resolved. */
    progcache_file_options file_opts;
    progcache_file_options_init(&file_opts);
    file_opts.max_size = opts->max_size;
    file_opts.low_water_percent = opts->low_water_percent;
    file_opts.flags = opts->flags & ~PROGCACHE_NO_REMOTE;
    file_opts.log = opts->log;
    file_opts.log_ctx = opts->log_ctx;
    file_opts.max_artifact_size = opts->max_artifact_size;
    progcache_file *home = NULL;
    if ((rc = progcache_file_open(&home, path, &file_opts)))
        goto done;
    file = progcache_file_store(home);
    const progcache_settings *settings = progcache_file_settings(home);
    o.max_artifact_size = progcache_settings_find(settings, "max_artifact_size")->number;
    uint64_t memory_size = progcache_settings_find(settings, "memory_size")->number;
    if (opts->memory_size)
        memory_size = opts->memory_size == PROGCACHE_SIZE_NONE ? 0 : opts->memory_size;

    if (memory_size) {
        progcache_memory_options mem_opts;
        progcache_memory_options_init(&mem_opts);
        mem_opts.max_size = memory_size;
        mem_opts.max_artifact_size = o.max_artifact_size;
        if ((rc = progcache_store_memory_new(&tiers[num_tiers], &mem_opts)))
            goto done;
        num_tiers++;
    }
    tiers[num_tiers++] = file;
    file = NULL;
    if ((rc = progcache__cache_open_remote(
             &tiers[num_tiers], opts,
             progcache_settings_find(settings, "remote_min_rate")->number)))
        goto done;
    if (tiers[num_tiers])
        num_tiers++;
    rc = new_handle(out, tiers, num_tiers, path, opts);
    if (!rc) {
        (*out)->foreign = progcache__store_foreign((*out)->tiers[(*out)->home]);
        (*out)->read_only = (opts->flags & PROGCACHE_FILE_READONLY) != 0 || (*out)->foreign;
    }

done:
    if (rc) {
        for (size_t i = 0; i < num_tiers; i++)
            progcache_store_free(tiers[i]);
    }
    progcache_store_free(file);
    progcache_buf_free(&dir);
    return rc;
}

void progcache_close(progcache *cache)
{
    if (!cache)
        return;
    /* Queued background puts go to the tiers, so they finish first. */
    progcache__cache_async_close(cache);
    /* Then the remote tiers' own queues, so that their counts are final. */
    for (size_t i = cache->home + 1; i < cache->num_tiers; i++)
        (void)progcache_store_flush(cache->tiers[i]);
    progcache__cache_fold_remote(cache);
    if (cache->ext_free)
        cache->ext_free(cache->ext);
    pthread_mutex_destroy(&cache->async_lock);
    for (size_t i = 0; i < cache->num_tiers; i++)
        progcache_store_free(cache->tiers[i]);
    progcache__free(cache->remote_seen);
    progcache__free(cache->tiers);
    progcache__free(cache->path);
    progcache__free(cache);
}

const char *progcache_path(const progcache *cache) { return cache ? cache->path : NULL; }

void *progcache__cache_ext(progcache *cache, void *(*make)(void *arg), void *arg,
                           void (*destroy)(void *state))
{
    if (!cache)
        return NULL;
    pthread_mutex_lock(&cache->async_lock);
    if (!cache->ext && (cache->ext = make(arg)) != NULL)
        cache->ext_free = destroy;
    void *ext = cache->ext;
    pthread_mutex_unlock(&cache->async_lock);
    return ext;
}

/* ---- get and put ------------------------------------------------------- */

/* Write a copy into an upper tier. A failure is logged, not returned: the
 * tier below holds the entry. The key is then dropped from that tier, since
 * a store whose put failed may still hold an older value. */
static void put_upper(progcache *cache, size_t i, const void *key, size_t key_len,
                      const void *data, size_t size, const progcache_entry_meta *meta)
{
    progcache_store *t = cache->tiers[i];
    if (i == cache->home && cache->foreign) {
        /* Another user's directory: said once at open, counted here. */
        progcache__cache_record(cache, PROGCACHE_STAT_FOREIGN_NOT_STORED, 1);
        return;
    }
    int rc = progcache__store_put_meta(t, key, key_len, data, size, meta);
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
static int lookup(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                  const void *key, size_t key_len, size_t num_tiers)
{
    int rc = progcache__cache_check_key(cache, key, key_len, "progcache_get");
    if (rc)
        return rc;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_get: out is NULL");

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
        rc = progcache__store_get_meta(out, meta, t, key, key_len);
        if (rc == PROGCACHE_OK) {
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
        if (progcache__store_put_meta(below, key, key_len, data, size, meta) != PROGCACHE_OK)
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
