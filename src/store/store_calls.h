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

#endif
