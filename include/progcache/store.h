/*
 * progcache/store.h - stores: where the bytes of a cache live.
 *
 * A store maps arbitrary key bytes to artifact bytes. progcache ships three:
 * the cache directory (progcache/file.h, cuda.core's layout), an in-process
 * memory store (below) and a Redis store (progcache/remote.h). A cache
 * (progcache/cache.h) stacks stores into tiers, top (fastest) first:
 *
 *     memory tier  ->  home directory  ->  remote tier
 *
 * The home directory is the cache's own record; tiers above it hold copies
 * of what it holds, tiers below it are shared with other machines. This
 * header is for using a store on its own; a backend of your own is written
 * against progcache/sys/store.h.
 */
#ifndef PROGCACHE_STORE_H
#define PROGCACHE_STORE_H

#include "artifact.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct progcache_store progcache_store;

/* ===========================================================================
 * What a store knows about an entry besides its bytes
 * ======================================================================== */

/* Whether the bytes a get returned are the ones that were put under that
 * key, as far as the store could check. */
typedef enum progcache_seal_state {
    /* The store keeps no integrity record for these bytes, or did not
     * check it (entries cuda.core wrote; PROGCACHE_FILE_NO_VERIFY; a store
     * that checks nothing): check what matters yourself. */
    PROGCACHE_SEAL_NONE = 0,
    /* The bytes matched the record written with them, for this key. */
    PROGCACHE_SEAL_MATCHED = 1,
    /* Matched, and the writer found them to be a whole artifact of their
     * kind: their structure need not be checked again. */
    PROGCACHE_SEAL_WHOLE = 2
} progcache_seal_state;

/*
 * progcache_entry_meta : what travels with an entry besides its bytes.
 * The struct is the caller's (start from PROGCACHE_ENTRY_META_INIT); records
 * live in memory released by progcache_entry_meta_release(). A get with
 * metadata fills it (replacing what it held; its memory is reused); a put
 * with metadata stores kind and records with the bytes.
 */
typedef struct progcache_entry_meta {
    unsigned int version; /* PROGCACHE_ENTRY_META_VERSION */

    /* What the bytes are, as the store (or the writer) found them;
     * PROGCACHE_KIND_UNKNOWN when nobody looked. */
    progcache_kind kind;
    /* Set by a get: see progcache_seal_state. Ignored by a put. */
    progcache_seal_state seal;
    /* Tagged records kept with the entry and covered by its integrity
     * record where the store has one: each is a 32-bit tag, a 32-bit
     * length (both little-endian) and that many bytes. Add and find them
     * with the functions below. A store that cannot keep records returns
     * none. */
    progcache_buf records;
} progcache_entry_meta;

#define PROGCACHE_ENTRY_META_VERSION 1
#define PROGCACHE_ENTRY_META_INIT \
    PROGCACHE__INIT(progcache_entry_meta, PROGCACHE_ENTRY_META_VERSION)

/* Record tags: values below 0x10000 are progcache's; use others for your
 * own. */
#define PROGCACHE_RECORD_LOWERED_NAMES 1u /* name expressions and their lowered names */
#define PROGCACHE_RECORD_HEADERS 2u       /* the headers a compile read */

/* Largest records of one entry, all together: 1 MiB. */
#define PROGCACHE_RECORDS_MAX ((size_t)1 << 20)

/*
 * progcache_entry_meta_add() : append a record (tag, len bytes of data).
 * A tag may appear more than once; find returns the first.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (meta NULL, data NULL with
 *         len > 0, the records would pass PROGCACHE_RECORDS_MAX);
 *         PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_entry_meta_add(progcache_entry_meta *meta, uint32_t tag,
                                           const void *data, size_t len);

/*
 * progcache_entry_meta_find() : the first record with tag.
 * @param data [out] borrowed from meta, valid until meta changes.
 * @param len  [out] its length.
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND (no such record, or records
 *         that are not well formed); PROGCACHE_EINVAL.
 */
PROGCACHE_API int progcache_entry_meta_find(const unsigned char **data, size_t *len,
                                            const progcache_entry_meta *meta, uint32_t tag);


/* progcache_entry_meta_clear() : forget kind, seal and records (keeping
 * the memory for reuse). NULL-safe. */
