/* The statistics file: <root>/progcache/stats, mapped MAP_SHARED by every
 * process that opens the cache directory for writing.
 *
 * 64 slots of 128 64-bit counters. A thread counts into the slot picked by
 * hashing its process id and the address of a thread-local variable, so
 * concurrent processes and threads mostly write different cache lines
 * (each slot is 1 KiB, sixteen lines) and never wait on each other; a
 * reader sums the slots. Two writers that pick one slot are still correct,
 * the adds are atomic; they only share a line.
 *
 * The file carries its own layout in its header (magic, version, header
 * size, slot count and size, file size). A file whose layout differs (a
 * future version, damage) is replaced by a fresh one: statistics are worth
 * less than a working cache, and spare counters in every slot let later
 * versions add counters without changing the layout. */
#include "store/file/file_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "options.h"
#include "fs.h"
#include "store/file/file_layout.h"
#include "store/file/file_perm.h"

#define STATS_MAGIC "PCSTATS1"
#define STATS_VERSION 3 /* 3: 128 counters a slot (2 had 64, 1 had 32) */
#define STATS_HEADER_SIZE 256
#define STATS_SLOTS 64
#define STATS_SLOT_SIZE (PROGCACHE__COUNTERS_PER_SLOT * 8)
#define STATS_FILE_SIZE (STATS_HEADER_SIZE + STATS_SLOTS * STATS_SLOT_SIZE)
#define STATS_REL FILE_STATE_DIR "/stats"

typedef struct stats_header {
    char magic[8];        /* "PCSTATS1" */
    uint32_t version;     /* 3 */
    uint32_t header_size; /* 256: where slot 0 starts */
    uint32_t num_slots;   /* 64 */
    uint32_t slot_size;   /* 1024 bytes: 128 counters */
    uint64_t file_size;   /* 65792 */
    uint64_t max_size;    /* the cap of the latest open with a cap */
    int64_t since;        /* creation or last reset, seconds since 1970 */
} stats_header;

typedef struct stats_file {
    stats_header header;
    unsigned char reserved[STATS_HEADER_SIZE - sizeof(stats_header)];
    uint64_t slot[STATS_SLOTS][PROGCACHE__COUNTERS_PER_SLOT];
} stats_file;

_Static_assert(sizeof(stats_file) == STATS_FILE_SIZE, "stats file layout");

struct progcache__stats {
    stats_file *map;
    int writable;
    uint32_t seed; /* from the process id at open */
};

/* Never written: only its address is used, which differs per thread. */
static _Thread_local char thread_marker;

static int layout_ok(const stats_file *f)
{
    const stats_header *h = &f->header;
    return memcmp(h->magic, STATS_MAGIC, 8) == 0 && h->version == STATS_VERSION &&
           h->header_size == STATS_HEADER_SIZE && h->num_slots == STATS_SLOTS &&
           h->slot_size == STATS_SLOT_SIZE && h->file_size == STATS_FILE_SIZE;
}

/* Publish a fresh file: written under a temp name, then linked (never
 * replacing one another process published first) or, to replace a file
 * with the wrong layout, renamed over it. 0 or -1 with errno. */
static int create_file(int root_fd, int replace, const file_perm *perm)
{
    int dirfd = progcache__fs_open_dir(root_fd, FILE_STATE_DIR);
    if (dirfd < 0)
        return -1;
    stats_file *fresh = progcache__calloc(1, sizeof *fresh);
    int ok = 0;
    if (!fresh) {
        errno = ENOMEM;
        goto done;
    }
    memcpy(fresh->header.magic, STATS_MAGIC, 8);
    fresh->header.version = STATS_VERSION;
    fresh->header.header_size = STATS_HEADER_SIZE;
    fresh->header.num_slots = STATS_SLOTS;
    fresh->header.slot_size = STATS_SLOT_SIZE;
    fresh->header.file_size = STATS_FILE_SIZE;
    fresh->header.since = (int64_t)time(NULL);
    ok = progcache__fs_publish(dirfd, "stats", "stats-", fresh, sizeof *fresh,
                               (replace ? PROGCACHE__PUBLISH_REPLACE : 0) |
                                   (perm->group ? PROGCACHE__PUBLISH_GROUP : 0)) == 0;
done:;
    int saved = errno;
    progcache__free(fresh);
    close(dirfd);
    errno = saved;
    return ok ? 0 : -1;
}

