/* The file store's size accounting and eviction.
 *
 * Accounting: per-shard byte and entry counters in progcache/state, a file
 * every process maps shared and updates with atomic adds. Opening reads
 * nothing else, so open is O(1) at any size; the first call that needs
 * totals on a directory progcache has never seen (one cuda.core wrote, say)
 * seeds the counters with one scan, once per directory.
 *
 * Eviction: when a put takes the total over the cap, one process (flock on
 * progcache/lock; others skip) scans the shards, re-measures the counters,
 * and evicts least recently used entries (oldest atime) until the total is
 * at the low-water mark. Evicting in a batch to a mark below the cap is
 * what keeps puts fast with a full cache: one scan pays for many puts,
 * where cuda.core rescans every entry on every put over the cap.
 *
 * An entry is evicted by renaming it into tmp/ first and checking that the
 * file moved is the one the scan saw (inode, size, mtime, atime): a file
 * another process replaced or read since the scan is put back, so eviction
 * never deletes fresh work. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "fs.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

#define STATE_MAGIC "PCSTATE1"
#define STATE_VERSION 1
#define TMP_STALE_SECONDS 3600

/* ---- the shared state file --------------------------------------------- */

static int state_is_valid(const file_state *st)
{
    return memcmp(st->magic, STATE_MAGIC, 8) == 0 && st->version == STATE_VERSION;
}

/* Publish a fresh state file without clobbering one another process
 * published first: write it under a temp name, then link (which fails if
 * the name exists) or, for replacing an invalid one, rename. */
static int create_state(file_store *fs, int replace)
{
    int dirfd = progcache__fs_open_dir(fs->root_fd, FILE_STATE_DIR);
    if (dirfd < 0)
        return -1;
    file_state fresh;
    memset(&fresh, 0, sizeof fresh);
    memcpy(fresh.magic, STATE_MAGIC, 8);
    fresh.version = STATE_VERSION;
    char name[64];
    int rc = -1;
    int fd = progcache__fs_create_temp(dirfd, "state-", 0666, name, sizeof name);
    if (fd < 0)
        goto done;
    int ok = progcache__fs_write_full(fd, &fresh, sizeof fresh) == 0;
    close(fd);
    if (ok) {
        if (replace)
            ok = progcache__fs_renameat(dirfd, name, dirfd, "state") == 0;
        else
            ok = progcache__fs_linkat(dirfd, name, dirfd, "state") == 0 || errno == EEXIST;
    }
    int saved = errno;
    (void)unlinkat(dirfd, name, 0);
    errno = saved;
    rc = ok ? 0 : -1;
done:
    saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

/* Map progcache/state, creating it if missing. NULL with errno on failure;
 * PROGCACHE__FS_ENOTREG (and *mode set) when something other than a
 * regular file is there: that is left alone, never replaced. */
static file_state *map_state(file_store *fs, mode_t *mode)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct stat st;
        int fd = progcache__fs_open_regular(fs->root_fd, FILE_STATE_DIR "/state", O_RDWR, 0, &st);
        if (fd < 0) {
            *mode = st.st_mode;
            if (errno != ENOENT || create_state(fs, 0) != 0)
                return NULL;
            continue;
        }
        void *map = MAP_FAILED;
        if (st.st_size == (off_t)sizeof(file_state)) {
            map = mmap(NULL, sizeof(file_state), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_POPULATE, fd, 0);
            if (map == MAP_FAILED) {
                /* A file system that cannot map it: replacing the file
                 * would not help, and the real reason is mmap's. */
                int saved = errno;
                close(fd);
                errno = saved;
                return NULL;
            }
        }
        int saved = errno;
        close(fd);
        if (map != MAP_FAILED && state_is_valid(map))
            return map;
        if (map != MAP_FAILED)
            munmap(map, sizeof(file_state));
        /* Wrong size or magic: another version or damage. Counters are
         * only a cache of the directory's truth, so start afresh. */
        errno = saved;
        if (create_state(fs, 1) != 0)
            return NULL;
    }
    /* Replaced three times and still not ours: another process keeps
     * writing something else there. */
    errno = EAGAIN;
    return NULL;
}

/* Why the file rel of progcache/ cannot be used, for the log: its type
 * when it is not a regular file, else errno's text. */
static void describe(char *out, size_t len, int errnum, mode_t mode)
{
    if (errnum == PROGCACHE__FS_ENOTREG)
        snprintf(out, len, "it is %s, not a regular file (remove it)",
                 progcache__fs_type_name(mode));
    else
        progcache__fs_strerror(out, len, errnum);
}