PROGCACHE_API void progcache_entry_meta_clear(progcache_entry_meta *meta);

/* progcache_entry_meta_release() : free the records and reset meta to
 * PROGCACHE_ENTRY_META_INIT. NULL-safe. */
PROGCACHE_API void progcache_entry_meta_release(progcache_entry_meta *meta);

/* ===========================================================================
 * The entries of a store, as listed (progcache/admin.h: progcache_file_foreach,
 * progcache_store_foreach)
 * ======================================================================== */

/* One entry, as handed to a progcache_entry_fn. Everything is borrowed for
 * the duration of the call. */
typedef struct progcache_entry {
    /* The entry's file name: the 64 hex digits of SHA-256(key); the file is
     * entries/<name[0:2]>/<name[2:64]>. The key itself is not stored. */
    char name[65];
    uint64_t size;
    int64_t atime_ns; /* last use (the LRU clock), ns since 1970 */
    int64_t mtime_ns; /* when it was written, ns since 1970 */
    uint64_t inode;

    /* With PROGCACHE_ENTRIES_READ (or _INSPECT): the bytes (size of
     * them), else NULL. NULL also when reading failed: error says why. */
    const unsigned char *data;
    /* With PROGCACHE_ENTRIES_INSPECT: what the bytes are, else NULL. */
    const progcache_artifact_info *artifact;
    /* Why the entry could not be read (larger than the store's
     * max_artifact_size, a read error), or, for progcache_file_verify, why
     * it is bad; else NULL. */
    const char *error;
    /* progcache_file_verify with PROGCACHE_VERIFY_FIX: 1 when the entry
     * was removed. */
    int removed;

    /* With PROGCACHE_ENTRIES_RECORDS: what is kept with the entry (its
     * records: progcache_entry_meta_find; the lowered names of its name
     * expressions: progcache_lowered_names_next), when the entry's seal
     * vouches for it; else NULL. Added after the fields above: the
     * library fills it, a caller built against an older header does not
     * see it. */
    const progcache_entry_meta *meta;

    /* Set by progcache_file_verify (0 elsewhere, and for an entry with a
     * seal, or a bad one): one of PROGCACHE_UNSEALED_*. An entry progcache
     * stored has a seal; one without was written by cuda.core or another
     * program, or is a copy that lost its extended attributes (`cp -r`,
     * rsync without -X). Added after the fields above. */
    int unsealed;
} progcache_entry;

/* progcache_entry.unsealed: no seal; with PROGCACHE_VERIFY_SEAL, sealed
 * now; not sealed because another user owns it (only its owner can), or
 * because it is not a whole artifact of a known kind (nothing vouches for
 * its bytes), or because sealing failed (a file system that refuses). */
#define PROGCACHE_UNSEALED 1
#define PROGCACHE_UNSEALED_SEALED 2
#define PROGCACHE_UNSEALED_NOT_OWN 3
#define PROGCACHE_UNSEALED_UNCHECKED 4
#define PROGCACHE_UNSEALED_FAILED 5

/* Called once per entry; return 0 to go on, anything else to stop (the
 * calling function then returns that value). */
typedef int (*progcache_entry_fn)(void *ctx, const progcache_entry *entry);

/* Progress of a long operation, for a progress bar: what is being done
 * ("checking", "importing", "exporting", "scanning", "removing"), done
 * of total steps of it (total 0: not known, as for an archive read from a
 * stream). Called after each step, so often: a caller that draws should
 * draw only every so often. Return 0 to go on, anything else to stop (the
 * calling function then returns that value). */
typedef int (*progcache_progress_fn)(void *ctx, const char *what, uint64_t done,
                                     uint64_t total);

/* progcache_file_foreach() and progcache_store_foreach() flags */
#define PROGCACHE_ENTRIES_READ 0x1u    /* read each entry's bytes */
#define PROGCACHE_ENTRIES_INSPECT 0x2u /* and inspect them (implies READ) */
/* and the records kept with them (implies READ; costs a SHA-256 of each
 * entry, to check its seal) */
#define PROGCACHE_ENTRIES_RECORDS 0x4u

