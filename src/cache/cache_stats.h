/* Internal: what the cache layer offers the layers above it (compile-or-load,
 * single-flight) beyond the public calls: counting, metadata, lookups that
 * are not the caller's. */
#ifndef PROGCACHE_CACHE_CACHE_STATS_H
#define PROGCACHE_CACHE_CACHE_STATS_H

#include "error.h" /* PROGCACHE_PRINTF, PROGCACHE_COLD */
#include "progcache/cache.h"
#include "progcache/stats.h"

/* Count n events in the statistics of the cache's home tier (the cache
 * directory's progcache/stats), if it keeps any. For events the layers
 * above see: corrupt entries healed, single-flight waits. NULL-safe. */
void progcache__cache_record(progcache *cache, progcache_stat stat, uint64_t n);

/* Add what the remote tiers counted since the last fold to the home tier's
 * statistics. Called by progcache_stats_get and progcache_close. */
void progcache__cache_fold_remote(progcache *cache);

/* progcache_get, also filling meta (may be NULL): the seal state the tier
 * that hit found (PROGCACHE_SEAL_WHOLE: the bytes are the ones stored under
 * this key and were a whole artifact; compile-or-load's hit path then
 * checks only their kind) and the records kept with the entry. */
int progcache__cache_get_meta(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                              const void *key, size_t key_len);

/* progcache_put, keeping meta's kind and records with the bytes in every
 * tier that can keep them (meta may be NULL). */
int progcache__cache_put_meta(progcache *cache, const void *key, size_t key_len,
                              const void *data, size_t size, const progcache_entry_meta *meta);

/* progcache__cache_get_meta without counting a hit or miss: for lookups
 * that are not the caller's (polling while another process compiles the
 * key). */
int progcache__cache_get_quiet(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                               const void *key, size_t key_len);

/* progcache__cache_get_quiet in the tiers down to the home tier only: for
 * polling while another process of this host computes the key (it brings
 * the value into the home tier, whichever tier it came from), without a
 * round trip to a remote tier per poll. */
int progcache__cache_get_local(progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                               const void *key, size_t key_len);

/* After a progcache_put that failed: whether key's entry is in the home
 * tier all the same (a put can fail after its entry is in place, when
 * making it durable failed; or another process stored the key meanwhile).
 * Asks the tier's exists op (the file store opens the entry without
 * reading it; a tier without one is read once), uncounted; the thread's
 * error is left as it was. */
int progcache__cache_holds(progcache *cache, const void *key, size_t key_len);

/* The state a layer above keeps with the handle under name (a string
 * that lives as long as the program, compared by content: the PCH tier's
 * "pch" holds its directory, what it has logged, its in-process PCHs), as
 * sqlite keeps client data by name on a connection. The first call for a
 * name makes it with make(arg), under the handle's lock; progcache_close
 * frees it with destroy. Returns the state; NULL when the cache is NULL,
 * make returned NULL (tried again at the next call) or the handle's
 * PROGCACHE__CACHE_SLOTS names are taken. */
void *progcache__cache_data(progcache *cache, const char *name, void *(*make)(void *arg),
                            void *arg, void (*destroy)(void *state));
/* Whether the cache was opened read-only (PROGCACHE_FILE_READONLY):
 * nothing may be written under its directory, by a layer above either
 * (the PCH tier). 0 for NULL. */
int progcache__cache_read_only(const progcache *cache);
/* The home tier is another user's cache directory, read and never written
 * (file_perm.c). 0 for NULL. */
int progcache__cache_foreign(const progcache *cache);
/* PROGCACHE_DISABLE or PROGCACHE_READONLY is in force: a compile is not
 * stored, and that is no failure (said once at open). 0 for NULL. */
int progcache__cache_writes_off(const progcache *cache);
/* The home tier (the cache's own record), borrowed; NULL for NULL. */
progcache_store *progcache__cache_home(const progcache *cache);
/* The cache directory, or NULL (progcache_open_tiers, or cache NULL). */
const char *progcache__cache_path(const progcache *cache);
/* Pass a formatted message to the cache's log callback, if any. */
void progcache__cache_log(const progcache *cache, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4) PROGCACHE_COLD;
/* The cache's log callback and its context (NULL, NULL when none). */
void progcache__cache_log_of(const progcache *cache, progcache_log_fn *log, void **log_ctx);

/* The bound on waiting for another compile when the program sets none
 * ($PROGCACHE_WAIT_TIMEOUT read at open, else the default). */
unsigned int progcache__cache_wait_timeout(const progcache *cache);

#endif