int progcache__file_state_open(file_store *fs)
{
    char why[160];
    if (!(fs->flags & PROGCACHE_FILE_READONLY)) {
        /* The lock and the shared counters make a cache better, not
         * usable: without them it works (the counters private to this
         * process, seeded by a scan; evictions not coordinated across
         * processes, which progcache__file_remove_if_same keeps safe) and
         * says so. */
        struct stat st;
        fs->lock_fd = progcache__fs_open_regular(fs->root_fd, FILE_STATE_DIR "/lock",
                                                 O_RDWR | O_CREAT, 0666, &st);
        if (fs->lock_fd < 0) {
            describe(why, sizeof why, errno, st.st_mode);
            progcache__file_log(fs, PROGCACHE_LOG_WARN,
                                "cannot use %s/" FILE_STATE_DIR "/lock: %s; evictions by "
                                "several processes are not coordinated",
                                fs->root, why);
        }
        mode_t mode = 0;
        fs->state = map_state(fs, &mode);
        if (fs->state) {
            fs->state_shared = 1;
            return PROGCACHE_OK;
        }
        describe(why, sizeof why, errno, mode);
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "cannot use %s/" FILE_STATE_DIR "/state: %s; sizes are counted by "
                            "this process alone (one scan when first needed)",
                            fs->root, why);
    }
    /* Read-only, or no shared state: nothing can change through us, or
     * only our own changes are seen, so private counters seeded by one scan
     * when first asked are exact enough. */
    fs->state = progcache__calloc(1, sizeof(file_state));
    if (!fs->state)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory opening %s", fs->root);
    fs->state_shared = 0;
    return PROGCACHE_OK;
}

void progcache__file_state_close(file_store *fs)
{
    if (!fs->state)
        return;
    if (fs->state_shared)
        munmap(fs->state, sizeof(file_state));
    else
        progcache__free(fs->state);
    fs->state = NULL;
}

void progcache__file_account(file_store *fs, int shard, int64_t bytes, int64_t count)
{
    __atomic_add_fetch(&fs->state->shard[shard].bytes, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fs->state->shard[shard].count, count, __ATOMIC_RELAXED);
}

/* ---- walking a shard --------------------------------------------------- */

