/*
 * progcache/sys/store.h - writing a store of your own.
 *
 * A store is a struct of function pointers (a vtable) that progcache calls;
 * progcache/store.h has the calls a user makes on any store. A backend
 * fills a progcache_store (usually as the first member of its own struct),
 * and hands it to progcache_open_tiers() as one tier of a cache, or uses
 * it on its own. examples/tier_dir.c is a whole backend in one file.
 *
 * Like libgit2's sys/ headers, this one may change between minor versions,
 * unlike the rest; the version field lets a backend built against an older
 * header keep working: the library reads only the members that version
 * had.
 */
#ifndef PROGCACHE_SYS_STORE_H
#define PROGCACHE_SYS_STORE_H

#include "../common.h"
#include "../stats.h"
#include "../store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* progcache_store.flags: what kind of tier a store is. The cache orders its
 * tiers by them (progcache/cache.h): its home is the last tier that is
 * PERSISTENT and not SHARED; tiers above the home are copies; tiers below
 * it are remote tiers, written after the home and never allowed to fail a
 * call. */
/* Entries outlive the process (a directory, a database on this machine). */
#define PROGCACHE_STORE_PERSISTENT 0x1u
/* Shared by several machines or users (a server): a remote tier. */
#define PROGCACHE_STORE_SHARED 0x2u

typedef struct progcache_store_stats_ops progcache_store_stats_ops;
typedef struct progcache_store_lease_ops progcache_store_lease_ops;

/*
 * progcache_error_set() : record code and a message for this thread, as the
 * library's own functions do, so that progcache_error_last() explains a
 * backend's failure in words. Returns code, for
 * `return progcache_error_set(PROGCACHE_EIO, "cannot reach %s", url);`.
 */
