/*
 * progcache/stats.h - how well a cache works: hits, misses, stores,
 * evictions, removed corrupt entries, ...
 *
 * The counters belong to the cache directory, not to a process: every
 * process that opens the directory for writing adds to the same counters
 * (a small file, <dir>/progcache/stats, mapped shared; docs/FORMAT.md), and
 * they persist until reset. Counting costs one atomic add in memory and no
 * system call, and concurrent processes count into different slots so they
 * do not contend for one cache line.
 *
 * What is counted where:
 *  - hits, misses, lookup_errors: progcache_get() on a cache handle (a hit
 *    in the in-memory tier counts as a hit); progcache_compile_or_load()
 *    counts through it.
 *  - stores, store_errors: progcache_put() on a cache handle.
 *  - evictions, evicted_bytes: entries removed to keep the directory under
 *    its size cap, or by progcache_file_prune() (progcache prune).
 *  - corrupt_removed: damaged entries removed (progcache verify --fix, and
 *    entries healed on load).
 *  - singleflight_waits: lookups that waited for another thread or process
 *    compiling the same program instead of compiling it too.
 *  - remote_*: the remote (Redis) tier, when one is configured.
 *  - names_learned, pch_*: progcache_compile_or_load(), learning lowered
 *    names and the PCH tier (version 2).
 * Calls on a bare store (progcache_store_get/put) are not counted.
 */
#ifndef PROGCACHE_STATS_H
#define PROGCACHE_STATS_H

#include "cache.h"
#include "common.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The events counted (progcache_stats below has one field for each). A
 * store's statistics ops (progcache/sys/store.h) take these. Values are
 * stable: never renumbered. */