/* Map the file if it has our layout: the mapping, NULL with *bad set when
 * it is a regular file with another layout, NULL with errno otherwise
 * (PROGCACHE__FS_ENOTREG, *mode set, for something other than a regular
 * file: a FIFO there must neither hang the open nor be replaced). */
static stats_file *map_existing(int root_fd, int writable, int *bad, mode_t *mode,
                                const file_perm *perm, char *why, size_t why_len)
{
    *bad = 0;
    struct stat st;
    int fd = progcache__fs_open_regular(root_fd, STATS_REL,
                                        writable == PROGCACHE__STATS_SHARED ? O_RDWR : O_RDONLY, 0,
                                        &st);
    *mode = st.st_mode;
    if (fd < 0)
        return NULL;
    /* Counting into a file that another user owns (or anyone may write)
     * would be trusting it: refused. Ours with a loose mode: fixed. */
    if (writable == PROGCACHE__STATS_SHARED) {
        (void)progcache__perm_fix(perm, fd, &st, progcache__perm_state_mode(perm));
        if (!progcache__perm_file_ok(perm, &st, why, why_len)) {
            close(fd);
            errno = EPERM;
            return NULL;
        }
    }
    void *map = MAP_FAILED;
    /* Private: a copy this process alone counts into (another user's
     * cache, which nothing is written to). */
    if (st.st_size == (off_t)STATS_FILE_SIZE)
        map = mmap(NULL, STATS_FILE_SIZE, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                   (writable == PROGCACHE__STATS_PRIVATE ? MAP_PRIVATE : MAP_SHARED) |
                       MAP_POPULATE,
                   fd, 0);
    else
        *bad = 1;
    int saved = errno;
    close(fd);
    errno = saved;
    if (map == MAP_FAILED)
        return NULL;
    if (layout_ok(map))
        return map;
    munmap(map, STATS_FILE_SIZE);
    *bad = 1;
    return NULL;
}

static stats_file *map_writable(int root_fd, mode_t *mode, const file_perm *perm, char *why,
                                size_t why_len)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int bad;
        stats_file *map =
            map_existing(root_fd, PROGCACHE__STATS_SHARED, &bad, mode, perm, why, why_len);
        if (map)
            return map;
        if (!bad && errno != ENOENT)
            return NULL;
        if (create_file(root_fd, bad, perm) != 0)
            return NULL;
    }
    /* Replaced three times and still not a statistics file: another
     * process keeps writing something else there. */
    errno = EAGAIN;
    return NULL;
}

