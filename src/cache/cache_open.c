/* The composition: a handle over its tiers (progcache_open_tiers), the
 * tiers progcache_open stacks (a memory tier, the home directory, and the
 * remote tiers cache_remote.c opens) and closing a handle. No other file
 * of src/cache/ makes a tier. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "buf.h"
#include "cache/cache_handle.h"
#include "cache/async_put.h"
#include "cache/cache_stats.h"
#include "config.h"
#include "error.h"
#include "options.h"
#include "progcache/remote.h"
#include "remote/remote_file.h"
#include "remote/remote_health.h"
#include "settings_table.h"
#include "dir/dir.h"
#include "store/store_calls.h"

/* ---- the handle ---------------------------------------------------------- */

void progcache_options_init(progcache_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_OPTIONS_VERSION);
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
    /* PROGCACHE_READONLY: a lease would make other machines wait for a
     * put that never comes. */
    if (cache->no_writes)
        return NULL;
    for (size_t i = cache->home + 1; i < cache->num_tiers; i++)
        if (progcache__store_lease_ops(cache->tiers[i]))
            return cache->tiers[i];
    return NULL;
}

static int new_handle(progcache **out, progcache_store *const *tiers, size_t num_tiers,
                      const char *path, const progcache_options *opts)
{
    /* A bound that was set and cannot be used is said and ignored, as
     * every malformed variable is (docs/CONFIG.md). */
    unsigned int wait_ms = PROGCACHE__FLIGHT_WAIT_MS;
    int bad_wait = progcache__config_wait_timeout(&wait_ms) == PROGCACHE_EINVAL;
    int rc = PROGCACHE_ENOMEM;
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
    cache->health = progcache__calloc(num_tiers, sizeof *cache->health);
    if (!cache->health)
        goto done;
    for (size_t i = 0; i < num_tiers; i++)
        progcache__remote_health_init(&cache->health[i], PROGCACHE__TIER_FAILURES,
                                      PROGCACHE__TIER_BACKOFF_MS);
    memcpy(cache->tiers, tiers, num_tiers * sizeof *tiers);
    pthread_mutex_init(&cache->async_lock, NULL);
    cache->num_tiers = num_tiers;
    cache->home = home_tier(tiers, num_tiers);
    cache->wait_timeout_ms = wait_ms;
    if (opts) {
        cache->log = opts->log;
        cache->log_ctx = opts->log_ctx;
    }
    if (bad_wait) {
        uint64_t ms;
        const char *value = "", *why = "";
        progcache__config_setting(&ms, &value, &why, PROGCACHE__SET_WAIT_TIMEOUT);
        progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                             "PROGCACHE_WAIT_TIMEOUT=\"%.64s\": %s; ignored (wait_timeout stays "
                             "%us, from default)",
                             value, why, PROGCACHE__FLIGHT_WAIT_MS / 1000);
    }
    *out = cache;
    cache = NULL;
    rc = PROGCACHE_OK;