/*
 * progcache_store_foreach() : progcache_file_foreach() (progcache/admin.h)
 * for any store that can be listed: a file store, or a tier whose vtable has a foreach op
 * (progcache/sys/store.h; examples/tier_dir.c). Entries are reported in
 * the store's order; entry->name is the hex SHA-256 of the key in every
 * tier. PROGCACHE_ENTRIES_INSPECT is done here on the bytes the store read.
 * @return as progcache_file_foreach(); PROGCACHE_EINVAL also for a store
 *         that cannot be listed (the message names it).
 */
PROGCACHE_API int progcache_store_foreach(progcache_store *store, unsigned int flags,
                                          progcache_entry_fn fn, void *ctx);

/* ===========================================================================
 * Calling a store
 * ======================================================================== */

/*
 * These check their arguments (NULL store or key,
 * key_len 0, NULL data with size > 0 give PROGCACHE_EINVAL) and call
 * through the vtable.
 *
 * progcache_store_get() : copy the value of key into out (reusing out's
 *   memory). PROGCACHE_ENOTFOUND on a miss.
 * progcache_store_put() : store (replace) the value of key. When put
 *   returns PROGCACHE_OK the value is readable by every process using the
 *   store (and, for the file store, on disk).
 * progcache_store_remove() : delete key. PROGCACHE_ENOTFOUND if absent
 *   (for the file store also when something other than a regular file is
 *   at the key's path: that is left alone).
 * progcache_store_clear() : delete every entry (for the file store: the
 *   regular files named as entries, and stale temp files; nothing else).
 * progcache_store_count() / progcache_store_total_size() : entries and
 *   bytes stored now (the file store reads these from its accounting, not
 *   a scan; they may lag other processes' writes by a moment).
 * A store of your own need not offer remove, clear, count or total_size
 * (progcache/sys/store.h says what each call does then).
 */
PROGCACHE_API int progcache_store_get(progcache_buf *out, progcache_store *store,
                                      const void *key, size_t key_len);
PROGCACHE_API int progcache_store_put(progcache_store *store, const void *key, size_t key_len,
                                      const void *data, size_t size);
PROGCACHE_API int progcache_store_remove(progcache_store *store, const void *key,
                                         size_t key_len);
PROGCACHE_API int progcache_store_clear(progcache_store *store);
/* progcache_store_remove_name() : delete the entry a listing
 *   (progcache_store_foreach) named name: 64 lowercase hex digits, the
 *   entry's name in every tier. PROGCACHE_ENOTFOUND if absent;
 *   PROGCACHE_EINVAL for another name, or a store that cannot remove by
 *   name (the HTTP and S3 tier can). */
PROGCACHE_API int progcache_store_remove_name(progcache_store *store, const char *name);
PROGCACHE_API int progcache_store_count(uint64_t *out, progcache_store *store);
PROGCACHE_API int progcache_store_total_size(uint64_t *out, progcache_store *store);

/* progcache_store_free() : release a store. NULL-safe. */
PROGCACHE_API void progcache_store_free(progcache_store *store);

/*
 * progcache_store_get_meta() : progcache_store_get(), also filling meta
 * (kind, seal state, records). A store that keeps no metadata gives kind
 * UNKNOWN, PROGCACHE_SEAL_NONE and no records.
 * progcache_store_put_meta() : progcache_store_put(), keeping meta's kind
 * and records with the bytes (a store that cannot keep them stores the
 * bytes alone). meta NULL: none.
 * progcache_store_flush() : wait until writes the store queued have been
 * done (or have failed): PROGCACHE_OK at once for a store that queues
 * nothing.
 */
PROGCACHE_API int progcache_store_get_meta(progcache_buf *out, progcache_entry_meta *meta,
                                           progcache_store *store, const void *key,
                                           size_t key_len);
PROGCACHE_API int progcache_store_put_meta(progcache_store *store, const void *key,
                                           size_t key_len, const void *data, size_t size,
                                           const progcache_entry_meta *meta);
PROGCACHE_API int progcache_store_flush(progcache_store *store);

/*
 * progcache_store_exists() : whether key has an entry, without reading its
 * bytes where the store can tell (its exists op; progcache/sys/store.h),
 * else by a get whose bytes are dropped.
 * @return PROGCACHE_OK (it has); PROGCACHE_ENOTFOUND (no message);
 *         PROGCACHE_EINVAL; the store's error.
 */
