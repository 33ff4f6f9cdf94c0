/*
 * progcache/cache.h - the cache handle: open a cache directory, get and put
 * artifacts by key.
 *
 * A cache is one or more tiers (progcache/store.h), top (fastest) first:
 *
 *     memory tier  ->  home directory  ->  remote tier
 *
 * progcache_open() stacks an optional in-memory LRU, the cuda.core-compatible
 * cache directory (the home tier, the cache's own record) and an optional
 * shared remote tier (Redis; progcache/remote.h); progcache_open_tiers()
 * stacks stores of the caller's choice, its own included
 * (progcache/sys/store.h). A get walks the tiers top down and copies a hit,
 * with its metadata, into the tiers above; a put writes the home tier, then
 * the remote tiers, then the tiers above. A remote tier never fails a call:
 * its failures are logged, counted and taken as misses.
 *
 * Thread and process safety: one progcache handle may be used by many
 * threads at once; many processes may open the same directory.
 */
#ifndef PROGCACHE_CACHE_H
#define PROGCACHE_CACHE_H

#include "common.h"
#include "file.h"
#include "settings.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct progcache progcache;
struct progcache_redis_options; /* progcache/remote.h */

typedef struct progcache_options {
    unsigned int version; /* PROGCACHE_OPTIONS_VERSION */

    /*
     * The numeric options below follow one rule (progcache/settings.h):
     * 0 means "not set": the value comes from the cache directory's
     * settings file (progcache/config), overridden by its environment
     * variable, else the built-in default. Any other value is used as
     * given, over both. For the sizes that can be switched off,
     * PROGCACHE_SIZE_NONE says "none" explicitly. So a program that sets
     * nothing honours what the directory's owner and the environment ask
     * for, and one that sets a value gets exactly that value.
     */

    /* Size cap of the cache directory in bytes; least recently used
     * entries are evicted above it. 0: the setting max_size
     * ($PROGCACHE_MAX_SIZE; PROGCACHE_MAX_SIZE_DEFAULT, 5 GiB, by
     * default); PROGCACHE_SIZE_NONE: no cap. */
    uint64_t max_size;
    /* Eviction target in percent of max_size, 1-100; 0: the setting
     * low_water_percent (90 by default). */
    unsigned int low_water_percent;

    /* Bytes of in-process memory tier in front of the directory. 0: the
     * setting memory_size (none by default); PROGCACHE_SIZE_NONE: no
     * memory tier. */
    uint64_t memory_size;

    /* PROGCACHE_FILE_* flags, passed to the file store (among them
     * PROGCACHE_FILE_NO_SETTINGS: ignore the settings file and its
     * variables; PROGCACHE_FILE_NO_FSYNC / PROGCACHE_FILE_FSYNC: override
     * the setting no_fsync), and PROGCACHE_NO_REMOTE below. */
    unsigned int flags;

    progcache_log_fn log; /* optional */
    void *log_ctx;

    /* The remote tier, below the home directory (Redis; progcache/remote.h):
     * the tiers are then memory -> home directory -> Redis. NULL: the one named by
     * remote_url (below), else by $PROGCACHE_REMOTE (progcache_default_remote;
     * a registered tier by its URL's scheme, as remote_url), if any, unless
     * PROGCACHE_NO_REMOTE. A remote tier that cannot be set up fails the
     * open, whether given here or by the environment (a malformed URL, an
     * unusable $PROGCACHE_REMOTE_SECRET_FILE: the message names it); it is
     * never left out silently. A server that is down does not fail it.
     * When remote->log is NULL, log and log_ctx above serve the tier too;
     * when remote->max_artifact_size is 0, max_artifact_size below. */
    const struct progcache_redis_options *remote;

    /* Version 2. The largest artifact the cache stores or reads, in bytes,
     * in every tier; 0: the setting max_artifact_size
     * (PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT, 1 GiB, by default). */
    uint64_t max_artifact_size;

    /* Version 3. The remote tier by URL, as $PROGCACHE_REMOTE is read: a
     * tier registered under the URL's scheme (progcache_store_register,
     * progcache/sys/store.h: "mytier:/path", "s3://bucket") is opened by
     * its factory, given max_artifact_size and the log above; else the
     * built-in Redis tier (redis://, unix:). NULL: $PROGCACHE_REMOTE. Not
     * together with remote (PROGCACHE_EINVAL). */
    const char *remote_url;
} progcache_options;

/* Ignore $PROGCACHE_REMOTE: no remote tier unless options->remote. */
#define PROGCACHE_NO_REMOTE 0x100u

#define PROGCACHE_OPTIONS_VERSION 3
#define PROGCACHE_OPTIONS_INIT PROGCACHE__INIT(progcache_options, PROGCACHE_OPTIONS_VERSION)

/* progcache_options_init() : set opts to its defaults. NULL-safe. */
PROGCACHE_API void progcache_options_init(progcache_options *opts);

/*
 * progcache_default_dir() : the cache directory used when none is given.
 * In order: $PROGCACHE_DIR; $XDG_CACHE_HOME/cuda-python/program-cache;
 * $HOME/.cache/cuda-python/program-cache (cuda.core's default, so C and
 * Python programs share one cache). This is the only place progcache reads
 * these environment variables (docs/CONFIG.md).
 * @param out [out] the path as a NUL-terminated string.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (none of the variables is set) or
 *         PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_default_dir(progcache_buf *out);

struct progcache_store_params; /* progcache/sys/store.h */

