/* Internal: calling a store's optional (version 2) members safely, for the
 * cache. A store built against version 1 of progcache/sys/store.h has a
 * shorter struct: its version-2 members must not be read. */
#ifndef PROGCACHE_STORE_STORE_H
#define PROGCACHE_STORE_STORE_H

#include "progcache/sys/store.h"

/* store->flags, or 0 for a version-1 store. */
unsigned int progcache__store_flags(const progcache_store *store);

/* Get with metadata through get_meta, or through get with meta reset to
 * "nothing known" (meta may be NULL). No argument checks. */
int progcache__store_get_meta(progcache_buf *out, progcache_entry_meta *meta,
                              progcache_store *store, const void *key, size_t key_len);

/* Put with metadata through put_meta, or through put (meta may be NULL). */
int progcache__store_put_meta(progcache_store *store, const void *key, size_t key_len,
                              const void *data, size_t size, const progcache_entry_meta *meta);

/* Whether key has an entry: the exists op (version 3), else a get whose
 * bytes are dropped. PROGCACHE_OK, PROGCACHE_ENOTFOUND or the store's
 * error. No argument checks. */
int progcache__store_exists(progcache_store *store, const void *key, size_t key_len);

/* The mandatory ops, called through here (never store->op directly) so
 * that every call of a store passes one place. No argument checks. */
int progcache__store_remove(progcache_store *store, const void *key, size_t key_len);
int progcache__store_clear(progcache_store *store);
int progcache__store_count(uint64_t *out, progcache_store *store);
int progcache__store_total_size(uint64_t *out, progcache_store *store);

/* Check a vtable a caller hands the library (progcache_open_tiers, a
 * factory's result): version 1 to PROGCACHE_STORE_VERSION, the mandatory
 * ops set, and its stats and lease ops of a known version when present.
 * what names it in the message ("tiers[2]"). */
int progcache__store_check(const progcache_store *store, const char *fn, const char *what);

/* The registry (store_registry.c): whether name (len bytes, not
 * terminated) is one of the built-in Redis tier's URL schemes, and the
 * factory registered under it (NULL: none). */
int progcache__store_builtin_name(const char *name, size_t len);
progcache_store_factory progcache__store_find_n(const char *name, size_t len, void **ctx);

/* The store's statistics ops, or NULL (version 1, none, or an ops struct
 * of version 0). */
const progcache_store_stats_ops *progcache__store_stats_ops(const progcache_store *store);

/* Its lease ops, or NULL. */
const progcache_store_lease_ops *progcache__store_lease_ops(const progcache_store *store);

/* Count n events in the store's persistent statistics, if it keeps any.
 * The hit path calls this: a few loads and one indirect call. */
void progcache__store_record(progcache_store *store, progcache_stat stat, uint64_t n);

/* The places of a cache directory's progcache/ that the layers above use.
 * The file store owns the layout: it names them (docs/FORMAT.md) and makes
 * them with its rules; the layers above ask for a place, never a path. */
typedef enum progcache__place {
    PROGCACHE__PLACE_FLIGHT,  /* progcache/flight: the compile locks (a file) */
    PROGCACHE__PLACE_FLIGHT_D, /* progcache/flight.d/: lease files on network file systems */
    PROGCACHE__PLACE_PCH      /* progcache/pch-<uid>/: this user's PCHs */
} progcache__place;

/* "progcache/flight", "progcache/pch-1000": the place's path under the
 * cache directory, for messages. Returns out. */
const char *progcache__store_place_path(char *out, size_t len, progcache__place place);

struct stat;
/* 1 when store is a file store over another user's cache directory, which
 * it writes nothing into (file_perm.c); else 0. */
int progcache__store_foreign(progcache_store *store);
/* For the cache over a file store (progcache_store_as_file), a file it
 * keeps in the directory's progcache/ (PROGCACHE__PLACE_FLIGHT): opened
 * with the file store's rules (a regular file, never followed or waited
 * on, made with the cache's mode whatever the umask, refused when another
 * user's: docs/SHARED.md). -1 with errno: EPERM and why (len bytes) when
 * refused; EROFS when the store writes nothing (read-only, or another
 * user's cache). Not a file store: EINVAL. */
int progcache__store_open_own(progcache_store *store, progcache__place place, int flags,
                              struct stat *st, char *why, size_t len);
/* Open a directory of the file store's progcache/ shared by the cache's
 * users (PROGCACHE__PLACE_FLIGHT_D), making it first with the cache's
 * directory mode and group whatever the umask (0700, or 02770 in a team's
 * cache). -1 with errno (EROFS: the store writes nothing; EINVAL: not a
 * file store). */
int progcache__store_open_own_dir(progcache_store *store, progcache__place place);
/* Open a directory of the file store's progcache/ that is this user's
 * alone (PROGCACHE__PLACE_PCH): made, when missing and the store may
 * write, exactly 0700 without the group or setgid bit a team's cache
 * passes on; then checked on its descriptor to be this user's with no
 * access for others. -1 with errno and why (a phrase: "cannot create it:
 * ...", "it belongs to uid 1001 with mode 0750, ..."). */
int progcache__store_open_private_dir(progcache_store *store, progcache__place place, char *why,
                                      size_t len);

#endif
