/* Internal: the statistics file <root>/progcache/stats, shared by every
 * process that uses a cache directory (docs/FORMAT.md, "Statistics").
 *
 * Counting is one relaxed atomic add into a slot of a shared mapping: no
 * lock, no system call, and processes (and threads) mostly land on
 * different slots, hence different cache lines, so the hit path of one
 * process does not bounce lines with another's. Reading sums the slots. */
#ifndef PROGCACHE_STORE_STATS_FILE_H
#define PROGCACHE_STORE_STATS_FILE_H

#include <stdint.h>

#include "progcache/stats.h"
#include "progcache/sys/store.h"

/* Counter indices: positions in a slot, fixed by the file format. New
 * counters take the next reserved index; never renumber. */
typedef enum progcache__counter {
    PROGCACHE__HITS = 0,
    PROGCACHE__MISSES = 1,
    PROGCACHE__STORES = 2,
    PROGCACHE__STORE_ERRORS = 3,
    PROGCACHE__EVICTIONS = 4,
    PROGCACHE__EVICTED_BYTES = 5,
    PROGCACHE__CORRUPT_REMOVED = 6,
    PROGCACHE__SINGLEFLIGHT_WAITS = 7,
    PROGCACHE__REMOTE_HITS = 8,
    PROGCACHE__REMOTE_MISSES = 9,
    PROGCACHE__REMOTE_ERRORS = 10,
    PROGCACHE__REMOTE_STORES = 11,
    PROGCACHE__REMOTE_REJECTED = 12,
    PROGCACHE__LOOKUP_ERRORS = 13,
    PROGCACHE__REMOTE_TIMEOUTS = 14,
    PROGCACHE__REMOTE_BACKOFFS = 15,
    PROGCACHE__REMOTE_STORE_ERRORS = 16,
    PROGCACHE__REMOTE_DROPPED = 17,
    PROGCACHE__REMOTE_NEWER = 18,
    PROGCACHE__REMOTE_TOO_LARGE = 19,
    PROGCACHE__REMOTE_BAD_TAG = 20,
    PROGCACHE__REMOTE_WAITS = 21,
    PROGCACHE__WAIT_TIMEOUTS = 22,
    PROGCACHE__REMOTE_TAKEOVERS = 23,
    /* The PCH tier (src/pch/pch_*.c). */
    PROGCACHE__PCH_HITS = 24,
    PROGCACHE__PCH_MISSES = 25,
    PROGCACHE__PCH_CREATED = 26,
    PROGCACHE__PCH_REJECTED = 27,
    PROGCACHE__PCH_MS_SAVED = 28,
    PROGCACHE__PCH_FALLBACKS = 29,
    PROGCACHE__NAMES_LEARNED = 30,
    /* i20nfs: network file systems. */
    PROGCACHE__SIDECAR_SEALS = 31,
    PROGCACHE__FLIGHT_LEASES = 32,
    PROGCACHE__FLIGHT_TAKEOVERS = 33,
    /* i20cap: failing locks, other writers (docs/SHARED.md). */
    PROGCACHE__LOCK_FAILURES = 34,
    PROGCACHE__LOCK_FALLBACKS = 35,
    PROGCACHE__OTHER_WRITER_RESCANS = 36,
    PROGCACHE__OTHER_WRITER_BYTES = 37,
    /* i21: a hostile or broken Redis server. */
    PROGCACHE__REMOTE_OVER_BOUND = 41,
    PROGCACHE__REMOTE_DEADLINES = 42,
    /* i23nvrtc */
    PROGCACHE__NVRTC_KEY_LOADS = 45,
    PROGCACHE__NVRTC_MISSING = 46,
    /* i20perm: other users and modes (src/store/file/file_perm.c). */
    PROGCACHE__FOREIGN_NOT_STORED = 38,
    PROGCACHE__MODES_FIXED = 39,
    PROGCACHE__FILES_REFUSED = 40,
    /* i23fleet */
    PROGCACHE__PCH_DEFERRED = 47,
    PROGCACHE__PCH_WARM = 48,
    PROGCACHE__PCH_WARM_FAILURES = 49,
    /* i29-paths: links refused where a directory belongs (file_path.c). */
    PROGCACHE__LINKS_REFUSED = 50,
    /* i29-trust: records and entries someone else could have written. */
    PROGCACHE__RECORDS_UNTRUSTED = 51,
    PROGCACHE__ENTRIES_UNTRUSTED = 52,
    /* i30-exec: the NVRTC interceptor (src/intercept/). */
    PROGCACHE__INTERCEPT_COMPILES = 53,
    PROGCACHE__INTERCEPT_HITS = 54,
    PROGCACHE__INTERCEPT_MISSES = 55,
    PROGCACHE__INTERCEPT_PASS_OPTIONS = 56,
    PROGCACHE__INTERCEPT_PASS_HEADERS = 57,
    PROGCACHE__INTERCEPT_PASS_CALLBACK = 58,
    PROGCACHE__INTERCEPT_PASS_OTHER = 59,
    PROGCACHE__INTERCEPT_REAL_PROGRAMS = 60,
    PROGCACHE__INTERCEPT_FAILED = 61,
    /* i30-soname */
    PROGCACHE__INTERCEPT_STANDIN_HITS = 62,
    PROGCACHE__INTERCEPT_STANDIN_LOADS = 63,
    PROGCACHE__INTERCEPT_STANDIN_VERSION_LOADS = 64,
    PROGCACHE__INTERCEPT_STANDIN_REFUSED = 65,
    /* i32-scale: catch-ups, bounded eviction steps, seeding scans. */
    PROGCACHE__SHARDS_RESCANNED = 66,
    PROGCACHE__EVICT_STEPS = 67,
    PROGCACHE__EVICT_STEP_ENTRIES = 68,
    PROGCACHE__STATE_SEEDS = 69,
    /* i34-remote: the cache's back-off of a failing tier; refused files. */
    PROGCACHE__TIER_BACKOFFS = 72,
    PROGCACHE__TIER_SKIPPED = 73,
    PROGCACHE__REMOTE_FILES_REFUSED = 74,
    /* i35-explain: the explain index (dir/dir_explain.c), verify --seal. */
    PROGCACHE__EXPLAIN_MADE = 82,
    PROGCACHE__EXPLAIN_RECORDS = 83,
    PROGCACHE__EXPLAIN_REFUSED = 84,
    PROGCACHE__ENTRIES_RESEALED = 85,
    /* Counters per slot in the file, used or reserved. */
    PROGCACHE__COUNTERS_PER_SLOT = 128
} progcache__counter;