PROGCACHE_API int progcache_store_exists(progcache_store *store, const void *key,
                                         size_t key_len);

/*
 * progcache_store_counters : what a store has done since it was created, in
 * this process (a remote tier's view; the home directory keeps persistent
 * statistics instead: progcache/stats.h). The caller sets version
 * (PROGCACHE_STORE_COUNTERS_INIT).
 */
typedef struct progcache_store_counters {
    unsigned int version; /* PROGCACHE_STORE_COUNTERS_VERSION */
    uint64_t hits;     /* gets that returned a value */
    uint64_t misses;   /* gets that found none */
    uint64_t errors;   /* calls that failed, or were not attempted because the
                          store was unavailable, and writes dropped */
    uint64_t stores;   /* values written */
    uint64_t rejected; /* values read that failed the store's checks */

    /* Version 2: parts of the above (or of nothing above), so that a tool
     * can say why. A store that does not count one leaves it 0. */
    uint64_t timeouts;     /* calls that ran out of time (part of errors) */
    uint64_t backoffs;     /* times the store switched itself off after
                              failures in a row */
    uint64_t store_errors; /* values not written (failed, refused, too
                              large) */
    uint64_t dropped;      /* queued writes dropped (part of errors) */
    uint64_t newer;        /* values written by a newer version of the
                              store's format, not read (part of misses) */
    uint64_t too_large;    /* values over the size bound, on put or get */
    uint64_t bad_tag;      /* values whose authentication tag was missing or
                              wrong (part of rejected) */

    /* Version 3. */
    uint64_t over_bound; /* replies over their bound (part of errors) */
    uint64_t deadlines;  /* calls stopped at their whole deadline (part of
                            timeouts) */
} progcache_store_counters;

#define PROGCACHE_STORE_COUNTERS_VERSION 3
#define PROGCACHE_STORE_COUNTERS_INIT \
    PROGCACHE__INIT(progcache_store_counters, PROGCACHE_STORE_COUNTERS_VERSION)

/*
 * progcache_store_counters_get() : a snapshot of store's counters.
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND (the store keeps none; no
 *         message); PROGCACHE_EINVAL.
 */
PROGCACHE_API int progcache_store_counters_get(progcache_store_counters *out,
                                               const progcache_store *store);

/* ===========================================================================
 * Leases: one compile per key across machines
 *
 * When several machines miss the same key at once, one computes it and the
 * others wait for its result. A shared tier that offers leases (the Redis
 * store does; docs/REMOTE.md gives the protocol) is used by the cache like
 * this:
 *
 *   local miss, remote miss
 *   loop:
 *     acquire(lease)                held -> compile, put, release; done
 *     wait(key)  PROGCACHE_OK       -> get from the store: a hit; done
 *                PROGCACHE_ENOTFOUND -> the owner gave up or died: loop
 *                anything else      -> compile without the lease; done
 *
 * A lease expires on its own after lease_ms, so a machine that dies while
 * compiling holds nobody up for longer than that; an owner that compiles
 * for longer renews it.
 * ======================================================================== */

/* A lease as its taker holds it. Plain data. (The store records the
 * taker's name with the token: "host/pid", for progcache_store_lease_holder.) */
typedef struct progcache_store_lease {
    int held;       /* 1 while this caller owns the lease */
    char token[33]; /* the random owner token (hex) */
    char hash[65];  /* hex SHA-256 of the key */
} progcache_store_lease;

#define PROGCACHE_STORE_LEASE_INIT {0, {0}, {0}}

