/* Eviction: when a put takes the total over the cap, one process (flock on
 * progcache/lock; others skip) scans the shards, re-measures the counters,
 * and evicts least recently used entries (oldest atime) until the total is
 * at the low-water mark. Evicting in a batch to a mark below the cap is
 * what keeps puts fast with a full cache: one scan pays for many puts,
 * where cuda.core rescans every entry on every put over the cap. Prune is
 * the same pass with bounds given by hand.
 *
 * An entry is evicted by renaming it into progcache/tmp/ first and checking that the
 * file moved is the one the scan saw (inode, size, mtime, atime): a file
 * another process replaced or read since the scan is put back, so eviction
 * never deletes fresh work. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "error.h"
#include "fs.h"
#include "lru.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

/* ---- eviction ---------------------------------------------------------- */

typedef struct {
    progcache__lru_item lru; /* first: atime and size, for util/lru.c */
    struct timespec mtime;
    ino_t ino;
    unsigned char shard;
    char name[63];
} candidate;

typedef struct {
    candidate *items;
    size_t len, cap;
    int failed; /* out of memory */
    file_shard_sum sum;
} candidate_list;

static int collect(void *ctx, int shard, const char *name, const struct stat *st)
{
    candidate_list *list = ctx;
    list->sum.bytes += st->st_size;
    list->sum.count++;
    if (list->len == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 1024;
        candidate *items = progcache__realloc(list->items, cap * sizeof *items);
        if (!items) {
            list->failed = 1;
            return 1;
        }
        list->items = items;
        list->cap = cap;
    }
    candidate *c = &list->items[list->len++];
    c->lru.atime = st->st_atim;
    c->mtime = st->st_mtim;
    c->lru.size = (uint64_t)st->st_size;
    c->ino = st->st_ino;
    c->shard = (unsigned char)shard;
    strcpy(c->name, name);
    return 0;
}

