/*
 * tier_dir.h - an example tier of your own: a flat directory of files.
 *
 * Written against progcache's public headers alone, the way a user adds a
 * tier progcache does not ship (an S3 bucket, an HTTP server, a shared
 * file system): examples/README.md walks through it.
 */
#ifndef TIER_DIR_H
#define TIER_DIR_H

#include <progcache/progcache.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * tier_dir_new() : a store keeping each entry as one file in directory
 * path (created if missing), named by the hex SHA-256 of its key.
 * @param out   [out] the store; release with progcache_store_free(), or
 *              hand it to progcache_open_tiers(), which then owns it.
 * @param flags what the tier is to a cache (progcache/sys/store.h):
 *              PROGCACHE_STORE_PERSISTENT | PROGCACHE_STORE_SHARED for a
 *              directory several machines share (a remote tier, standing
 *              in for an S3 or HTTP store); PROGCACHE_STORE_PERSISTENT
 *              alone for a directory of this machine (then it can be a
 *              cache's home tier).
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (bad arguments); PROGCACHE_EIO
 *         (the directory cannot be created or is not one); PROGCACHE_ENOMEM.
 * Safe for many threads and many processes at once.
 */
int tier_dir_new(progcache_store **out, const char *path, unsigned int flags);

/* The name the tier is registered under: a cache opened with remote_url
 * (or $PROGCACHE_REMOTE) "tier_dir:/some/dir" stacks it as its remote
 * tier. */
#define TIER_DIR_NAME "tier_dir"

/*
 * tier_dir_register() : make the tier known to progcache_open by its name
 * (progcache_store_register, progcache/sys/store.h). Call once, before
 * opening the caches that name it.
 * @return as progcache_store_register().
 */
int tier_dir_register(void);

/*
 * tier_dir_open_cache() : a cache whose tiers are, top first,
 *     memory tier -> home directory (home) -> tier_dir (shared_dir)
 * with the tier_dir a remote tier (PERSISTENT | SHARED).
 * @param home the cache directory; NULL: progcache_default_dir().
 * @return as progcache_open_tiers(), tier_dir_new() and
 *         progcache_store_file_new(); on failure nothing is left open.
 */
int tier_dir_open_cache(progcache **out, const char *home, const char *shared_dir);

#ifdef __cplusplus
}
#endif

#endif /* TIER_DIR_H */