/*
 * progcache_store_lease_acquire() : try to become the machine that computes
 * key. Does not wait.
 * @param out      [out] out->held is 1 when the lease is now ours, 0 when
 *                 another machine holds it.
 * @param lease_ms how long the lease lasts unless renewed or released
 *                 (> 0).
 * @return PROGCACHE_OK (out->held says which); PROGCACHE_EINVAL;
 *         PROGCACHE_ENOTFOUND: the store offers no leases (no message);
 *         PROGCACHE_EREMOTE: the store could not be asked (unreachable,
 *         backing off, read-only); compute without the lease.
 *
 * progcache_store_lease_renew() : extend a held lease to lease_ms from now,
 * only if it is still ours. PROGCACHE_OK; PROGCACHE_ENOTFOUND: it is no
 * longer ours (lease->held is now 0); PROGCACHE_EINVAL; PROGCACHE_EREMOTE.
 *
 * progcache_store_lease_release() : give up a lease after storing the value
 * (or after failing to compute it). Waits for the store's queued writes
 * first, so the value is there before anyone is told; then deletes the
 * lease if it is still ours and wakes the waiters. lease->held is 0
 * afterwards. PROGCACHE_OK; PROGCACHE_ENOTFOUND (not ours any more);
 * PROGCACHE_EREMOTE (it will expire on its own).
 *
 * progcache_store_lease_wait() : wait while another machine holds key's
 * lease, at most timeout_ms. PROGCACHE_OK: the entry exists now (get it);
 * PROGCACHE_ENOTFOUND: no entry and no lease (the owner failed or died:
 * try to acquire again); PROGCACHE_ETIMEOUT; PROGCACHE_EINVAL;
 * PROGCACHE_EREMOTE.
 */
PROGCACHE_API int progcache_store_lease_acquire(progcache_store_lease *out,
                                                progcache_store *store, const void *key,
                                                size_t key_len, unsigned int lease_ms);
PROGCACHE_API int progcache_store_lease_renew(progcache_store *store,
                                              progcache_store_lease *lease,
                                              unsigned int lease_ms);
PROGCACHE_API int progcache_store_lease_release(progcache_store *store,
                                                progcache_store_lease *lease);
PROGCACHE_API int progcache_store_lease_wait(progcache_store *store, const void *key,
                                             size_t key_len, unsigned int timeout_ms);

/* Who holds a lease, as far as the store can tell. */
typedef struct progcache_store_lease_info {
    unsigned int version; /* PROGCACHE_STORE_LEASE_INFO_VERSION */
    /* The holder as it named itself: "host/pid" for progcache; "" when the
     * store keeps no name (a lease written by an older progcache). */
    char holder[256];
    /* How long the lease runs unless its holder renews it, in ms; -1 when
     * it has no expiry. */
    int64_t ttl_ms;
} progcache_store_lease_info;

#define PROGCACHE_STORE_LEASE_INFO_VERSION 1
#define PROGCACHE_STORE_LEASE_INFO_INIT \
    PROGCACHE__INIT(progcache_store_lease_info, PROGCACHE_STORE_LEASE_INFO_VERSION)

/*
 * progcache_store_lease_holder() : who holds key's lease now (for progress
 * messages and `progcache remote --lease`). Does not wait.
 * @param out [out] version set by the caller.
 * @return PROGCACHE_OK (out filled); PROGCACHE_ENOTFOUND: nobody holds it,
 *         or the store offers no leases or cannot name holders (no
 *         message); PROGCACHE_EINVAL; PROGCACHE_EREMOTE: the store could
 *         not be asked.
 */
PROGCACHE_API int progcache_store_lease_holder(progcache_store_lease_info *out,
                                               progcache_store *store, const void *key,
                                               size_t key_len);

/* ===========================================================================
 * The memory store: an in-process LRU with a byte cap
 * ======================================================================== */

typedef struct progcache_memory_options {
    unsigned int version; /* PROGCACHE_MEMORY_OPTIONS_VERSION */
    /* Byte cap over all values; 0: 64 MiB. A value larger than the cap is
     * not kept (put succeeds; the next get misses). */
    uint64_t max_size;
    /* Version 2. The largest value put takes (a larger one is refused,
     * PROGCACHE_EINVAL); 0: PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT.
     * progcache_open passes the cache's max_artifact_size. */
    uint64_t max_artifact_size;
} progcache_memory_options;

#define PROGCACHE_MEMORY_OPTIONS_VERSION 2
#define PROGCACHE_MEMORY_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_memory_options, PROGCACHE_MEMORY_OPTIONS_VERSION)
PROGCACHE_API void progcache_memory_options_init(progcache_memory_options *opts);

/*
 * progcache_store_memory_new() : a new, empty memory store. Thread-safe; a
 * hit costs no system call.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_store_memory_new(progcache_store **out,
                                             const progcache_memory_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_STORE_H */