static int same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int progcache__file_remove_if_same(file_store *fs, int shard, const char *name,
                                   const struct stat *seen, int check_atime)
{
    char shard_rel[16];
    snprintf(shard_rel, sizeof shard_rel, "entries/%02x", shard);
    int shard_fd = progcache__file_dir(fs, shard_rel);
    if (shard_fd < 0)
        return 0;
    int tmp_fd = progcache__file_open_tmp(fs);
    char moved[64];
    int gone = 0;
    /* Move the entry aside under a fresh name (never over another file). */
    if (tmp_fd < 0 ||
        progcache__fs_rename_aside(shard_fd, name, tmp_fd, "evict-", moved, sizeof moved) != 0) {
        gone = tmp_fd >= 0 && errno == ENOENT; /* someone else removed it */
        goto done;
    }
    struct stat st;
    /* The inode number, where it survives the move: on a network file
     * system the move may be a link and an unlink (no RENAME_NOREPLACE:
     * sshfs), and a link there may get a new number. */
    if (fstatat(tmp_fd, moved, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (st.st_ino == seen->st_ino || fs->network_fs) &&
        st.st_size == seen->st_size && same_time(st.st_mtim, seen->st_mtim) &&
        (!check_atime || same_time(st.st_atim, seen->st_atim))) {
        gone = 1;
        progcache__file_account(fs, shard, -(int64_t)st.st_size, -1);
        char entry[FILE_NAME_LEN];
        snprintf(entry, 3, "%02x", shard);
        memcpy(entry + 2, name, FILE_NAME_LEN - 2);
        progcache__file_sidecar_forget(fs, entry);
    } else {
        /* Replaced or read since it was seen: put it back, unless an even
         * newer entry has landed there meanwhile (link never overwrites). */
        (void)progcache__fs_linkat(tmp_fd, moved, shard_fd, name);
    }
    (void)unlinkat(tmp_fd, moved, 0);
done:
    if (tmp_fd >= 0)
        close(tmp_fd);
    close(shard_fd);
    return gone;
}

/* Entries this process evicted (test hook: progcache__file_entries_evicted). */
static uint64_t entries_evicted;

uint64_t progcache__file_entries_evicted(void)
{
    return __atomic_load_n(&entries_evicted, __ATOMIC_RELAXED);
}

/* Evict one candidate; returns 1 if its bytes are gone. */
static int evict_one(file_store *fs, const candidate *c)
{
    struct stat seen;
    memset(&seen, 0, sizeof seen);
    seen.st_ino = c->ino;
    seen.st_size = (off_t)c->lru.size;
    seen.st_mtim = c->mtime;
    seen.st_atim = c->lru.atime;
    int gone = progcache__file_remove_if_same(fs, c->shard, c->name, &seen, 1);
    if (gone)
        __atomic_add_fetch(&entries_evicted, 1, __ATOMIC_RELAXED);
    return gone;
}

/* How a pass was started (flags of evict_pass). */
#define PASS_LOCKED 0x1u /* the cross-process lock is held: counters by delta */
#define PASS_OTHERS 0x2u /* another program wrote: count what the scan finds */
/* A put's pass: removals bounded as a step's (progcache__file_evict_max,
 * progcache__file_evict_ms), the rest left to later puts; prune's are not. */
#define PASS_BOUNDED 0x4u
/* What evict_pass's removals need: the store, and the progress; with
 * bounded, the removals made and when the first was. */
typedef struct evict_ctx {
    file_store *fs;
    uint64_t freed;
    size_t planned;
    progcache_progress_fn progress;
    void *ctx;
    int rc;
    int bounded;
    size_t done;
    double first;
} evict_ctx;

static int evict_visit(void *ctx, void *item, size_t i)
{
    evict_ctx *e = ctx;
    const candidate *c = item;
    int r = 0;
    if (evict_one(e->fs, c)) {
        e->freed += c->lru.size;
        r = PROGCACHE__LRU_GONE;
        if (!e->done++)
            e->first = progcache__clock_ms(); /* the budget counts removals, not the scan */
    }
    /* A put waits on one batch of removals, as on a step's (issue 32). */
    if (e->bounded && e->done &&
        (e->done >= progcache__file_evict_max ||
         progcache__clock_ms() - e->first > progcache__file_evict_ms))
        r |= PROGCACHE__LRU_STOP;
    if (e->progress &&
        (e->rc = e->progress(e->ctx, "removing", i + 1, e->planned > i ? e->planned : i + 1)))
        r |= PROGCACHE__LRU_STOP;
    return r;
}

/* One pass: scan and re-measure; then, if the total is over trigger or an
 * age bound is set, evict oldest first while the total is over target or
 * the entry was last used before atime_cutoff (0: no age bound). The
 * decision is the scan's own total, never the counters, so a pass without
 * the cross-process lock (a file system that refuses locks) keeps the cap
 * as well as one with it. The caller holds evict_mutex, and the lock when
 * PASS_LOCKED. PROGCACHE_OK or PROGCACHE_ENOMEM. */
static int evict_pass(file_store *fs, unsigned pass, uint64_t trigger, uint64_t target,
                      int64_t atime_cutoff, uint64_t *removed, uint64_t *removed_bytes,
                      progcache_progress_fn progress, void *ctx)
{
    int rc = PROGCACHE_OK;
    double started = progcache__clock_ms();
    candidate_list list = {0};
    uint64_t total = 0, unseen = 0;
    /* Before the scan: a write another program makes during it shows as a
     * change at the next put. */
    uint64_t tmp_seen = progcache__file_tmp_fingerprint(fs);
    if (!(pass & PASS_LOCKED))
        progcache__stats_add(fs->stats, PROGCACHE__LOCK_FALLBACKS, 1);
    for (int shard = 0; shard < FILE_SHARDS && !list.failed; shard++) {
        uint64_t seen = progcache__file_shard_fingerprint(fs, shard);
        int64_t b = __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
        int64_t c = __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
        list.sum.bytes = list.sum.count = 0;
        progcache__file_scan_shard(fs, shard, collect, &list);
        if (!list.failed) {
            unseen += (uint64_t)progcache__file_remeasure_shard(fs, shard, &list.sum, b, c,
                                                                pass & PASS_LOCKED);
            __atomic_store_n(&fs->state->shard_seen[shard], seen, __ATOMIC_RELAXED);
        }
        total += (uint64_t)list.sum.bytes;
        if (progress && (rc = progress(ctx, "scanning", (uint64_t)shard + 1, FILE_SHARDS)))
            goto done;
    }
    if (!list.failed)
        __atomic_store_n(&fs->state->tmp_seen, tmp_seen, __ATOMIC_RELAXED);
    __atomic_store_n(&fs->state->seeded, 1, __ATOMIC_RELEASE);
    if (pass & PASS_OTHERS) {
        progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_RESCANS, 1);
        progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_BYTES, unseen);
    }
    if (list.failed) {
        progcache__file_log(fs, PROGCACHE_LOG_WARN, "eviction skipped in %s: out of memory",
                            fs->root);
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing the entries of %s",
                              fs->root);
        goto done;
    }
    if (total <= trigger && !atime_cutoff)
        goto done;
    progcache__lru_sort(list.items, list.len, sizeof *list.items);
    evict_ctx e = {fs, 0, 0, progress, ctx, PROGCACHE_OK, !!(pass & PASS_BOUNDED), 0, 0};
    if (progress) /* how many are removed when nothing changes meanwhile */
        e.planned =
            progcache__lru_planned(list.items, list.len, sizeof *list.items, total, target,
                                   atime_cutoff);
    size_t evicted = progcache__lru_evict(list.items, list.len, sizeof *list.items, &total,
                                          target, atime_cutoff, evict_visit, &e);
    uint64_t freed = e.freed;
    rc = e.rc;
    progcache__stats_add(fs->stats, PROGCACHE__EVICTIONS, evicted);
    progcache__stats_add(fs->stats, PROGCACHE__EVICTED_BYTES, freed);
    if (removed)
        *removed = evicted;
    if (removed_bytes)
        *removed_bytes = freed;
    progcache__file_log(fs, PROGCACHE_LOG_INFO,
                        "evicted %zu entries (%llu bytes) from %s in %lld ms", evicted,
                        (unsigned long long)freed, fs->root,
                        (long long)(progcache__clock_ms() - started));