/*
 * progcache_store_open_url() : open the store url names: a registered
 * tier when url's scheme is a registered name, else the built-in HTTP
 * and S3 tier (http://, https://, s3://: docs/REMOTE.md, "HTTP and S3";
 * refused in a build without libcurl) or Redis tier (redis://, unix:;
 * progcache/remote.h). params (progcache/sys/store.h) NULL: defaults
 * (max_artifact_size PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT, no log).
 * @return as the factory; PROGCACHE_EINVAL for a URL no tier takes.
 */
PROGCACHE_API int progcache_store_open_url(progcache_store **out, const char *url,
                                           const struct progcache_store_params *params);

/*
 * progcache_open() : open (creating if needed) the cache in directory path.
 * CONSTRUCTOR. A directory that holds anything but a cache's entries/,
 * tmp/ and progcache/ is refused (progcache_store_file_new).
 * @param out  [out] the handle; release with progcache_close().
 * @param path the cache directory; NULL: progcache_default_dir().
 * @param opts NULL for defaults.
 * The options left 0 take the directory's settings (progcache/settings.h).
 * ccache's switches in the environment (docs/OPERATIONS.md, "Kill
 * switches"), each said once through opts->log: PROGCACHE_DISABLE=1 opens
 * no directory and no remote tier (every get misses, every put stores
 * nothing and returns PROGCACHE_OK); PROGCACHE_READONLY=1 opens the
 * directory read-only (puts store nothing and return PROGCACHE_OK);
 * PROGCACHE_RECACHE=1 makes every get a miss (puts store over). A value
 * that is not a yes or no is PROGCACHE_EINVAL naming the variable.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (bad options, a directory that is
 *         not a cache, a setting that cannot be used: the message names it
 *         and the settings file's line or the variable), PROGCACHE_EIO (the
 *         message names the path and why it cannot be used; or the remote
 *         tier's variable and why),
 *         PROGCACHE_EREMOTE (a remote tier asked for in a build without
 *         hiredis) or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_open(progcache **out, const char *path,
                                 const progcache_options *opts);

/*
 * progcache_open_tiers() : a cache over caller-built stores, top tier first.
 * CONSTRUCTOR. On success the cache owns the stores (progcache_close frees
 * them); on failure the caller still owns them.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_open_tiers(progcache **out, progcache_store *const *tiers,
                                       size_t num_tiers, const progcache_options *opts);

/*
 * progcache_get() : look key up. METHOD.
 * @param out [out] the artifact bytes on a hit (out's memory is reused).
 * @return PROGCACHE_OK on a hit; PROGCACHE_ENOTFOUND on a miss (no message);
 *         PROGCACHE_EINVAL, PROGCACHE_EIO, PROGCACHE_ENOMEM on failure.
 */
PROGCACHE_API int progcache_get(progcache_buf *out, progcache *cache, const void *key,
                                size_t key_len);

/*
 * progcache_put() : store data under key in every tier. METHOD.
 * When it returns PROGCACHE_OK the entry is complete and durable (unless
 * PROGCACHE_FILE_NO_FSYNC); readers never see a partial entry.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL, PROGCACHE_EIO (full disk,
 *         read-only cache, ...: the message says which) or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_put(progcache *cache, const void *key, size_t key_len,
                                const void *data, size_t size);

/* progcache_remove() : delete key from every tier. PROGCACHE_ENOTFOUND if
 * no tier had it. METHOD. */
PROGCACHE_API int progcache_remove(progcache *cache, const void *key, size_t key_len);

/* progcache_clear() : delete every entry in every tier. METHOD. */
PROGCACHE_API int progcache_clear(progcache *cache);

/* progcache_count() / progcache_total_size() : entries and bytes in the
 * home tier (the cache directory). METHOD. */
PROGCACHE_API int progcache_count(uint64_t *out, progcache *cache);
PROGCACHE_API int progcache_total_size(uint64_t *out, progcache *cache);

/* progcache_path() : the cache directory progcache_open() opened, or NULL
 * for a cache opened with progcache_open_tiers() (whose caller knows its
 * tiers), and for one progcache_open() opened with no directory at all
 * because PROGCACHE_DISABLE is set (or PROGCACHE_READONLY and the directory
 * does not exist: docs/OPERATIONS.md, "Kill switches"). Borrowed; lives as
 * long as the handle. */
PROGCACHE_API const char *progcache_path(const progcache *cache);

/*
 * progcache_nvrtc_version_cache() : the NVRTC version a key derived for
 * cache carries, as compile-or-load finds it (docs/KEY.md, "NVRTC
 * version"): the loaded NVRTC's, else $PROGCACHE_NVRTC_VERSION, else the
 * cache's record line of the NVRTC file a load would open, else NVRTC
 * loaded and asked, else (no NVRTC on this machine) the one version every
 * line of the cache's record names (an imported bundle's). Where
 * progcache_nvrtc_version() has no cache at hand. cache may be NULL.
 * @return as progcache_nvrtc_version().
 */
PROGCACHE_API int progcache_nvrtc_version_cache(int *major, int *minor, progcache *cache);

/*
 * progcache_flush() : wait until every put queued in the background on this
 * cache (PROGCACHE_PROGRAM_ASYNC_STORE in progcache/cuda.h) has finished,
 * and the tiers' own background writes too (the remote tier's queue: once
 * it returns, other nodes can read what this cache put; a remote write
 * that failed is counted and told to the log, not returned). METHOD.
 * @return PROGCACHE_OK, or the code of the first background put that failed
 *         since the last flush (its message as the last error).
 */
PROGCACHE_API int progcache_flush(progcache *cache);

/* progcache_close() : wait for background work, release the handle and its
 * tiers. DESTRUCTOR. NULL-safe. */
PROGCACHE_API void progcache_close(progcache *cache);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_CACHE_H */