PROGCACHE_API int progcache_error_set(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * The backend vtable. Every function returns PROGCACHE_OK or a negative
 * code and sets the thread's last error on failure (progcache_error_set);
 * get returns PROGCACHE_ENOTFOUND on a miss without setting a message.
 * Every function must be safe to call from several threads at once on one
 * store. get, put and free are required (free
 * releases everything the store owns); every other op may be NULL, and
 * the library then does what its comment says.
 */
struct progcache_store {
    unsigned int version; /* PROGCACHE_STORE_VERSION */
    const char *name;     /* "file", "memory", ...: for messages */

    /* Version 1. get, put and free: required. */
    int (*get)(progcache_buf *out, progcache_store *store, const void *key, size_t key_len);
    int (*put)(progcache_store *store, const void *key, size_t key_len, const void *data,
               size_t size);
    /* NULL: entries cannot be removed one by one; progcache_store_remove
     * (and progcache_remove over this tier) fails with PROGCACHE_EINVAL
     * saying so. */
    int (*remove)(progcache_store *store, const void *key, size_t key_len);
    /* NULL: progcache_store_clear fails with PROGCACHE_EINVAL saying so. */
    int (*clear)(progcache_store *store);
    /* NULL: counted by one walk of foreach (version 3) when the store has
     * it, else progcache_store_count fails with PROGCACHE_EINVAL. */
    int (*count)(uint64_t *out, progcache_store *store);
    /* NULL: the sizes foreach reports, summed, as for count. */
    int (*total_size)(uint64_t *out, progcache_store *store);
    void (*free)(progcache_store *store);

    /* Version 2: each may be 0/NULL. */
    unsigned int flags; /* PROGCACHE_STORE_* above */
    /* get, also filling meta (its version set by the caller; kind, seal
     * and records). NULL: the store keeps no metadata (get is called, and
     * meta reads kind UNKNOWN, PROGCACHE_SEAL_NONE, no records). */
    int (*get_meta)(progcache_buf *out, progcache_entry_meta *meta, progcache_store *store,
                    const void *key, size_t key_len);
    /* put, keeping meta's kind and records with the bytes (meta may be
     * NULL). NULL: put is called and the metadata is not kept. */
    int (*put_meta)(progcache_store *store, const void *key, size_t key_len, const void *data,
                    size_t size, const progcache_entry_meta *meta);
    /* Wait for writes the store queued. NULL: it queues nothing. */
    int (*flush)(progcache_store *store);
    /* Statistics and counters. NULL: none. */
    const progcache_store_stats_ops *stats;
    /* Single-flight leases across machines. NULL: none. */
    const progcache_store_lease_ops *lease;

    /* Version 3: each may be NULL. */
    /* Whether key has an entry, without reading its bytes (for a server:
     * a HEAD, not a download): PROGCACHE_OK, PROGCACHE_ENOTFOUND (no
     * message), or an error. NULL: get is called and the bytes dropped. */
    int (*exists)(progcache_store *store, const void *key, size_t key_len);
    /* Call fn once for every entry (progcache_entry in progcache/store.h):
     * name (the 64 hex digits of SHA-256(key), the name an entry has in
     * every tier and in an archive), size, times where known (0 if not);
     * with PROGCACHE_ENTRIES_READ in flags, data (size bytes); with
     * PROGCACHE_ENTRIES_RECORDS, meta. An entry that cannot be read is
     * handed over with data NULL and error saying why. Stop when fn returns
     * non-zero, and return that value. Entries put or removed meanwhile
     * may or may not be seen; none is seen twice. The library does
     * PROGCACHE_ENTRIES_INSPECT itself. NULL: the store cannot be listed
     * (progcache_store_foreach then says so). */
    int (*foreach)(progcache_store *store, unsigned int flags, progcache_entry_fn fn, void *ctx);

    /* Version 4: may be NULL. */
    /* Remove the entry foreach listed under name (its 64 hex digits), for
     * a store whose entries are named by the hash of their key, so that a
     * listing can remove what it found (`progcache prune --remote`):
     * PROGCACHE_OK, PROGCACHE_ENOTFOUND (no message) when there is none.
     * NULL: progcache_store_remove_name fails with PROGCACHE_EINVAL saying
     * so. */
    int (*remove_name)(progcache_store *store, const char *name);
};

#define PROGCACHE_STORE_VERSION 4
/* A store's vtable with its version set and every other member 0/NULL:
 * `progcache_store s = PROGCACHE_STORE_INIT; s.get = my_get; ...`. */
#define PROGCACHE_STORE_INIT PROGCACHE__INIT(progcache_store, PROGCACHE_STORE_VERSION)

/*
 * Statistics a store keeps: the home tier's persistent counters (the file
 * store keeps them in progcache/stats for every process), and a tier's own
 * per-process counts (what a remote tier did), which the cache adds into
 * its home tier's statistics.
 */
struct progcache_store_stats_ops {
    unsigned int version; /* PROGCACHE_STORE_STATS_OPS_VERSION */
    /* Count n events of one kind in the store's persistent statistics.
     * Called on every hit: it must not block or make a system call.
     * NULL: the store keeps no statistics of its own. */
    void (*record)(progcache_store *store, progcache_stat stat, uint64_t n);
    /* Read / zero them (see progcache_store_stats_get). NULL: none. */
    int (*get)(progcache_stats *out, progcache_store *store);
    int (*reset)(progcache_store *store);
    /* The store's own counts since it was created. NULL: none. */
    int (*counters)(progcache_store_counters *out, const progcache_store *store);
};

#define PROGCACHE_STORE_STATS_OPS_VERSION 1

/*
 * Leases: when several machines miss the same key at once, one computes it
 * and the others wait (progcache_store_lease_acquire and friends in
 * progcache/store.h say what each must do). A shared tier that can offer
 * them (Redis does, with SET NX PX and pub/sub) fills these.
 */
struct progcache_store_lease_ops {
    unsigned int version; /* PROGCACHE_STORE_LEASE_OPS_VERSION */
    int (*acquire)(progcache_store_lease *out, progcache_store *store, const void *key,
                   size_t key_len, unsigned int lease_ms);
    int (*renew)(progcache_store *store, progcache_store_lease *lease, unsigned int lease_ms);
    int (*release)(progcache_store *store, progcache_store_lease *lease);
    int (*wait)(progcache_store *store, const void *key, size_t key_len,
                unsigned int timeout_ms);

    /* Version 2; may be NULL. Who holds key's lease now
     * (progcache_store_lease_holder; out is a whole struct of this
     * header's version). */
    int (*holder)(progcache_store_lease_info *out, progcache_store *store, const void *key,
                  size_t key_len);
};

#define PROGCACHE_STORE_LEASE_OPS_VERSION 2

/* ===========================================================================
 * Tiers by name: a registry, as sqlite3_vfs_register / sqlite3_vfs_find
 * ======================================================================== */

/* What a cache hands a factory for the tier it opens. */
typedef struct progcache_store_params {
    unsigned int version; /* PROGCACHE_STORE_PARAMS_VERSION */
    /* The largest artifact the cache stores or reads, in bytes (the
     * cache's max_artifact_size setting): the store must refuse to put,
     * and must not read, anything larger. Never 0 when a cache calls. */
    uint64_t max_artifact_size;
    /* The cache's log callback (optional), for what the tier tells. */
    progcache_log_fn log;
    void *log_ctx;
} progcache_store_params;

#define PROGCACHE_STORE_PARAMS_VERSION 1
#define PROGCACHE_STORE_PARAMS_INIT \
    PROGCACHE__INIT(progcache_store_params, PROGCACHE_STORE_PARAMS_VERSION)
/* progcache_store_params_init() : set params to its defaults. NULL-safe. */
PROGCACHE_API void progcache_store_params_init(progcache_store_params *params);

/*
 * A factory: make the store that url names (the whole text given to
 * progcache_options.remote_url or $PROGCACHE_REMOTE, "name:rest" or
 * "name://rest"; a factory takes what follows its name as it likes).
 * params is never NULL (version PROGCACHE_STORE_PARAMS_VERSION or
 * older: read only what its version has). ctx is what was registered. A
 * store made for a cache's remote tier should declare
 * PROGCACHE_STORE_SHARED in its flags.
 * @return PROGCACHE_OK with *out set, or a code with a message naming url.
 */
typedef int (*progcache_store_factory)(progcache_store **out, const char *url,
                                       const progcache_store_params *params, void *ctx);

/*
 * progcache_store_register() : make a tier known by name, for
 * progcache_open (progcache_options.remote_url, $PROGCACHE_REMOTE): a URL
 * whose scheme (the text before its first ':') is name is opened by
 * factory. Registering a name again replaces its factory (NULL factory:
 * unregisters it). Safe from several threads; register before opening
 * the caches that use it.
 * @param name 1-31 characters of [a-z0-9+.-_]; not "redis", "rediss" or
 *             "unix" (the built-in Redis tier).
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (a bad or built-in name);
 *         PROGCACHE_ENOMEM (more than 32 names registered).
 */
PROGCACHE_API int progcache_store_register(const char *name, progcache_store_factory factory,
                                           void *ctx);

/*
 * progcache_store_find() : the factory registered under name (and its
 * ctx in *ctx, if ctx is not NULL), or NULL.
 */
PROGCACHE_API progcache_store_factory progcache_store_find(const char *name, void **ctx);

/* progcache_store_open_url() (progcache/cache.h, the cache's room, which
 * knows the built-in tiers) opens the store a URL names. */

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_SYS_STORE_H */