done:
    progcache__free(list.items);
    return rc;
}

uint64_t progcache__file_evict_batch = 4096;
uint64_t progcache__file_evict_max = 64;
double progcache__file_evict_ms = 10;

/* A bounded step of eviction (issue 32): shards in turn from the shared
 * cursor, each scanned, re-measured and relieved of its least recently
 * used entries (at most the share the low-water mark asks of every entry:
 * 10% by default, at least one), until the total is at the low-water mark
 * or progcache__file_evict_batch entries have been examined or
 * progcache__file_evict_max evicted, or progcache__file_evict_ms spent
 * removing since the first removal (an unlink costs 0.2-13 ms on a busy ext4 disk: at a
 * million entries the removals, ~420 of them, were most of a 2 s step;
 * issue 32). Names are
 * hashes, so every shard holds a like share of every age: oldest-first
 * within the shards in turn approximates the global order, and no put
 * waits on more than one batch. The caller holds evict_mutex and the
 * lock. */
static void evict_step(file_store *fs)
{
    double started = progcache__clock_ms(), first = 0;
    uint64_t bytes, count, examined = 0, freed = 0;
    size_t evicted = 0;
    candidate_list list = {0};
    progcache__file_totals(fs, &bytes, &count); /* seeded: takes no lock */
    uint64_t spare = fs->max_size - fs->low_water;
    for (int n = 0; n < FILE_SHARDS && bytes > fs->low_water &&
                    examined < progcache__file_evict_batch &&
                    evicted < progcache__file_evict_max &&
                    !(evicted && progcache__clock_ms() - first > progcache__file_evict_ms);
         n++) {
        int shard = (int)(__atomic_fetch_add(&fs->state->evict_cursor, 1, __ATOMIC_RELAXED) %
                          FILE_SHARDS);
        uint64_t seen = progcache__file_shard_fingerprint(fs, shard);
        int64_t b = __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
        int64_t c = __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
        list.len = 0;
        list.sum.bytes = list.sum.count = 0;
        progcache__file_scan_shard(fs, shard, collect, &list);
        if (list.failed)
            break;
        progcache__file_remeasure_shard(fs, shard, &list.sum, b, c, 1);
        __atomic_store_n(&fs->state->shard_seen[shard], seen, __ATOMIC_RELAXED);
        examined += list.len;
        progcache__file_totals(fs, &bytes, &count);
        size_t quota = fs->max_size ? (size_t)((double)list.len * (double)spare /
                                               (double)fs->max_size)
                                    : 0;
        if (!quota)
            quota = 1;
        progcache__lru_sort(list.items, list.len, sizeof *list.items);
        for (size_t i = 0; i < list.len && i < quota && bytes > fs->low_water &&
                           evicted < progcache__file_evict_max &&
                           !(evicted && progcache__clock_ms() - first > progcache__file_evict_ms);
             i++)
            if (evict_one(fs, &list.items[i])) {
                if (!evicted)
                    first = progcache__clock_ms(); /* the budget counts removals, not the scan */
                bytes -= list.items[i].lru.size;
                freed += list.items[i].lru.size;
                evicted++;
            }
    }
    progcache__free(list.items);
    progcache__stats_add(fs->stats, PROGCACHE__EVICTIONS, evicted);
    progcache__stats_add(fs->stats, PROGCACHE__EVICTED_BYTES, freed);
    progcache__stats_add(fs->stats, PROGCACHE__EVICT_STEPS, 1);
    progcache__stats_add(fs->stats, PROGCACHE__EVICT_STEP_ENTRIES, examined);
    progcache__file_log(fs, PROGCACHE_LOG_INFO,
                        "evicted %zu entries (%llu bytes) from %s in %lld ms (a step: %llu "
                        "entries examined)",
                        evicted, (unsigned long long)freed, fs->root,
                        (long long)(progcache__clock_ms() - started), (unsigned long long)examined);
}