typedef enum progcache_stat {
    PROGCACHE_STAT_HITS = 0,
    PROGCACHE_STAT_MISSES = 1,
    PROGCACHE_STAT_STORES = 2,
    PROGCACHE_STAT_STORE_ERRORS = 3,
    PROGCACHE_STAT_EVICTIONS = 4,
    PROGCACHE_STAT_EVICTED_BYTES = 5,
    PROGCACHE_STAT_CORRUPT_REMOVED = 6,
    PROGCACHE_STAT_SINGLEFLIGHT_WAITS = 7,
    PROGCACHE_STAT_REMOTE_HITS = 8,
    PROGCACHE_STAT_REMOTE_MISSES = 9,
    PROGCACHE_STAT_REMOTE_ERRORS = 10,
    PROGCACHE_STAT_REMOTE_STORES = 11,
    PROGCACHE_STAT_REMOTE_REJECTED = 12,
    PROGCACHE_STAT_LOOKUP_ERRORS = 13,
    /* Version 2 of progcache_stats (its fields: names_learned, then the
     * remote ones, then the PCH tier's, in that order). The remote tier in
     * detail, and the single-flight waits (docs/REMOTE.md, "Counters"): */
    PROGCACHE_STAT_REMOTE_TIMEOUTS = 14,
    PROGCACHE_STAT_REMOTE_BACKOFFS = 15,
    PROGCACHE_STAT_REMOTE_STORE_ERRORS = 16,
    PROGCACHE_STAT_REMOTE_DROPPED = 17,
    PROGCACHE_STAT_REMOTE_NEWER = 18,
    PROGCACHE_STAT_REMOTE_TOO_LARGE = 19,
    PROGCACHE_STAT_REMOTE_BAD_TAG = 20,
    PROGCACHE_STAT_REMOTE_WAITS = 21,
    PROGCACHE_STAT_WAIT_TIMEOUTS = 22,
    PROGCACHE_STAT_REMOTE_TAKEOVERS = 23,
    /* The PCH tier (docs/CUDA.md, "Precompiled headers"): */
    PROGCACHE_STAT_PCH_HITS = 24,
    PROGCACHE_STAT_PCH_MISSES = 25,
    PROGCACHE_STAT_PCH_CREATED = 26,
    PROGCACHE_STAT_PCH_REJECTED = 27,
    PROGCACHE_STAT_PCH_MS_SAVED = 28,
    PROGCACHE_STAT_PCH_FALLBACKS = 29,
    /* compile-or-load found an entry without the lowered names of its name
     * expressions (written by cuda.core or an older progcache) and compiled
     * once to learn them (docs/CUDA.md, "Name expressions") */
    PROGCACHE_STAT_NAMES_LEARNED = 30,
    /* i20nfs: network file systems (docs/SHARED.md). Entries sealed in a
     * sidecar file (progcache/seals/) for want of user xattrs; compiles
     * coordinated by a lease file (progcache/flight.d/) where byte-range
     * locks do not reach other clients; stale lease files (a holder that
     * died or stopped refreshing) taken over. */
    PROGCACHE_STAT_SIDECAR_SEALS = 31,
    PROGCACHE_STAT_FLIGHT_LEASES = 32,
    PROGCACHE_STAT_FLIGHT_TAKEOVERS = 33,
    /* i20cap (version 3): locks the file system refused, and what other
     * programs wrote into the directory (docs/SHARED.md, "Failing locks
     * and other writers"): */
    PROGCACHE_STAT_LOCK_FAILURES = 34,
    PROGCACHE_STAT_LOCK_FALLBACKS = 35,
    PROGCACHE_STAT_OTHER_WRITER_RESCANS = 36,
    PROGCACHE_STAT_OTHER_WRITER_BYTES = 37,
    /* Version 3 (i21): a hostile or broken Redis server (docs/SECURITY.md,
     * "A hostile server"): replies over their command's bound, commands
     * stopped at their whole deadline (part of remote_timeouts). */
    PROGCACHE_STAT_REMOTE_OVER_BOUND = 41,
    PROGCACHE_STAT_REMOTE_DEADLINES = 42,
    /* i23nvrtc: NVRTC loaded on first need (docs/CUDA.md). A lookup whose
     * key needed NVRTC loaded because no record of its version applied (a
     * hit that paid NVRTC's load: the records are missing or stale) */
    PROGCACHE_STAT_NVRTC_KEY_LOADS = 45,
    /* a compile, or a key, that NVRTC was needed for and is not on this
     * machine ("no NVRTC": a miss on a driver-only node) */
    PROGCACHE_STAT_NVRTC_MISSING = 46,
    /* i20perm: other users and modes (docs/SHARED.md, "Team caches, other
     * users and root"). A compile not stored because the cache directory
     * is another user's; a directory or file of ours whose mode was
     * corrected; a settings or state file, or a directory, of another user
     * refused or named in a warning. */
    PROGCACHE_STAT_FOREIGN_NOT_STORED = 38,
    PROGCACHE_STAT_MODES_FIXED = 39,
    PROGCACHE_STAT_FILES_REFUSED = 40,
    /* i23fleet (version 3): PCHs handed to a detached helper to make, off
     * the critical path of the compile that found them worth making. */
    PROGCACHE_STAT_PCH_DEFERRED = 47,
    /* i23warm (version 4): compiles with a PCH that a warm helper ran
     * (docs/CUDA.md, "A warm helper"), and warm helpers that were reached
     * and did not answer (a fresh helper compiled instead). */
    PROGCACHE_STAT_PCH_WARM = 48,
    PROGCACHE_STAT_PCH_WARM_FAILURES = 49,
    /* i29-paths (version 5): a symbolic link (or anything but a directory)
     * found where the cache keeps a directory, refused and not followed
     * (docs/SECURITY.md, "No symbolic links are followed"). */
    PROGCACHE_STAT_LINKS_REFUSED = 50,
    /* i29-trust (version 5): NVRTC records (progcache/nvrtc-<uid>) ignored
     * because someone else could have written them (group- or
     * other-writable, another owner), and entries not loaded for the same
     * reason (docs/SECURITY.md, "A member of the team"). */
    PROGCACHE_STAT_RECORDS_UNTRUSTED = 51,
    PROGCACHE_STAT_ENTRIES_UNTRUSTED = 52,
    /* i30-exec (version 5): NVRTC compiles of unmodified programs run under
     * `progcache exec` (docs/INTERCEPT.md). Compiles the interceptor saw;
     * those served from a bundle (no real compile) and those compiled and
     * stored; those passed to the real NVRTC untouched, by reason: options
     * no key covers (PCH, --time, -fdevice-time-trace, an option it does not
     * know), includes the scanner cannot cover, a flow callback, and the
     * rest (the cache unusable, a key that could not be derived for another
     * reason, a program handed to NVRTC before its compile); real programs made after
     * a HIT for a call the interceptor does not replay; failed compiles
     * (never stored). */
    PROGCACHE_STAT_INTERCEPT_COMPILES = 53,
    PROGCACHE_STAT_INTERCEPT_HITS = 54,
    PROGCACHE_STAT_INTERCEPT_MISSES = 55,
    PROGCACHE_STAT_INTERCEPT_PASS_OPTIONS = 56,
    PROGCACHE_STAT_INTERCEPT_PASS_HEADERS = 57,
    PROGCACHE_STAT_INTERCEPT_PASS_CALLBACK = 58,
    PROGCACHE_STAT_INTERCEPT_PASS_OTHER = 59,
    PROGCACHE_STAT_INTERCEPT_REAL_PROGRAMS = 60,
    PROGCACHE_STAT_INTERCEPT_FAILED = 61,
    /* i30-soname: the stand-in for libnvrtc.so.13 (docs/INTERCEPT.md, "The
     * stand-in"): HITs answered while the program had not mapped NVRTC;
     * NVRTC loaded behind the stand-in by a call not replayed (a MISS, a
     * function the bundle does not answer), once per process; NVRTC loaded
     * to learn its version (no record of the file yet); NVRTC libraries the
     * stand-in could not stand in for (the existing route took them). */
    PROGCACHE_STAT_INTERCEPT_STANDIN_HITS = 62,
    PROGCACHE_STAT_INTERCEPT_STANDIN_LOADS = 63,
    PROGCACHE_STAT_INTERCEPT_STANDIN_VERSION_LOADS = 64,
    PROGCACHE_STAT_INTERCEPT_STANDIN_REFUSED = 65,
    /* i32-scale (version 6): a million entries (docs/FORMAT.md, "Other
     * writers" and "Bounded steps"). Shard directories re-measured by the
     * catch-ups with other writers; bounded eviction steps run, and the
     * entries they examined; scans of the whole directory that seeded the
     * shared counters. */
    PROGCACHE_STAT_SHARDS_RESCANNED = 66,
    PROGCACHE_STAT_EVICT_STEPS = 67,
    PROGCACHE_STAT_EVICT_STEP_ENTRIES = 68,
    PROGCACHE_STAT_STATE_SEEDS = 69,
    /* i34-remote (version 6): the cache's back-off of a tier that fails
     * (docs/REMOTE.md, "A tier that fails"): tiers switched off for a while
     * after failures in a row, and calls to a tier skipped while it was
     * off (each a miss, or a copy not written); credential and CA files of
     * a remote tier refused (another user's, readable by others, not a
     * regular file: docs/SECURITY.md). */
    PROGCACHE_STAT_TIER_BACKOFFS = 72,
    PROGCACHE_STAT_TIER_SKIPPED = 73,
    PROGCACHE_STAT_REMOTE_FILES_REFUSED = 74,
    /* i35-explain (version 6): misses explained (PROGCACHE_EXPLAIN=1 or
     * `progcache explain`), records written to the explain index, index
     * files ignored (another user's, a link, too large, not a regular
     * file), and entries sealed again by `progcache verify --seal`
     * (docs/OPERATIONS.md, "Explained misses"). */
    PROGCACHE_STAT_EXPLAIN_MADE = 82,
    PROGCACHE_STAT_EXPLAIN_RECORDS = 83,
    PROGCACHE_STAT_EXPLAIN_REFUSED = 84,
    PROGCACHE_STAT_ENTRIES_RESEALED = 85,
} progcache_stat;

