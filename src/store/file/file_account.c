/* The file store's size accounting: per-shard byte and entry counters in
 * progcache/state, a file every process maps shared and updates with
 * atomic adds. Opening reads nothing else, so open is O(1) at any size; the
 * first call that needs totals on a directory progcache has never seen
 * (one cuda.core wrote, say) seeds the counters with one scan, once per
 * directory. Eviction (file_evict.c) re-measures what it scans. */
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
#define STATE_VERSION 3

/* Shards walked by scans in this process (progcache__file_shards_scanned). */
static uint64_t shards_scanned, entries_scanned;

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
    int dirfd = progcache__file_dir(fs, FILE_STATE_DIR);
    if (dirfd < 0)
        return -1;
    file_state fresh;
    memset(&fresh, 0, sizeof fresh);
    memcpy(fresh.magic, STATE_MAGIC, 8);
    fresh.version = STATE_VERSION;
    int rc = progcache__fs_publish(dirfd, "state", "state-", &fresh, sizeof fresh,
                                   (replace ? PROGCACHE__PUBLISH_REPLACE : 0) |
                                       (fs->perm.group ? PROGCACHE__PUBLISH_GROUP : 0));
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

/* Map progcache/state, creating it if missing. NULL with errno on failure;
 * PROGCACHE__FS_ENOTREG (and *mode set) when something other than a
 * regular file is there: that is left alone, never replaced. */
static file_state *map_state(file_store *fs, mode_t *mode, char *why, size_t why_len)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct stat st;
        int fd = progcache__file_open_own(fs, FILE_STATE_DIR "/state", O_RDWR, &st, why, why_len);
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

int progcache__file_open_own(file_store *fs, const char *rel, int flags, struct stat *st,
                             char *why, size_t why_len)
{
    why[0] = '\0';
    int fd = progcache__fs_open_regular(fs->root_fd, rel, flags & ~FILE_OPEN_ONE_NAME,
                                        progcache__perm_state_mode(&fs->perm), st);
    if (fd < 0) {
        (void)progcache__file_refused(fs, rel, errno, 0); /* a link at progcache/ */
        return -1;
    }
    if ((flags & FILE_OPEN_ONE_NAME) && st->st_nlink != 1) {
        /* Before its mode is touched: the other name may be anywhere. */
        snprintf(why, why_len, "it has %llu names (a hard link)",
                 (unsigned long long)st->st_nlink);
        close(fd);
        fs->files_refused++;
        errno = EPERM;
        return -1;
    }
    /* Ours (just made, or made under another umask): given its mode. */
    if (progcache__perm_fix(&fs->perm, fd, st, progcache__perm_state_mode(&fs->perm)) > 0)
        fs->modes_fixed++;
    if (progcache__perm_file_ok(&fs->perm, st, why, why_len))
        return fd;
    close(fd);
    fs->files_refused++;
    errno = EPERM;
    return -1;
}

/* Why the file rel of progcache/ cannot be used, for the log: its type
 * when it is not a regular file, whose it is when refused, else errno's
 * text. */
static void describe(char *out, size_t len, int errnum, mode_t mode, const char *refused)
{
    if (errnum == EPERM && refused[0])
        snprintf(out, len, "%s; it is not used (remove it)", refused);
    else if (errnum == PROGCACHE__FS_ENOTREG)
        snprintf(out, len, "it is %s, not a regular file (remove it)",
                 progcache__fs_type_name(mode));
    else
        progcache__fs_strerror(out, len, errnum);
}

/* A cache opened read-only reads the shared counters rather than counting
 * by a scan (issue 32: `stats` O(1) at any size): the state file mapped for
 * writing when this user may write it, so that a scan the counters need is
 * kept for everyone, else a private copy of it. NULL when it is missing,
 * invalid or refused (private counters then). Never created, replaced or
 * given another mode: this open writes nothing but counters. */