int progcache__file_evict_if_needed(file_store *fs)
{
    uint64_t bytes, count;
    progcache__file_totals(fs, &bytes, &count);
    if (!fs->max_size)
        return PROGCACHE_OK;
    /* What other programs (cuda.core) store is in no counter of ours: a
     * change of tmp/, through which they write, makes this put measure
     * the directory (docs/FORMAT.md, "Other writers"). */
    int others = progcache__file_others_wrote(fs);
    if (bytes <= fs->max_size && !others)
        return PROGCACHE_OK;
    /* One evictor at a time, in this process and on this host; the others
     * go on with their puts rather than queue behind a scan, unless the
     * total is past the cap by more than the low-water spare: then they
     * wait for the running pass or step (one batch) and run their own, so
     * that cap + spare holds however the writers are scheduled (FORMAT.md,
     * "Bounded steps"). */
    int far = bytes > fs->max_size + (fs->max_size - fs->low_water);
    if (far)
        pthread_mutex_lock(&fs->evict_mutex);
    else if (pthread_mutex_trylock(&fs->evict_mutex) != 0)
        return PROGCACHE_OK;
    unsigned pass = 0;
    if (fs->lock_fd >= 0) {
        if (progcache__fs_flock(fs->lock_fd, LOCK_EX | LOCK_NB) == 0 ||
            (far && errno == EWOULDBLOCK && progcache__fs_flock(fs->lock_fd, LOCK_EX) == 0)) {
            pass = PASS_LOCKED;
        } else if (!progcache__fs_lock_unsupported(errno)) {
            pthread_mutex_unlock(&fs->evict_mutex); /* another process is at it */
            return PROGCACHE_OK;
        } else {
            /* The file system cannot lock: every put over the cap
             * measures and evicts by itself, as if it were alone. */
            progcache__file_lock_failed(fs, errno);
        }
    }
    if (pass & PASS_LOCKED) { /* another process may have done it while we looked */
        progcache__file_totals(fs, &bytes, &count);
        others = progcache__file_others_wrote(fs);
    }
    if (bytes > fs->max_size || others) {
        /* (Once a catch-up, not at each of its slices.) */
        if (bytes > fs->max_size || !__atomic_load_n(&fs->state->round_active, __ATOMIC_RELAXED))
            progcache__file_sweep_tmp(fs, 1);
        if (others && (pass & PASS_LOCKED)) {
            /* Only the shards whose directory changed since they were
             * measured: O(what was written), not O(the directory); and
             * of that, one slice per put (file_catch_up.c). */
            progcache__file_catch_up_step(fs);
            progcache__file_totals(fs, &bytes, &count);
            others = 0;
        }
        /* Many entries: a bounded step, the rest in later puts. Without
         * the lock a pass decides by its own scan (FORMAT.md). */
        if (!others && bytes > fs->max_size && (pass & PASS_LOCKED) &&
            count > progcache__file_evict_batch)
            evict_step(fs);
        else if (bytes > fs->max_size || others)
            (void)evict_pass(fs, pass | PASS_BOUNDED | (others ? PASS_OTHERS : 0),
                             fs->max_size, fs->low_water, 0, NULL, NULL, NULL, NULL);
    }
    progcache__file_unlock(fs);
    return PROGCACHE_OK;
}

int progcache__file_prune(file_store *fs, uint64_t max_bytes, int64_t atime_cutoff,
                          uint64_t *removed, uint64_t *removed_bytes,
                          progcache_progress_fn progress, void *ctx)
{
    *removed = *removed_bytes = 0;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__file_refuse_write(fs, "prune");
    unsigned pass = progcache__file_lock(fs) ? PASS_LOCKED : 0;
    progcache__file_sweep_tmp(fs, 1);
    /* (Seeded: totals would take the lock we hold to seed.) */
    if ((pass & PASS_LOCKED) && !atime_cutoff &&
        __atomic_load_n(&fs->state->seeded, __ATOMIC_ACQUIRE)) {
        /* Under the cap by the counters (caught up with other writers):
         * nothing to remove, and no scan to find that out. */
        uint64_t bytes, count;
        if (progcache__file_others_wrote(fs))
            progcache__file_catch_up(fs, 1, 1);
        progcache__file_totals(fs, &bytes, &count);
        if (bytes <= max_bytes) {
            progcache__file_unlock(fs);
            return PROGCACHE_OK;
        }
    }
    int rc = evict_pass(fs, pass, max_bytes, max_bytes, atime_cutoff, removed, removed_bytes,
                        progress, ctx);
    progcache__file_unlock(fs);
    return rc;
}