/*
 * progcache_stats : a snapshot of a cache directory's counters. The caller
 * sets version (PROGCACHE_STATS_INIT); the library fills the fields of
 * that version. Fields are only ever appended.
 */
typedef struct progcache_stats {
    unsigned int version; /* PROGCACHE_STATS_VERSION */

    uint64_t hits;
    uint64_t misses;
    uint64_t lookup_errors; /* gets that failed (I/O error) in every tier */
    uint64_t stores;
    uint64_t store_errors;
    uint64_t evictions;
    uint64_t evicted_bytes;
    uint64_t corrupt_removed;
    uint64_t singleflight_waits;

    /* The remote (Redis) tier, added from its per-process counters when a
     * cache's statistics are read and when it closes: hits, misses,
     * failures (errors, timeouts, calls skipped while backing off, puts
     * dropped from a full queue), values written, and values read that
     * failed the envelope or HMAC check. */
    uint64_t remote_hits;
    uint64_t remote_misses;
    uint64_t remote_errors;
    uint64_t remote_stores;
    uint64_t remote_rejected;

    /* Entries and bytes in the directory now (its size accounting). */
    uint64_t entries;
    uint64_t total_size;
    /* The size cap the most recent process that opened the directory with
     * a cap used; 0: none recorded. The cap is an option of each open
     * (progcache_options.max_size), not a property of the directory. */
    uint64_t max_size;
    /* When counting started: the file's creation or the last reset, in
     * seconds since 1970; 0 when the directory has no statistics file. */
    int64_t since;
    /* 1 when the directory has a statistics file (0 for a directory only
     * cuda.core has used, or one progcache could not write to). */
    int available;

    /* Version 2. The fields follow the order they were added in, not the
     * positions of progcache_stat. */

    /* Entries without lowered names for which compile-or-load compiled
     * once to learn them (PROGCACHE_STAT_NAMES_LEARNED). */
    uint64_t names_learned;

    /* Also version 2: the remote tier in detail (each a part of
     * remote_errors, remote_misses or remote_rejected above, or of no other
     * counter), and the waits for another compile. docs/REMOTE.md,
     * "Counters". */
    uint64_t remote_timeouts;     /* calls that ran out of the connect or
                                     command timeout (part of remote_errors) */
    uint64_t remote_backoffs;     /* times the tier switched itself off after
                                     failures in a row */
    uint64_t remote_store_errors; /* values not written: the write failed or
                                     was refused, or the value was too large */
    uint64_t remote_dropped;      /* background writes dropped: queue full */
    uint64_t remote_newer;        /* values written by a newer progcache,
                                     not read (part of remote_misses) */
    uint64_t remote_too_large;    /* values over max_artifact_size, refused
                                     on put or on get */
    uint64_t remote_bad_tag;      /* values whose HMAC tag was missing or did
                                     not verify (part of remote_rejected) */
    uint64_t remote_waits;        /* compiles that waited for another machine
                                     holding the key's lease */
    uint64_t wait_timeouts;       /* waits for another compile (on this host
                                     or another) that ran past their bound:
                                     the caller compiled on its own */
    uint64_t remote_takeovers;    /* waits that ended because the holder was
                                     gone (its lease expired or vanished):
                                     the waiter compiled instead */

    /* The PCH tier (precompiled headers kept in the cache directory for
     * programs whose leading #include block is heavy; docs/CUDA.md).
     * pch_hits: compiles that used a cached PCH.
     * pch_misses: compiles that could have used one and found none usable
     * (the first sight of a prefix, a PCH being made, one rejected).
     * pch_created: PCHs made and kept. pch_rejected: PCHs found but not
     * used: a header they were made from changed, the file was damaged,
     * NVRTC refused it or died on it. pch_ms_saved: compile time saved by
     * the hits, in milliseconds (the plain compile's time recorded when the
     * PCH was made, less each hit's). pch_fallbacks: compiles the tier
     * meant to run in its helper process that ran in the calling process
     * instead (no helper installed, a helper that failed or died, an NVRTC
     * build the helper does not share). */
    uint64_t pch_hits;
    uint64_t pch_misses;
    uint64_t pch_created;
    uint64_t pch_rejected;
    uint64_t pch_ms_saved;
    uint64_t pch_fallbacks;

    /* i20nfs (version 3): network file systems (docs/SHARED.md).
     * sidecar_seals: entries sealed in progcache/seals/ (no user xattrs).
     * flight_leases: compiles that took a lease file in progcache/flight.d/
     * (where byte-range locks do not reach the other clients of a network
     * file system). flight_takeovers: lease files found stale (the holder
     * died or stopped refreshing for a lease) and taken over. */
    uint64_t sidecar_seals;
    uint64_t flight_leases;
    uint64_t flight_takeovers;
    /* Version 3. i20cap: shared directories (docs/SHARED.md, "Failing
     * locks and other writers").
     * lock_failures: lock calls (flock on progcache/lock, fcntl on
     * progcache/flight) that the file system refused (ENOLCK, EOPNOTSUPP,
     * ENOSYS: NFS without a lock manager, some FUSE file systems), not ones
     * another process held. lock_fallbacks: size passes (seeding, eviction,
     * prune) that ran without the cross-process lock, on the lock-free
     * path that measures the directory itself. other_writer_rescans: passes
     * made because another program (cuda.core) wrote into the directory.
     * other_writer_bytes: the bytes those passes found that progcache's
     * counters did not hold. */
    uint64_t lock_failures;
    uint64_t lock_fallbacks;
    uint64_t other_writer_rescans;
    uint64_t other_writer_bytes;
    /* Version 3 (i21): the remote server misbehaving (docs/SECURITY.md,
     * "A hostile server"). */
    uint64_t remote_over_bound; /* replies over their command's bound (size,
                                   elements, nesting): the connection was
                                   dropped (part of remote_errors) */
    uint64_t remote_deadlines;  /* commands stopped at their whole deadline: a
                                   slow or dripping server (part of
                                   remote_timeouts) */
    /* i23nvrtc (version 3): NVRTC loaded on first need (docs/CUDA.md).
     * nvrtc_key_loads: lookups whose key needed NVRTC loaded because no
     * record of its version applied. nvrtc_missing: compiles (and keys)
     * that needed NVRTC where there is none. */
    uint64_t nvrtc_key_loads;
    uint64_t nvrtc_missing;
    /* Version 3. */
    /* i20perm (docs/SHARED.md, "Team caches, other users and root").
     * foreign_not_stored: compiles (and copies from a remote tier) not
     * stored because the cache directory belongs to another user (counted
     * in that process's own copy of the statistics: nothing is written
     * into another user's cache). modes_fixed: directories and files of
     * this user's whose mode progcache corrected (a private cache made
     * under umask 000, a group cache made under umask 022). files_refused:
     * settings and state files refused (another user's, writable by
     * everyone) and directories of other users with loose modes named in
     * a warning. */
    uint64_t foreign_not_stored;
    uint64_t modes_fixed;
    uint64_t files_refused;
    /* Version 3. i23fleet: pch_deferred, PCH creations started after the
     * compile that found its prefix worth one had returned (a detached
     * helper makes it; pch_created counts it once it is published). */
    uint64_t pch_deferred;
    /* Version 4. i23warm (docs/CUDA.md, "A warm helper"): pch_warm,
     * compiles with a PCH that a warm helper ran (no helper started for
     * them); pch_warm_failures, warm helpers reached that gave no answer
     * (busy, gone, another build), each followed by a fresh helper. */
    uint64_t pch_warm;
    uint64_t pch_warm_failures;
    /* Version 5. i29-paths: links_refused, symbolic links (or other
     * non-directories) found where the cache keeps a directory (a shard,
     * progcache/seals, progcache/tmp, ...): refused, never followed. */
    uint64_t links_refused;
    /* Version 5. i29-trust (docs/SECURITY.md, "A member of the team"):
     * records_untrusted, NVRTC records ignored because someone other than
     * their owner could have written them (a group-writable file renamed
     * there, another user's); entries_untrusted, entries not loaded
     * because neither this user nor root (nor, in a group-trusting open,
     * the team) alone could have written them. Both are misses, never
     * errors. */
    uint64_t records_untrusted;
    uint64_t entries_untrusted;
    /* Version 5. i30-exec: `progcache exec` (docs/INTERCEPT.md); the
     * PROGCACHE_STAT_INTERCEPT_* counters above, in their order. */
    uint64_t intercept_compiles;
    uint64_t intercept_hits;
    uint64_t intercept_misses;
    uint64_t intercept_pass_options;
    uint64_t intercept_pass_headers;
    uint64_t intercept_pass_callback;
    uint64_t intercept_pass_other;
    uint64_t intercept_real_programs;
    uint64_t intercept_failed;
    /* Version 6. i30-soname: the PROGCACHE_STAT_INTERCEPT_STANDIN_*
     * counters above, in their order. */
    uint64_t intercept_standin_hits;
    uint64_t intercept_standin_loads;
    uint64_t intercept_standin_version_loads;
    uint64_t intercept_standin_refused;
    /* Version 6. i32-scale: the PROGCACHE_STAT_SHARDS_RESCANNED ..
     * PROGCACHE_STAT_STATE_SEEDS counters above, in their order. */
    uint64_t shards_rescanned;
    uint64_t evict_steps;
    uint64_t evict_step_entries;
    uint64_t state_seeds;
    /* Version 6. i34-remote: the PROGCACHE_STAT_TIER_* and
     * PROGCACHE_STAT_REMOTE_FILES_REFUSED counters above, in their order. */
    uint64_t tier_backoffs;
    uint64_t tier_skipped;
    uint64_t remote_files_refused;
    /* Version 6. i35-explain: the PROGCACHE_STAT_EXPLAIN_* counters and
     * entries_resealed above, in their order. */
    uint64_t explain_made;
    uint64_t explain_records;
    uint64_t explain_refused;
    uint64_t entries_resealed;
} progcache_stats;