typedef struct progcache__stats progcache__stats;

/* How progcache__stats_open maps the file. */
enum {
    PROGCACHE__STATS_READ = 0,    /* an existing file, read-only: counting is a no-op */
    PROGCACHE__STATS_SHARED = 1,  /* read-write and shared, created or replaced as needed */
    PROGCACHE__STATS_PRIVATE = 2  /* a copy of the file (or zeros) this process alone
                                   * counts into: another user's cache */
};

struct file_perm;
/* Open the statistics of the cache directory held open as root_fd (root is
 * for messages), mapped as writable says. With PROGCACHE__STATS_SHARED a
 * file that perm does not allow (another user's) is refused, one of ours
 * with a loose mode fixed, a new one made with perm's mode. *out is NULL
 * when there is no file to read.
 * @return PROGCACHE_OK, PROGCACHE_EIO or PROGCACHE_ENOMEM (message set). */
int progcache__stats_open(progcache__stats **out, int root_fd, const char *root, int writable,
                          const struct file_perm *perm);

/* Unmap and free. NULL-safe. */
void progcache__stats_close(progcache__stats *stats);

/* Add n to a counter. NULL-safe and a no-op on read-only statistics, so
 * callers need not check. Wait-free: one relaxed atomic add. */
void progcache__stats_add(progcache__stats *stats, progcache__counter counter, uint64_t n);

/* Record the size cap a process opened the cache with (shown by `progcache
 * stats`). No-op when read-only. */
void progcache__stats_set_max_size(progcache__stats *stats, uint64_t max_size);

/* Sum the slots into out, a whole struct of this library's version (it is
 * zeroed first; stats NULL gives zeros). */
void progcache__stats_read(progcache_stats *out, const progcache__stats *stats);

/* Zero every counter and restart the "since" clock. Increments racing with
 * the reset may be lost (each counter is zeroed by one atomic store, not
 * under a lock). PROGCACHE_EINVAL when the statistics are read-only. */
int progcache__stats_zero(progcache__stats *stats);

#endif