int progcache__file_scan_shard(file_store *fs, int shard, file_entry_fn fn, void *ctx)
{
    char rel[16];
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    int dirfd = progcache__fs_open_dir(fs->root_fd, rel);
    if (dirfd < 0)
        return 0;
    DIR *dir = fdopendir(dirfd);
    if (!dir) {
        close(dirfd);
        return 0;
    }
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(dir)) != NULL) {
        if ((e->d_type != DT_REG && e->d_type != DT_UNKNOWN) ||
            !progcache__file_is_entry_name(e->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        rc = fn(ctx, shard, e->d_name, &st);
    }
    closedir(dir);
    return rc;
}

typedef struct {
    int64_t bytes, count;
} shard_sum;

static int sum_entry(void *ctx, int shard, const char *name, const struct stat *st)
{
    shard_sum *sum = ctx;
    sum->bytes += st->st_size;
    sum->count++;
    return 0;
}

/* Set one shard's counters to what is on disk now, as a delta against the
 * counter value before the scan so that puts landing meanwhile are kept. */
static void remeasure_shard(file_store *fs, int shard, const shard_sum *truth, int64_t bytes_before,
                            int64_t count_before)
{
    progcache__file_account(fs, shard, truth->bytes - bytes_before, truth->count - count_before);
}

static void seed_counters(file_store *fs)
{
    for (int shard = 0; shard < FILE_SHARDS; shard++) {
        int64_t b = __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
        int64_t c = __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
        shard_sum sum = {0, 0};
        progcache__file_scan_shard(fs, shard, sum_entry, &sum);
        remeasure_shard(fs, shard, &sum, b, c);
    }
    __atomic_store_n(&fs->state->seeded, 1, __ATOMIC_RELEASE);
}

static void lock_exclusive(file_store *fs)
{
    pthread_mutex_lock(&fs->evict_mutex);
    if (fs->lock_fd >= 0)
        (void)progcache__fs_flock(fs->lock_fd, LOCK_EX);
}

static void unlock_exclusive(file_store *fs)
{
    if (fs->lock_fd >= 0)
        (void)progcache__fs_flock(fs->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&fs->evict_mutex);
}

int progcache__file_totals(file_store *fs, uint64_t *bytes, uint64_t *count)
{
    if (!__atomic_load_n(&fs->state->seeded, __ATOMIC_ACQUIRE)) {
        lock_exclusive(fs);
        if (!__atomic_load_n(&fs->state->seeded, __ATOMIC_ACQUIRE))
            seed_counters(fs);
        unlock_exclusive(fs);
    }
    int64_t b = 0, c = 0;
    for (int shard = 0; shard < FILE_SHARDS; shard++) {
        b += __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
        c += __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
    }
    /* Drift can make a sum briefly negative; never report that. */
    *bytes = b > 0 ? (uint64_t)b : 0;
    *count = c > 0 ? (uint64_t)c : 0;
    return PROGCACHE_OK;
}

/* ---- eviction ---------------------------------------------------------- */

typedef struct {
    struct timespec atime;
    struct timespec mtime;
    uint64_t size;
    ino_t ino;
    unsigned char shard;
    char name[63];
} candidate;

typedef struct {
    candidate *items;
    size_t len, cap;
    int failed; /* out of memory */
    shard_sum sum;
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
    c->atime = st->st_atim;
    c->mtime = st->st_mtim;
    c->size = (uint64_t)st->st_size;
    c->ino = st->st_ino;
    c->shard = (unsigned char)shard;
    strcpy(c->name, name);
    return 0;
}

static int older_first(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->atime.tv_sec != y->atime.tv_sec)
        return x->atime.tv_sec < y->atime.tv_sec ? -1 : 1;
    if (x->atime.tv_nsec != y->atime.tv_nsec)
        return x->atime.tv_nsec < y->atime.tv_nsec ? -1 : 1;
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
    int shard_fd = progcache__fs_open_dir(fs->root_fd, shard_rel);
    if (shard_fd < 0)
        return 0;
    int tmp_fd = progcache__fs_open_dir(fs->root_fd, "tmp");
    char moved[64];
    int gone = 0;
    /* Move the entry aside under a fresh name (never over another file). */
    if (tmp_fd < 0 ||
        progcache__fs_rename_aside(shard_fd, name, tmp_fd, "evict-", moved, sizeof moved) != 0) {
        gone = tmp_fd >= 0 && errno == ENOENT; /* someone else removed it */
        goto done;
    }
    struct stat st;
    if (fstatat(tmp_fd, moved, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == seen->st_ino &&
        st.st_size == seen->st_size && same_time(st.st_mtim, seen->st_mtim) &&
        (!check_atime || same_time(st.st_atim, seen->st_atim))) {
        gone = 1;
        progcache__file_account(fs, shard, -(int64_t)st.st_size, -1);
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

/* Evict one candidate; returns 1 if its bytes are gone. */
static int evict_one(file_store *fs, const candidate *c)
{
    struct stat seen;
    memset(&seen, 0, sizeof seen);
    seen.st_ino = c->ino;
    seen.st_size = (off_t)c->size;
    seen.st_mtim = c->mtime;
    seen.st_atim = c->atime;
    return progcache__file_remove_if_same(fs, c->shard, c->name, &seen, 1);
}

static int64_t elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* One pass: scan and re-measure; then, if the total is over trigger or an
 * age bound is set, evict oldest first while the total is over target or
 * the entry was last used before atime_cutoff (0: no age bound). The
 * caller holds the lock. PROGCACHE_OK or PROGCACHE_ENOMEM. */
static int evict_pass(file_store *fs, uint64_t trigger, uint64_t target, int64_t atime_cutoff,
                      uint64_t *removed, uint64_t *removed_bytes)
{
    int rc = PROGCACHE_OK;
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    candidate_list list = {0};
    uint64_t total = 0;
    for (int shard = 0; shard < FILE_SHARDS && !list.failed; shard++) {
        int64_t b = __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
        int64_t c = __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
        list.sum.bytes = list.sum.count = 0;
        progcache__file_scan_shard(fs, shard, collect, &list);
        if (!list.failed)
            remeasure_shard(fs, shard, &list.sum, b, c);
        total += (uint64_t)list.sum.bytes;
    }
    __atomic_store_n(&fs->state->seeded, 1, __ATOMIC_RELEASE);
    if (list.failed) {
        progcache__file_log(fs, PROGCACHE_LOG_WARN, "eviction skipped in %s: out of memory",
                            fs->root);
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing the entries of %s",
                              fs->root);
        goto done;
    }
    if (total <= trigger && !atime_cutoff)
        goto done;
    if (list.len > 1)
        qsort(list.items, list.len, sizeof *list.items, older_first);
    size_t evicted = 0;
    uint64_t freed = 0;
    for (size_t i = 0; i < list.len; i++) {
        /* Oldest first: once neither bound applies, none later will. */
        if (total <= target && list.items[i].atime.tv_sec >= atime_cutoff)
            break;
        if (evict_one(fs, &list.items[i])) {
            total -= list.items[i].size;
            freed += list.items[i].size;
            evicted++;
        }
    }
    progcache__stats_add(fs->stats, PROGCACHE__EVICTIONS, evicted);
    progcache__stats_add(fs->stats, PROGCACHE__EVICTED_BYTES, freed);
    if (removed)
        *removed = evicted;
    if (removed_bytes)
        *removed_bytes = freed;
    progcache__file_log(fs, PROGCACHE_LOG_INFO,
                        "evicted %zu entries (%llu bytes) from %s in %lld ms", evicted,
                        (unsigned long long)freed, fs->root, (long long)elapsed_ms(&started));
done:
    progcache__free(list.items);
    return rc;
}

int progcache__file_evict_if_needed(file_store *fs)
{
    uint64_t bytes, count;
    progcache__file_totals(fs, &bytes, &count);
    if (!fs->max_size || bytes <= fs->max_size)
        return PROGCACHE_OK;
    /* One evictor at a time, in this process and on this host; the others
     * go on with their puts rather than queue behind a scan. */
    if (pthread_mutex_trylock(&fs->evict_mutex) != 0)
        return PROGCACHE_OK;
    if (fs->lock_fd >= 0 && progcache__fs_flock(fs->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        pthread_mutex_unlock(&fs->evict_mutex);
        return PROGCACHE_OK;
    }
    /* Another process may have evicted while we waited for the lock. */
    progcache__file_totals(fs, &bytes, &count);
    if (bytes > fs->max_size) {
        progcache__file_sweep_tmp(fs, 1);
        (void)evict_pass(fs, fs->max_size, fs->low_water, 0, NULL, NULL);
    }
    unlock_exclusive(fs);
    return PROGCACHE_OK;
}

int progcache__file_prune(file_store *fs, uint64_t max_bytes, int64_t atime_cutoff,
                          uint64_t *removed, uint64_t *removed_bytes)
{
    *removed = *removed_bytes = 0;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__error(PROGCACHE_EINVAL, "cache %s was opened read-only; cannot prune",
                                fs->root);
    lock_exclusive(fs);
    progcache__file_sweep_tmp(fs, 1);
    int rc = evict_pass(fs, max_bytes, max_bytes, atime_cutoff, removed, removed_bytes);
    unlock_exclusive(fs);
    return rc;
}

/* ---- temp sweeping and clearing ---------------------------------------- */

/* Remove from the directory rel the files named as is_temp says that a
 * crashed writer of ours (or cuda.core's) left: regular files of this
 * user, untouched for an hour. Anything else there is not ours to judge. */
static void sweep_dir(file_store *fs, const char *rel, int (*is_temp)(const char *))
{
    int dirfd = progcache__fs_open_dir(fs->root_fd, rel);
    if (dirfd < 0)
        return;
    DIR *dir = fdopendir(dirfd);
    if (!dir) {
        close(dirfd);
        return;
    }
    /* Old enough that no live writer can still be between create and
     * rename; a young temp file may be another process's put in flight. */
    time_t cutoff = time(NULL) - TMP_STALE_SECONDS;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        struct stat st;
        if (!is_temp(e->d_name) || fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISREG(st.st_mode) && st.st_uid == fs->euid && st.st_mtime < cutoff)
            (void)unlinkat(dirfd, e->d_name, 0);
    }
    closedir(dir);
}

void progcache__file_sweep_tmp(file_store *fs, int state_dir_too)
{
    sweep_dir(fs, "tmp", progcache__file_is_tmp_name);
    if (state_dir_too)
        sweep_dir(fs, FILE_STATE_DIR, progcache__file_is_state_tmp_name);
}

typedef struct {
    file_store *fs;
    int dirfd;
    int rc;
} clear_ctx;

static int clear_entry(void *ctx, int shard, const char *name, const struct stat *st)
{
    clear_ctx *cc = ctx;
    if (progcache__fs_unlinkat(cc->dirfd, name, 0) == 0)
        progcache__file_account(cc->fs, shard, -(int64_t)st->st_size, -1);
    else if (errno != ENOENT && !cc->rc)
        cc->rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                        "cannot remove %s/entries/%02x/%s", cc->fs->root, shard,
                                        name);
    return 0;
}

int progcache__file_clear_shard(file_store *fs, int shard)
{
    char rel[16];
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    clear_ctx cc = {fs, progcache__fs_open_dir(fs->root_fd, rel), PROGCACHE_OK};
    if (cc.dirfd < 0)
        return PROGCACHE_OK;
    progcache__file_scan_shard(fs, shard, clear_entry, &cc);
    close(cc.dirfd);
    return cc.rc;
}