#define PROGCACHE_STATS_VERSION 6
#define PROGCACHE_STATS_INIT PROGCACHE__INIT(progcache_stats, PROGCACHE_STATS_VERSION)

/* progcache_stats_init() : set stats to PROGCACHE_STATS_INIT. NULL-safe. */
PROGCACHE_API void progcache_stats_init(progcache_stats *stats);

/*
 * progcache_stats_get() : read the counters of the cache's directory.
 * METHOD. Works on a cache opened read-only (PROGCACHE_FILE_READONLY): it
 * then reads the directory's counters without changing anything, which is
 * how `progcache stats` reads a directory it may not write to.
 * A cache without a file store (progcache_open_tiers over memory tiers)
 * has no statistics: the counters are 0 and available is 0.
 * @param out   [out] set out->version first (PROGCACHE_STATS_INIT).
 * @param cache the cache.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (NULL argument, unknown
 *         out->version).
 * Thread-safe. The counters are summed without a lock, so a snapshot taken
 * while other processes count may be a few increments behind.
 */
PROGCACHE_API int progcache_stats_get(progcache_stats *out, progcache *cache);

/*
 * progcache_stats_reset() : zero the counters of the cache's directory for
 * every process using it, and restart `since`. METHOD.
 * Increments made by other processes while the reset runs may be lost (a
 * few at most: each counter is zeroed by one atomic store).
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (NULL cache, a cache opened
 *         read-only, or one without a file store: the message says which).
 * Thread-safe.
 */
PROGCACHE_API int progcache_stats_reset(progcache *cache);

/*
 * progcache_store_stats_get() / progcache_store_stats_reset() : the same
 * for a file store used without a cache handle (progcache_store_file_new);
 * any other store has no statistics (get: zeros and available 0; reset:
 * PROGCACHE_EINVAL).
 */
PROGCACHE_API int progcache_store_stats_get(progcache_stats *out, progcache_store *store);
PROGCACHE_API int progcache_store_stats_reset(progcache_store *store);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_STATS_H */