/* A fresh private copy (nothing to start from). */
static stats_file *map_anonymous(void)
{
    void *map = mmap(NULL, STATS_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    stats_file *f = map;
    memcpy(f->header.magic, STATS_MAGIC, 8);
    f->header.version = STATS_VERSION;
    f->header.header_size = STATS_HEADER_SIZE;
    f->header.num_slots = STATS_SLOTS;
    f->header.slot_size = STATS_SLOT_SIZE;
    f->header.file_size = STATS_FILE_SIZE;
    f->header.since = (int64_t)time(NULL);
    return f;
}

int progcache__stats_open(progcache__stats **out, int root_fd, const char *root, int writable,
                          const file_perm *perm)
{
    *out = NULL;
    stats_file *map;
    mode_t mode = 0;
    char why[192] = "";
    if (writable == PROGCACHE__STATS_SHARED) {
        map = map_writable(root_fd, &mode, perm, why, sizeof why);
    } else {
        int bad;
        map = map_existing(root_fd, writable, &bad, &mode, perm, why, sizeof why);
        if (!map && writable == PROGCACHE__STATS_PRIVATE && errno != PROGCACHE__FS_ENOTREG)
            map = map_anonymous();
        if (!map && errno != PROGCACHE__FS_ENOTREG)
            return PROGCACHE_OK; /* none, or not ours: no statistics */
    }
    if (!map && errno == EPERM && why[0])
        return progcache__error(PROGCACHE_EIO,
                                "cannot use statistics file %s/" STATS_REL ": %s; it is not used "
                                "(remove it)",
                                root, why);
    if (!map && errno == PROGCACHE__FS_ENOTREG)
        return progcache__error(PROGCACHE_EIO,
                                "cannot use statistics file %s/" STATS_REL
                                ": it is %s, not a regular file (remove it)",
                                root, progcache__fs_type_name(mode));
    if (!map) {
        int saved = errno;
        return progcache__error(progcache__code_from_errno(saved),
                                "cannot open statistics file %s/" STATS_REL ": %s", root,
                                progcache__fs_strerror(why, sizeof why, saved));
    }
    progcache__stats *stats = progcache__calloc(1, sizeof *stats);
    if (!stats) {
        munmap(map, STATS_FILE_SIZE);
        return progcache__error(PROGCACHE_ENOMEM, "out of memory opening statistics of %s", root);
    }
    stats->map = map;
    stats->writable = writable != 0;
    stats->seed = (uint32_t)getpid() * 2654435761u;
    if (writable == PROGCACHE__STATS_SHARED) {
        /* Take the write faults now, at open, not on the first hit: the
         * first store to a page of a shared file mapping costs the file
         * system's page_mkwrite (tens of µs on ext4), and a program's first
         * hit is the one its start-up waits for. Adding 0 changes nothing. */
        for (size_t off = 0; off < STATS_FILE_SIZE; off += 4096)
            __atomic_fetch_add((uint64_t *)((char *)map + off), 0, __ATOMIC_RELAXED);
    }
    *out = stats;
    return PROGCACHE_OK;
}

void progcache__stats_close(progcache__stats *stats)
{
    if (!stats)
        return;
    munmap(stats->map, STATS_FILE_SIZE);
    progcache__free(stats);
}

static unsigned slot_of(const progcache__stats *stats)
{
    uint64_t x = (uint64_t)(uintptr_t)&thread_marker ^ stats->seed;
    /* A multiplicative mix: TLS addresses differ in middle bits only. */
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (unsigned)(x % STATS_SLOTS);
}

PROGCACHE_HOT
void progcache__stats_add(progcache__stats *stats, progcache__counter counter, uint64_t n)
{
    if (!stats || !stats->writable || n == 0)
        return;
    __atomic_add_fetch(&stats->map->slot[slot_of(stats)][counter], n, __ATOMIC_RELAXED);
}

void progcache__stats_set_max_size(progcache__stats *stats, uint64_t max_size)
{
    if (stats && stats->writable && max_size)
        __atomic_store_n(&stats->map->header.max_size, max_size, __ATOMIC_RELAXED);
}

static uint64_t sum(const progcache__stats *stats, progcache__counter counter)
{
    uint64_t total = 0;
    for (unsigned s = 0; s < STATS_SLOTS; s++)
        total += __atomic_load_n(&stats->map->slot[s][counter], __ATOMIC_RELAXED);
    return total;
}

void progcache__stats_read(progcache_stats *out, const progcache__stats *stats)
{
    /* out is whole (progcache_store_stats_get reads into its own struct
     * and copies the caller's version back). */
    progcache__struct_init(out, sizeof *out, out->version);
    if (!stats)
        return;
    out->available = 1;
    out->hits = sum(stats, PROGCACHE__HITS);
    out->misses = sum(stats, PROGCACHE__MISSES);
    out->lookup_errors = sum(stats, PROGCACHE__LOOKUP_ERRORS);
    out->stores = sum(stats, PROGCACHE__STORES);
    out->store_errors = sum(stats, PROGCACHE__STORE_ERRORS);
    out->evictions = sum(stats, PROGCACHE__EVICTIONS);
    out->evicted_bytes = sum(stats, PROGCACHE__EVICTED_BYTES);
    out->corrupt_removed = sum(stats, PROGCACHE__CORRUPT_REMOVED);
    out->singleflight_waits = sum(stats, PROGCACHE__SINGLEFLIGHT_WAITS);
    out->remote_hits = sum(stats, PROGCACHE__REMOTE_HITS);
    out->remote_misses = sum(stats, PROGCACHE__REMOTE_MISSES);
    out->remote_errors = sum(stats, PROGCACHE__REMOTE_ERRORS);
    out->remote_stores = sum(stats, PROGCACHE__REMOTE_STORES);
    out->remote_rejected = sum(stats, PROGCACHE__REMOTE_REJECTED);
    out->names_learned = sum(stats, PROGCACHE__NAMES_LEARNED);
    out->remote_timeouts = sum(stats, PROGCACHE__REMOTE_TIMEOUTS);
    out->remote_backoffs = sum(stats, PROGCACHE__REMOTE_BACKOFFS);
    out->remote_store_errors = sum(stats, PROGCACHE__REMOTE_STORE_ERRORS);
    out->remote_dropped = sum(stats, PROGCACHE__REMOTE_DROPPED);
    out->remote_newer = sum(stats, PROGCACHE__REMOTE_NEWER);
    out->remote_too_large = sum(stats, PROGCACHE__REMOTE_TOO_LARGE);
    out->remote_bad_tag = sum(stats, PROGCACHE__REMOTE_BAD_TAG);
    out->remote_waits = sum(stats, PROGCACHE__REMOTE_WAITS);
    out->wait_timeouts = sum(stats, PROGCACHE__WAIT_TIMEOUTS);
    out->remote_takeovers = sum(stats, PROGCACHE__REMOTE_TAKEOVERS);
    out->pch_hits = sum(stats, PROGCACHE__PCH_HITS);
    out->pch_misses = sum(stats, PROGCACHE__PCH_MISSES);
    out->pch_created = sum(stats, PROGCACHE__PCH_CREATED);
    out->pch_rejected = sum(stats, PROGCACHE__PCH_REJECTED);
    out->pch_ms_saved = sum(stats, PROGCACHE__PCH_MS_SAVED);
    out->pch_fallbacks = sum(stats, PROGCACHE__PCH_FALLBACKS);
    /* i20nfs */
    out->sidecar_seals = sum(stats, PROGCACHE__SIDECAR_SEALS);
    out->flight_leases = sum(stats, PROGCACHE__FLIGHT_LEASES);
    out->flight_takeovers = sum(stats, PROGCACHE__FLIGHT_TAKEOVERS);
    /* i20cap */
    out->lock_failures = sum(stats, PROGCACHE__LOCK_FAILURES);
    out->lock_fallbacks = sum(stats, PROGCACHE__LOCK_FALLBACKS);
    out->other_writer_rescans = sum(stats, PROGCACHE__OTHER_WRITER_RESCANS);
    out->other_writer_bytes = sum(stats, PROGCACHE__OTHER_WRITER_BYTES);
    out->remote_over_bound = sum(stats, PROGCACHE__REMOTE_OVER_BOUND);
    out->remote_deadlines = sum(stats, PROGCACHE__REMOTE_DEADLINES);
    out->nvrtc_key_loads = sum(stats, PROGCACHE__NVRTC_KEY_LOADS);
    out->nvrtc_missing = sum(stats, PROGCACHE__NVRTC_MISSING);
    /* i20perm */
    out->foreign_not_stored = sum(stats, PROGCACHE__FOREIGN_NOT_STORED);
    out->modes_fixed = sum(stats, PROGCACHE__MODES_FIXED);
    out->files_refused = sum(stats, PROGCACHE__FILES_REFUSED);
    out->pch_deferred = sum(stats, PROGCACHE__PCH_DEFERRED);
    out->pch_warm = sum(stats, PROGCACHE__PCH_WARM);
    out->pch_warm_failures = sum(stats, PROGCACHE__PCH_WARM_FAILURES);
    out->links_refused = sum(stats, PROGCACHE__LINKS_REFUSED); /* i29-paths */
    /* i29-trust */
    out->records_untrusted = sum(stats, PROGCACHE__RECORDS_UNTRUSTED);
    out->entries_untrusted = sum(stats, PROGCACHE__ENTRIES_UNTRUSTED);
    /* i30-exec */
    out->intercept_compiles = sum(stats, PROGCACHE__INTERCEPT_COMPILES);
    out->intercept_hits = sum(stats, PROGCACHE__INTERCEPT_HITS);
    out->intercept_misses = sum(stats, PROGCACHE__INTERCEPT_MISSES);
    out->intercept_pass_options = sum(stats, PROGCACHE__INTERCEPT_PASS_OPTIONS);
    out->intercept_pass_headers = sum(stats, PROGCACHE__INTERCEPT_PASS_HEADERS);
    out->intercept_pass_callback = sum(stats, PROGCACHE__INTERCEPT_PASS_CALLBACK);
    out->intercept_pass_other = sum(stats, PROGCACHE__INTERCEPT_PASS_OTHER);
    out->intercept_real_programs = sum(stats, PROGCACHE__INTERCEPT_REAL_PROGRAMS);
    out->intercept_failed = sum(stats, PROGCACHE__INTERCEPT_FAILED);
    /* i30-soname */
    out->intercept_standin_hits = sum(stats, PROGCACHE__INTERCEPT_STANDIN_HITS);
    out->intercept_standin_loads = sum(stats, PROGCACHE__INTERCEPT_STANDIN_LOADS);
    out->intercept_standin_version_loads = sum(stats, PROGCACHE__INTERCEPT_STANDIN_VERSION_LOADS);
    out->intercept_standin_refused = sum(stats, PROGCACHE__INTERCEPT_STANDIN_REFUSED);
    /* i32-scale */
    out->shards_rescanned = sum(stats, PROGCACHE__SHARDS_RESCANNED);
    out->evict_steps = sum(stats, PROGCACHE__EVICT_STEPS);
    out->evict_step_entries = sum(stats, PROGCACHE__EVICT_STEP_ENTRIES);
    out->state_seeds = sum(stats, PROGCACHE__STATE_SEEDS);
    /* i34-remote */
    out->tier_backoffs = sum(stats, PROGCACHE__TIER_BACKOFFS);
    out->tier_skipped = sum(stats, PROGCACHE__TIER_SKIPPED);
    out->remote_files_refused = sum(stats, PROGCACHE__REMOTE_FILES_REFUSED);
    /* i35-explain */
    out->explain_made = sum(stats, PROGCACHE__EXPLAIN_MADE);
    out->explain_records = sum(stats, PROGCACHE__EXPLAIN_RECORDS);
    out->explain_refused = sum(stats, PROGCACHE__EXPLAIN_REFUSED);
    out->entries_resealed = sum(stats, PROGCACHE__ENTRIES_RESEALED);
    out->max_size = __atomic_load_n(&stats->map->header.max_size, __ATOMIC_RELAXED);
    out->since = __atomic_load_n(&stats->map->header.since, __ATOMIC_RELAXED);
}

int progcache__stats_zero(progcache__stats *stats)
{
    if (!stats || !stats->writable)
        return progcache__error(PROGCACHE_EINVAL,
                                "cannot reset statistics: the cache was opened read-only or "
                                "its statistics file could not be opened for writing");
    for (unsigned s = 0; s < STATS_SLOTS; s++)
        for (unsigned c = 0; c < PROGCACHE__COUNTERS_PER_SLOT; c++)
            __atomic_store_n(&stats->map->slot[s][c], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&stats->map->header.since, (int64_t)time(NULL), __ATOMIC_RELAXED);
    return PROGCACHE_OK;
}