static file_state *read_state(file_store *fs, int *shared)
{
    struct stat st;
    char why[192];
    *shared = 0;
    /* Another user's cache (root looking at it, say): read, never written. */
    int fd = fs->foreign ? -1
                         : progcache__fs_open_regular(fs->root_fd, FILE_STATE_DIR "/state",
                                                      O_RDWR, 0, &st);
    int writable = fd >= 0;
    if (fd < 0)
        fd = progcache__fs_open_regular(fs->root_fd, FILE_STATE_DIR "/state", O_RDONLY, 0, &st);
    if (fd < 0)
        return NULL;
    file_state *state = NULL;
    if (progcache__perm_file_ok(&fs->perm, &st, why, sizeof why) &&
        st.st_size == (off_t)sizeof(file_state)) {
        if (writable) {
            void *map = mmap(NULL, sizeof(file_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (map != MAP_FAILED && state_is_valid(map)) {
                state = map;
                *shared = 1;
            } else if (map != MAP_FAILED) {
                munmap(map, sizeof(file_state));
            }
        } else if ((state = progcache__calloc(1, sizeof(file_state))) &&
                   (pread(fd, state, sizeof(file_state), 0) != (ssize_t)sizeof(file_state) ||
                    !state_is_valid(state))) {
            progcache__free(state);
            state = NULL;
        }
    }
    close(fd);
    if (*shared) /* the lock, where there is one, serialises our scans with theirs */
        fs->lock_fd =
            progcache__fs_open_regular(fs->root_fd, FILE_STATE_DIR "/lock", O_RDWR, 0, &st);
    return state;
}

int progcache__file_state_open(file_store *fs)
{
    char why[320], refused[192];
    if (!(fs->flags & PROGCACHE_FILE_READONLY)) {
        /* The lock and the shared counters make a cache better, not
         * usable: without them it works (the counters private to this
         * process, seeded by a scan; evictions not coordinated across
         * processes, which progcache__file_remove_if_same keeps safe) and
         * says so. */
        struct stat st;
        fs->lock_fd = progcache__file_open_own(fs, FILE_STATE_DIR "/lock", O_RDWR | O_CREAT, &st,
                                               refused, sizeof refused);
        if (fs->lock_fd < 0) {
            describe(why, sizeof why, errno, st.st_mode, refused);
            progcache__file_log(fs, PROGCACHE_LOG_WARN,
                                "cannot use %s/" FILE_STATE_DIR "/lock: %s; evictions by "
                                "several processes are not coordinated",
                                fs->root, why);
        }
        mode_t mode = 0;
        fs->state = map_state(fs, &mode, refused, sizeof refused);
        if (fs->state) {
            fs->state_shared = 1;
            return PROGCACHE_OK;
        }
        describe(why, sizeof why, errno, mode, refused);
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "cannot use %s/" FILE_STATE_DIR "/state: %s; sizes are counted by "
                            "this process alone (one scan when first needed)",
                            fs->root, why);
    }
    if ((fs->flags & PROGCACHE_FILE_READONLY) && (fs->state = read_state(fs, &fs->state_shared)))
        return PROGCACHE_OK;
    /* No shared state: only our own changes are seen (and other writers
     * through tmp/), so private counters seeded by one scan when first
     * asked are exact enough. */
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
    __atomic_add_fetch(&fs->state->shard_changes[shard / 16], 1ull << (4 * (shard % 16)),
                       __ATOMIC_RELAXED);
}

unsigned progcache__file_shard_changes(const file_store *fs, int shard)
{
    uint64_t w = __atomic_load_n(&fs->state->shard_changes[shard / 16], __ATOMIC_RELAXED);
    return (unsigned)(w >> (4 * (shard % 16))) & 15u;
}

/* ---- walking a shard --------------------------------------------------- */

typedef struct {
    int shard;
    file_entry_fn fn;
    void *ctx;
} scan_ctx;

static int scan_name(void *ctx, int dirfd, const char *name, unsigned char type)
{
    scan_ctx *sc = ctx;
    struct stat st;
    if ((type != DT_REG && type != DT_UNKNOWN) || !progcache__file_is_entry_name(name) ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return 0;
    __atomic_add_fetch(&entries_scanned, 1, __ATOMIC_RELAXED);
    return sc->fn(sc->ctx, sc->shard, name, &st);
}

int progcache__file_scan_shard(file_store *fs, int shard, file_entry_fn fn, void *ctx)
{
    char rel[16];
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    int dirfd = progcache__file_dir(fs, rel);
    if (dirfd < 0)
        return 0;
    scan_ctx sc = {shard, fn, ctx};
    __atomic_add_fetch(&shards_scanned, 1, __ATOMIC_RELAXED);
    return progcache__fs_each_name(dirfd, scan_name, &sc);
}

int64_t progcache__file_remeasure_shard(file_store *fs, int shard, const file_shard_sum *truth,
                                        int64_t bytes_before, int64_t count_before, int locked)
{
    if (locked) {
        progcache__file_account(fs, shard, truth->bytes - bytes_before,
                                truth->count - count_before);
    } else {
        /* A put landing between the scan and the store is lost from the
         * counter (at most one entry per writer in flight) until the next
         * pass: the bound docs/SHARED.md states. */
        __atomic_store_n(&fs->state->shard[shard].bytes, truth->bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&fs->state->shard[shard].count, truth->count, __ATOMIC_RELAXED);
    }
    return truth->bytes > bytes_before ? truth->bytes - bytes_before : 0;
}

void progcache__file_scan_count(uint64_t shards, uint64_t entries)
{
    __atomic_add_fetch(&shards_scanned, shards, __ATOMIC_RELAXED);
    __atomic_add_fetch(&entries_scanned, entries, __ATOMIC_RELAXED);
}

uint64_t progcache__file_shards_scanned(void)
{
    return __atomic_load_n(&shards_scanned, __ATOMIC_RELAXED);
}

uint64_t progcache__file_entries_scanned(void)
{
    return __atomic_load_n(&entries_scanned, __ATOMIC_RELAXED);
}

/* Measure one shard and correct its counters; its fingerprint is taken
 * before the scan, so a write during it shows as a change next time.
 * Returns the bytes found beyond the counter. */
int64_t progcache__file_measure_shard(file_store *fs, int shard, int locked)
{
    uint64_t seen = progcache__file_shard_fingerprint(fs, shard);
    int64_t b = __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
    int64_t c = __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
    file_shard_sum sum = {0, 0};
    progcache__file_shard_sum(fs, shard, &sum); /* what changed, by its record */
    int64_t unseen = progcache__file_remeasure_shard(fs, shard, &sum, b, c, locked);
    __atomic_store_n(&fs->state->shard_seen[shard], seen, __ATOMIC_RELAXED);
    return unseen;
}

static void seed_counters(file_store *fs, int locked)
{
    uint64_t seen = progcache__file_tmp_fingerprint(fs);
    for (int shard = 0; shard < FILE_SHARDS; shard++)
        (void)progcache__file_measure_shard(fs, shard, locked);
    __atomic_store_n(&fs->state->tmp_seen, seen, __ATOMIC_RELAXED);
    __atomic_store_n(&fs->state->seeded, 1, __ATOMIC_RELEASE);
    progcache__stats_add(fs->stats, PROGCACHE__STATE_SEEDS, 1);
}

/* ---- locks the file system refuses ----------------------------------------- */

void progcache__file_lock_failed(file_store *fs, int errnum)
{
    progcache__stats_add(fs->stats, PROGCACHE__LOCK_FAILURES, 1);
    if (!progcache__fs_lock_warn_once())
        return;
    char why[160];
    const char *name = strerrorname_np(errnum);
    progcache__file_log(fs, PROGCACHE_LOG_WARN, PROGCACHE__FS_NO_LOCKS_FMT, fs->root,
                        progcache__fs_strerror(why, sizeof why, errnum),
                        name ? name : "unknown errno");
}

int progcache__file_lock(file_store *fs)
{
    pthread_mutex_lock(&fs->evict_mutex);
    if (fs->lock_fd < 0)
        return 0;
    if (progcache__fs_flock(fs->lock_fd, LOCK_EX) == 0)
        return 1;
    /* A blocking flock fails only when it cannot lock at all. */
    progcache__file_lock_failed(fs, errno);
    return 0;
}

void progcache__file_unlock(file_store *fs)
{
    if (fs->lock_fd >= 0)
        (void)progcache__fs_flock(fs->lock_fd, LOCK_UN);
    pthread_mutex_unlock(&fs->evict_mutex);
}

/* A read-only open that had to count by a scan (no progcache/state: a
 * directory only cuda.core wrote to) leaves what it counted for the next
 * one, so that `stats` scans such a directory once (issue 32): published
 * as progcache/state when the directory is this user's and may be
 * written, never replacing one another process made meanwhile (which
 * then stands). Anything failing leaves things as they were. */
static void keep_seeded(file_store *fs)
{
    struct stat st;
    if (fs->state_shared || fs->foreign || !(fs->flags & PROGCACHE_FILE_READONLY) ||
        !(fs->flags & PROGCACHE_FILE_KEEP_COUNTS) ||
        fstatat(fs->root_fd, "entries", &st, AT_SYMLINK_NOFOLLOW) != 0)
        return; /* (nothing counted worth keeping: no entries/ at all) */
    int made;
    int dirfd =
        progcache__file_dir_make_ro(fs, FILE_STATE_DIR, progcache__perm_dir_mode(&fs->perm),
                                    progcache__perm_new_gid(&fs->perm), &made, 0);
    if (dirfd < 0)
        return;
    memcpy(fs->state->magic, STATE_MAGIC, 8);
    fs->state->version = STATE_VERSION;
    (void)progcache__fs_publish(dirfd, "state", "state-", fs->state, sizeof(file_state),
                                fs->perm.group ? PROGCACHE__PUBLISH_GROUP : 0);
    close(dirfd);
}

int progcache__file_totals(file_store *fs, uint64_t *bytes, uint64_t *count)
{
    if (!__atomic_load_n(&fs->state->seeded, __ATOMIC_ACQUIRE)) {
        int locked = progcache__file_lock(fs);
        if (!__atomic_load_n(&fs->state->seeded, __ATOMIC_ACQUIRE)) {
            if (!locked)
                progcache__stats_add(fs->stats, PROGCACHE__LOCK_FALLBACKS, 1);
            seed_counters(fs, locked);
            keep_seeded(fs);
        }
        progcache__file_unlock(fs);
    } else if ((fs->flags & PROGCACHE_FILE_READONLY) && progcache__file_others_wrote(fs)) {
        /* Counters read, not rebuilt: only what changed since the last
         * measurement is measured (no statistics counted: a read). */
        int locked = progcache__file_lock(fs);
        progcache__file_catch_up(fs, locked, 0);
        progcache__file_unlock(fs);
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
