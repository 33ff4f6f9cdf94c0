/* Internal: the cache handle, shared by the files of the cache layer.
 *
 * After progcache_open returns, the tiers and path never change until
 * progcache_close: every mutable thing lives in the stores, which lock for
 * themselves, or in the background-put state, which has its own mutex.
 * That is what makes one handle safe for many threads. */
#ifndef PROGCACHE_CACHE_CACHE_H
#define PROGCACHE_CACHE_CACHE_H

#include <pthread.h>

#include "error.h" /* PROGCACHE_PRINTF */
#include "progcache/cache.h"
#include "progcache/stats.h"

/* The remote tiers' counters that are added into the home tier's
 * statistics (cache_stats.c). */
#define PROGCACHE__REMOTE_FOLDED 14

/* Named states of layers above a handle can keep (progcache__cache_data). */
#define PROGCACHE__CACHE_SLOTS 4

/* The tiers, top (fastest) first: memory tier -> home -> remote tiers.
 * Which is which comes from each store's flags (progcache/sys/store.h),
 * never from its name or type. */
struct progcache {
    progcache_store **tiers; /* top (fastest) first */
    size_t num_tiers;
    /* The home tier, the cache's own record: the last tier that is
     * PERSISTENT and not SHARED (a cache directory), else the last that is
     * not SHARED, else the top one. Puts write it first; counts, sizes and
     * statistics come from it. Tiers above it hold copies; tiers below it
     * are remote tiers: written after it, never allowed to fail a call. */
    size_t home;
    char *path; /* the cache directory, or NULL (progcache_open_tiers) */
    /* progcache_open with PROGCACHE_FILE_READONLY: nothing may be written
     * under path, by the stores or by a layer above (the PCH tier). */
    int read_only;
    /* The home tier is another user's cache directory (file_perm.c): it is
     * read, never written; compile-or-load does not store there, and
     * counts it (PROGCACHE_STAT_FOREIGN_NOT_STORED). read_only is set too. */
    int foreign;
    /* i35: ccache's switches (docs/OPERATIONS.md, "Kill switches"), from
     * the environment at open. disabled: PROGCACHE_DISABLE, no directory
     * or remote tier opened, every lookup a miss, every put dropped.
     * no_writes: PROGCACHE_READONLY, the directory opened read-only,
     * puts dropped without a word (said once at open), no leases taken.
     * recache: PROGCACHE_RECACHE, every lookup a miss, puts as usual. */
    int disabled;
    int no_writes;
    int recache;

    progcache_log_fn log; /* optional */
    void *log_ctx;
    /* The bound on waiting for another compile when the program sets none:
     * $PROGCACHE_WAIT_TIMEOUT, else PROGCACHE__FLIGHT_WAIT_MS. */
    unsigned int wait_timeout_ms;

    pthread_mutex_t async_lock;     /* guards async and remote_seen */
    struct progcache__async *async; /* background puts (async_put.c), or NULL */
    /* Each tier's own counters (progcache_store_counters: hits, misses,
     * errors, stores, rejected, and their parts) as last added to the home
     * tier's statistics; cache_stats.c folds in the difference for the
     * remote tiers. num_tiers rows. */
    uint64_t (*remote_seen)[PROGCACHE__REMOTE_FOLDED];
    /* The cache's back-off of each tier but the home one (cache_tiers.c):
     * a tier whose calls fail PROGCACHE__TIER_FAILURES times in a row is
     * skipped for PROGCACHE__TIER_BACKOFF_MS, counted and said once, so a
     * dead tier costs no call its timeout. num_tiers rows. */
    struct progcache__remote_health *health;
    /* Set (atomically, once) when the single-flight lock file was found
     * unusable and the log was told: the one field written outside the
     * stores and the background-put state, and only ever from 0 to 1. */
    int flight_warned;
    /* State the layers above keep with the handle, each under its name
     * (progcache__cache_data in cache_stats.h; the PCH tier's is "pch"):
     * made at its first use, under async_lock, freed by progcache_close. */
    struct progcache__cache_slot {
        const char *name; /* NULL: free */
        void *data;
        void (*destroy)(void *data);
    } slots[PROGCACHE__CACHE_SLOTS];
};

/* The first remote tier that offers leases (cross-node single-flight), or
 * NULL. */
progcache_store *progcache__cache_lease_tier(const progcache *cache);

/* The arguments every keyed call checks: PROGCACHE_OK, or PROGCACHE_EINVAL
 * naming fn (a NULL cache, an empty key). */
int progcache__cache_check_key(const progcache *cache, const void *key, size_t key_len,
                               const char *fn);

/* The cache's back-off of a failing tier (cache_tiers.c; the rules are
 * remote/remote_health.h's). The home tier is never skipped: its
 * failures are the caller's. */
#define PROGCACHE__TIER_FAILURES 3
#define PROGCACHE__TIER_BACKOFF_MS 5000u
/* 1 (counted as skipped) while tier i is backed off. */
int progcache__tier_off(progcache *cache, size_t i);
/* What a call to tier i returned: a success or a miss re-arms it (and says
 * so after an outage); anything else is one more failure in a row. */
void progcache__tier_result(progcache *cache, size_t i, int rc);

/* The remote tiers progcache_open stacks below the home directory
 * (cache_remote.c): opts->remote, opts->remote_url or $PROGCACHE_REMOTE (an
 * ordered, space-separated list of at most PROGCACHE__REMOTE_MAX URLs,
 * fastest first), into out[0..*n); *n 0 when none is asked for. opts is
 * loaded and its max_artifact_size resolved. */
#define PROGCACHE__REMOTE_MAX 4
/* The directory's settings every remote tier it opens takes: min_rate
 * (remote_min_rate; 0: the tier's default) and ca_file (remote_ca: the
 * HTTPS tiers' CA file; NULL: $PROGCACHE_REMOTE_CA, else the system's). */
typedef struct progcache__remote_conf {
    uint64_t min_rate;
    const char *ca_file;
    const char *ca_label; /* how messages name ca_file's setting */
} progcache__remote_conf;
int progcache__cache_open_remote(progcache_store **out, size_t *n,
                                 const progcache_options *opts,
                                 const progcache__remote_conf *conf);

#endif
