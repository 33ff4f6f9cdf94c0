/* Other writers (docs/FORMAT.md, "Other writers: the drift bound"): what
 * cuda.core and the like store goes through tmp/, so a change of tmp/ means
 * another program wrote, and the shards whose directory changed since they
 * were measured are measured again: O(what changed). A put's own write
 * records its shard's new look, so that progcache's own puts are never
 * caught up with. A catch-up is whole here (a read-only open, prune) or
 * spread over puts in bounded slices (file_catch_up.c). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store/file/file_stats.h"
#include "store/file/file_store.h"

/* A change of tmp/ (or of a shard) shows as a new change time (every
 * create, rename and unlink in it sets it) or a new inode (made again).
 * One made within the settle time is not trusted: timestamps have a
 * granularity, and a second write in the same tick would not change them.
 * Locally that is the kernel's tick (at most 10 ms), hence 20 ms; over a
 * network file system the server's, up to a second or more, hence 2 s. */
#define SETTLE_LOCAL_NS 20000000ll
#define SETTLE_NETWORK_NS 2000000000ll

/* shard_seen's mark of a look that the change time alone cannot vouch
 * for: a put's own record (below), or a measurement of a shard that had
 * changed within the settle time. Plain looks never carry it. */
#define SEEN_OWN 4ull

static int64_t settle_ns(const file_store *fs)
{
    return fs->network_fs ? SETTLE_NETWORK_NS : SETTLE_LOCAL_NS;
}

static int64_t ctime_ns(const struct stat *st)
{
    return (int64_t)st->st_ctim.tv_sec * 1000000000ll + (int64_t)st->st_ctim.tv_nsec;
}

/* A directory's inode and change time, mixed: never 0 (unknown) nor 1
 * (missing), and without SEEN_OWN. */
static uint64_t mix(const struct stat *st)
{
    uint64_t x = (uint64_t)st->st_ino * 0x9e3779b97f4a7c15ull;
    x ^= (uint64_t)ctime_ns(st);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return (x | 2) & ~SEEN_OWN;
}

static int is_recent(const file_store *fs, int64_t ctime)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000000ll + now.tv_nsec - ctime < settle_ns(fs);
}

/* What a directory looks like now: its mix (1 when missing) and change
 * time (0 when missing). */