done:
    if (cache) {
        progcache__free(cache->remote_seen);
        progcache__free(cache->health);
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

/* i35: a switch of ccache's (PROGCACHE_DISABLE, _READONLY, _RECACHE:
 * docs/OPERATIONS.md), read before anything under the directory is
 * touched. A value that is not a yes or no fails the open, as every other
 * setting's (docs/CONFIG.md). */
static int read_switch(int *on, int idx)
{
    uint64_t n = 0;
    const char *value = NULL, *why = "";
    int rc = progcache__config_setting(&n, &value, &why, idx);
    *on = rc == PROGCACHE_OK && n;
    if (rc == PROGCACHE_EINVAL)
        return progcache__error(PROGCACHE_EINVAL, "progcache_open: %s=\"%.64s\": %s",
                                progcache__settings_variable(idx), value, why);
    return PROGCACHE_OK;
}

/* PROGCACHE_DISABLE: a handle over an unused memory tier, with no path
 * (as progcache_open_tiers makes): no directory, lock, PCH or remote tier
 * is opened, and every lookup misses before reaching a tier. */
static int open_disabled(progcache **out, const progcache_options *opts, const char *why)
{
    progcache_store *tier = NULL;
    progcache_memory_options mem_opts;
    progcache_memory_options_init(&mem_opts);
    int rc = progcache_store_memory_new(&tier, &mem_opts);
    if (!rc && (rc = new_handle(out, &tier, 1, NULL, opts)))
        progcache_store_free(tier);
    if (rc)
        return rc;
    (*out)->disabled = 1;
    (*out)->read_only = 1;
    progcache__cache_log(*out, PROGCACHE_LOG_WARN, "%s", why);
    return PROGCACHE_OK;
}

int progcache_open(progcache **out, const char *path, const progcache_options *opts)
{
    progcache_buf dir = PROGCACHE_BUF_INIT;
    progcache_store *tiers[2 + PROGCACHE__REMOTE_MAX] = {NULL};
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
    int disable = 0, readonly = 0, recache = 0;
    if ((rc = read_switch(&disable, PROGCACHE__SET_DISABLE)) ||
        (rc = read_switch(&readonly, PROGCACHE__SET_READONLY)) ||
        (rc = read_switch(&recache, PROGCACHE__SET_RECACHE)))
        return rc;
    if (disable)
        return open_disabled(out, opts,
                             "PROGCACHE_DISABLE is set: no cache; every compile runs, and "
                             "nothing is read from or written to the cache");
    if (!path) {
        if ((rc = progcache_default_dir(&dir)))
            goto done;
        path = (const char *)dir.data;
    }
    /* PROGCACHE_READONLY and no directory yet: nothing to read, and
     * nothing may be made; every lookup misses (ccache's read_only does
     * the same). */
    struct stat st;
    if (readonly && stat(path, &st) != 0 && errno == ENOENT) {
        rc = open_disabled(out, opts,
                           "PROGCACHE_READONLY is set and the cache directory does not exist: "
                           "every compile runs and nothing is stored");
        goto done;
    }

    /* The file store resolves the directory's settings (its settings file,
     * the environment, then these options: progcache/settings.h); the
     * other tiers take theirs from what it resolved. */
    progcache_file_options file_opts;
    progcache_file_options_init(&file_opts);
    file_opts.max_size = opts->max_size;
    file_opts.low_water_percent = opts->low_water_percent;
    file_opts.flags = opts->flags & ~PROGCACHE_NO_REMOTE;
    if (readonly)
        file_opts.flags |= PROGCACHE_FILE_READONLY;
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
    size_t num_remote = 0;
    const progcache_setting *ca = progcache_settings_find(settings, "remote_ca");
    char ca_label[512];
    snprintf(ca_label, sizeof ca_label, "remote_ca (%s)", ca->origin);
    progcache__remote_conf conf = {progcache_settings_find(settings, "remote_min_rate")->number,
                                   ca->value && *ca->value ? ca->value : NULL,
                                   !strcmp(ca->origin, "PROGCACHE_REMOTE_CA")
                                       ? "PROGCACHE_REMOTE_CA" : ca_label};
    unsigned long refused = progcache__remote_files_refused();
    if ((rc = progcache__cache_open_remote(&tiers[num_tiers], &num_remote, opts, &conf))) {
        /* A credentials or CA file refused fails the open; the directory
         * that was to be used counts it (remote_files_refused). */
        refused = progcache__remote_files_refused() - refused;
        if (refused)
            progcache__store_record(tiers[num_tiers - 1], PROGCACHE_STAT_REMOTE_FILES_REFUSED,
                                    refused);
        goto done;
    }
    num_tiers += num_remote;
    rc = new_handle(out, tiers, num_tiers, path, opts);
    if (!rc) {
        (*out)->foreign = progcache__store_foreign((*out)->tiers[(*out)->home]);
        (*out)->read_only = (opts->flags & PROGCACHE_FILE_READONLY) != 0 || (*out)->foreign;
        (*out)->no_writes = readonly;
        (*out)->read_only |= readonly;
        (*out)->recache = recache;
        if (readonly)
            progcache__cache_log(*out, PROGCACHE_LOG_WARN,
                                 "PROGCACHE_READONLY is set: %s is read, never written; "
                                 "compiles are not stored",
                                 path);
        if (recache)
            progcache__cache_log(*out, PROGCACHE_LOG_WARN,
                                 "PROGCACHE_RECACHE is set: %s is never read; every compile "
                                 "runs and is stored over its entry",
                                 path);
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
    for (size_t i = 0; i < PROGCACHE__CACHE_SLOTS; i++)
        if (cache->slots[i].name && cache->slots[i].destroy)
            cache->slots[i].destroy(cache->slots[i].data);
    pthread_mutex_destroy(&cache->async_lock);
    for (size_t i = 0; i < cache->num_tiers; i++)
        progcache_store_free(cache->tiers[i]);
    progcache__free(cache->remote_seen);
    progcache__free(cache->health);
    progcache__free(cache->tiers);
    progcache__free(cache->path);
    progcache__free(cache);
}