static uint64_t look(file_store *fs, const char *rel, int64_t *ctime)
{
    struct stat st;
    *ctime = 0;
    if (fstatat(fs->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 1; /* missing: nothing written through it */
    *ctime = ctime_ns(&st);
    return mix(&st);
}

/* A directory's fingerprint: 1 when it is missing, 0 when it changed too
 * recently to be trusted, else its inode and change time mixed. */
static uint64_t dir_fingerprint(file_store *fs, const char *rel)
{
    int64_t ctime;
    uint64_t x = look(fs, rel, &ctime);
    return x != 1 && is_recent(fs, ctime) ? 0 : x;
}

/* Whether a shard whose look matches a put's own record (SEEN_OWN) can be
 * trusted, tmp/ having last changed at tmp_ctime (0: no tmp/). Another
 * program's rename into the shard within the timestamp tick of that put's
 * look after its rename would leave the change time as recorded; such a
 * rename changes tmp/ too, at that tick. So the record is trusted only
 * when tmp/'s last change is more than the settle time away from it
 * (FORMAT.md, "Other writers": what this leaves open). */
static int own_trusted(const file_store *fs, int64_t shard_ctime, int64_t tmp_ctime)
{
    int64_t d = tmp_ctime - shard_ctime;
    return !tmp_ctime || d >= settle_ns(fs) || -d >= settle_ns(fs);
}

void progcache__file_own_write_begin(file_store *fs, int shard, int shard_fd,
                                     file_own_write *w)
{
    w->ok = 0;
    struct stat st;
    if (!fs->state_shared || !__atomic_load_n(&fs->state->seeded, __ATOMIC_ACQUIRE) ||
        fstat(shard_fd, &st) != 0)
        return;
    uint64_t was = __atomic_load_n(&fs->state->shard_seen[shard], __ATOMIC_RELAXED);
    w->tmp = look(fs, "tmp", &w->tmp_ctime);
    /* Clean: measured (and settled then) or recorded by a put, and not
     * changed since. */
    if (!was || (was & ~SEEN_OWN) != mix(&st) ||
        ((was & SEEN_OWN) && !own_trusted(fs, ctime_ns(&st), w->tmp_ctime)))
        return;
    w->before = was;
    w->ok = 1;
}

void progcache__file_own_write_end(file_store *fs, int shard, int shard_fd,
                                   const file_own_write *w)
{
    struct stat st;
    int64_t tmp_ctime;
    /* tmp/ unchanged around the rename: no other program renamed out of
     * it meanwhile (to the timestamp tick: own_trusted covers the rest). */
    if (!w->ok || fstat(shard_fd, &st) != 0 || look(fs, "tmp", &tmp_ctime) != w->tmp)
        return;
    uint64_t expected = w->before;
    /* Fails when a scan measured the shard meanwhile: then its record
     * stands (the shard is measured again next time, as before). */
    (void)__atomic_compare_exchange_n(&fs->state->shard_seen[shard], &expected,
                                      mix(&st) | SEEN_OWN, 0, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED);
}

uint64_t progcache__file_tmp_fingerprint(file_store *fs)
{
    return dir_fingerprint(fs, "tmp");
}

uint64_t progcache__file_shard_fingerprint(file_store *fs, int shard)
{
    char rel[16];
    int64_t ctime;
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    uint64_t x = look(fs, rel, &ctime);
    /* Too recent to trust alone: marked, and trusted as a put's own
     * record is (own_trusted), so that the shards a catch-up measured
     * right after another program wrote are not measured again by every
     * put until they settle. */
    return x != 1 && is_recent(fs, ctime) ? x | SEEN_OWN : x;
}

int progcache__file_others_wrote(file_store *fs)
{
    uint64_t seen = __atomic_load_n(&fs->state->tmp_seen, __ATOMIC_RELAXED);
    /* (A catch-up under way has not counted all they wrote yet.) */
    return seen == 0 || seen != progcache__file_tmp_fingerprint(fs) ||
           __atomic_load_n(&fs->state->round_active, __ATOMIC_RELAXED);
}

int64_t progcache__file_tmp_ctime(file_store *fs)
{
    int64_t ctime;
    (void)look(fs, "tmp", &ctime);
    return ctime;
}

int progcache__file_shard_changed(file_store *fs, int shard, int64_t tmp_ctime)
{
    char rel[16];
    int64_t ctime;
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    uint64_t now = look(fs, rel, &ctime);
    uint64_t was = __atomic_load_n(&fs->state->shard_seen[shard], __ATOMIC_RELAXED);
    if (was && !(was & SEEN_OWN) && was == now && (now == 1 || !is_recent(fs, ctime)))
        return 0; /* unchanged since it was measured */
    if ((was & SEEN_OWN) && (was & ~SEEN_OWN) == now && own_trusted(fs, ctime, tmp_ctime))
        return 0; /* changed by progcache's own puts alone */
    return 1;
}

void progcache__file_catch_up(file_store *fs, int locked, int count_stats)
{
    uint64_t seen = progcache__file_tmp_fingerprint(fs);
    int64_t tmp_ctime = progcache__file_tmp_ctime(fs);
    uint64_t unseen = 0, measured = 0;
    for (int shard = 0; shard < FILE_SHARDS; shard++) {
        if (!progcache__file_shard_changed(fs, shard, tmp_ctime))
            continue;
        unseen += (uint64_t)progcache__file_measure_shard(fs, shard, locked);
        measured++;
    }
    __atomic_store_n(&fs->state->tmp_seen, seen, __ATOMIC_RELAXED);
    /* Whole: it covers what a catch-up spread over puts had left, whose
     * slices in progcache/shards/next are of shards measured since (they
     * start afresh when next needed: file_shard_slice.c). */
    if (locked && __atomic_exchange_n(&fs->state->round_active, 0, __ATOMIC_RELAXED)) {
        /* (what its slices found, counted as its end would have) */
        progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_BYTES,
                             fs->state->round_unseen);
        progcache__stats_add(fs->stats, PROGCACHE__SHARDS_RESCANNED,
                             fs->state->round_measured);
    }
    if (count_stats) {
        progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_RESCANS, 1);
        progcache__stats_add(fs->stats, PROGCACHE__OTHER_WRITER_BYTES, unseen);
        progcache__stats_add(fs->stats, PROGCACHE__SHARDS_RESCANNED, measured);
    }
}
