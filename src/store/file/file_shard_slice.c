/* One shard measured in slices, for a catch-up spread over puts
 * (file_catch_up.c): the listing goes on where the last slice stopped, at
 * the directory offset (getdents' d_off) it recorded, and the rows each
 * slice saw are appended to progcache/shards/next, whose header holds the
 * offset and what the measurement began with. The last slice sums the
 * rows (a name listed twice, as a listing resumed after a change of the
 * directory may give it, counts once) and writes the shard's record as a
 * whole measurement would (file_shard_record.c).
 *
 * Offsets: ext4 (hashed directories), XFS, btrfs and tmpfs give offsets
 * that stay valid while names come and go, which is what NFS servers rely
 * on. A name added behind the offset while the slices run is not in this
 * measurement: the shard changed after it began, so the next catch-up
 * measures it again. The file is ours, in progcache/ (mode of
 * progcache/state), read and written only under the lock; anything wrong
 * with it (damaged, of another shard, another directory, a shard measured
 * by someone else since) starts the measurement afresh. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fs.h"
#include "store/file/file_record.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

#define SLICE_MAGIC "PCSLICE1"
#define SLICE_NAME FILE_SHARD_RECORD_DIR "/next"

typedef struct slice_head {
    char magic[8];       /* "PCSLICE1" */
    uint32_t version;    /* 1 */
    uint32_t shard;      /* the shard being measured */
    uint64_t dir_ino;    /* its directory's inode */
    uint64_t seen;       /* its fingerprint when the measurement began */
    uint64_t seen_was;   /* shard_seen then */
    int64_t bytes_before; /* its counters then */
    int64_t count_before;
    uint64_t cursor;     /* getdents' d_off after the last name measured */
    uint64_t statted;    /* names stat'ed for not being in the record */
    uint64_t stale;      /* 1: a re-checked name's size had changed */
    uint64_t restarts;   /* measurements of this shard begun afresh for a change of ours */
    uint64_t changes;    /* its 4 bits of shard_changes then */
    uint64_t check;      /* mix of the above: damage shows */
} slice_head;

static uint64_t head_check(const slice_head *h)
{
    const unsigned char *bytes = (const unsigned char *)h;
    uint64_t c = 0x736c696365ull;
    for (size_t i = 0; i < offsetof(slice_head, check); i += 8) {
        uint64_t w;
        memcpy(&w, bytes + i, 8); /* (the magic is chars: no aliasing) */
        c = progcache__file_record_mix(c ^ w);
    }
    return c;
}

/* progcache/shards/next, made when missing; -1 when it cannot be used
 * (said once and counted, as a record's place holding something else). */
static int open_next(file_store *fs)
{
    int made;
    int dirfd = progcache__file_dir_make_ro(fs, FILE_SHARD_RECORD_DIR,
                                            progcache__perm_dir_mode(&fs->perm),
                                            progcache__perm_new_gid(&fs->perm), &made, 0);
    if (dirfd < 0)
        return -1;
    close(dirfd);
    struct stat st;
    char why[192];
    /* Written and truncated in place: a second name for it (a hard link a
     * team member made to a file of ours elsewhere) is refused. */
    int fd = progcache__file_open_own(fs, SLICE_NAME, O_RDWR | O_CREAT | FILE_OPEN_ONE_NAME, &st,
                                      why, sizeof why);
    if (fd < 0 && errno != EPERM) {
        progcache__file_record_refused(fs, SLICE_NAME, errno);
        return -1;
    }
    if (fd < 0) {
        progcache__stats_add(fs->stats, PROGCACHE__FILES_REFUSED, 1);
        if (!__atomic_exchange_n(&fs->slice_told, 1, __ATOMIC_RELAXED))
            progcache__file_log(fs, PROGCACHE_LOG_WARN,
                                "progcache: %s/" SLICE_NAME " cannot be used: %s; left "
                                "alone (remove it); shards are measured whole, each in "
                                "one put (files_refused in progcache stats)",
                                fs->root, why);
    }
    return fd;
}

/* A write of progcache/shards/next failed (a full disk, a quota): said
 * once; the shard is measured whole. */
static void write_failed(file_store *fs, int errnum)
{
    char why[160];
    if (!__atomic_exchange_n(&fs->slice_told, 1, __ATOMIC_RELAXED))
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "progcache: cannot write %s/" SLICE_NAME ": %s; shards are "
                            "measured whole, each in one put",
                            fs->root, progcache__fs_strerror(why, sizeof why, errnum));
}

/* Begun afresh this many times for changes of progcache's own, a shard is
 * measured whole (in one put) rather than again: a burst of puts into it
 * cannot keep its catch-up from ending. */
#define RESTARTS_MAX 2

/* The measurement under way in fd, when it is of this shard as it is now;
 * else a fresh one begun (0); -1 when fd cannot be written or the shard
 * is to be measured whole. */
static int head_load(file_store *fs, int fd, int shard, uint64_t dir_ino, slice_head *h)
{
    struct stat st;
    uint64_t seen_was = __atomic_load_n(&fs->state->shard_seen[shard], __ATOMIC_RELAXED);
    int64_t bytes = __atomic_load_n(&fs->state->shard[shard].bytes, __ATOMIC_RELAXED);
    int64_t count = __atomic_load_n(&fs->state->shard[shard].count, __ATOMIC_RELAXED);
    uint64_t changes = progcache__file_shard_changes(fs, shard);
    /* Every change progcache makes to the shard (a put, a remove, an
     * eviction, a clear, by any version) goes through its counters: one
     * since the measurement began would be counted twice, or not at all,
     * by a truth taken against the counters then. Another program's does
     * not, and shows at the next catch-up. */
    uint64_t restarts = 0;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof *h &&
        (st.st_size - (off_t)sizeof *h) % (off_t)sizeof(record_row) == 0 &&
        pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h && !memcmp(h->magic, SLICE_MAGIC, 8) &&
        h->version == 1 && h->check == head_check(h) && h->shard == (uint32_t)shard &&
        h->dir_ino == dir_ino && h->seen_was == seen_was) {
        if (h->bytes_before == bytes && h->count_before == count && h->changes == changes)
            return 0;
        if ((restarts = h->restarts + 1) > RESTARTS_MAX)
            return -1;
    }
    memset(h, 0, sizeof *h);
    memcpy(h->magic, SLICE_MAGIC, 8);
    h->version = 1;
    h->shard = (uint32_t)shard;
    h->dir_ino = dir_ino;
    h->seen = progcache__file_shard_fingerprint(fs, shard);
    h->seen_was = seen_was;
    h->bytes_before = bytes;
    h->count_before = count;
    h->restarts = restarts;
    h->changes = changes;
    h->check = head_check(h);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h) {
        write_failed(fs, errno);
        return -1;
    }
    return 0;
}

/* The slice's rows appended and its progress recorded; -1 on failure or
 * when the measurement would pass RECORD_MAX_ROWS rows. */
static int head_save(file_store *fs, int fd, slice_head *h, const record_row *rows, size_t n)
{
    struct stat st;
    if (fstat(fd, &st) != 0 ||
        (uint64_t)(st.st_size - (off_t)sizeof *h) / sizeof *rows + n > RECORD_MAX_ROWS)
        return -1;
    size_t len = n * sizeof *rows;
    h->check = head_check(h);
    if ((n && pwrite(fd, rows, len, st.st_size) != (ssize_t)len) ||
        pwrite(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h) {
        write_failed(fs, errno ? errno : ENOSPC); /* (a short write: the disk is full) */
        return -1;
    }
    return 0;
}

/* The last slice: every row read back, a name seen twice counted once,
 * the sum in *sum and the record written when due. -1 on failure. */
static int finish(file_store *fs, int fd, int shard, const slice_head *h, uint32_t old_n,
                  file_shard_sum *sum)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    size_t n = (size_t)(st.st_size - (off_t)sizeof *h) / sizeof(record_row);
    if (n > RECORD_MAX_ROWS) /* (another user of a team's cache made it so) */
        return -1;
    record_row *rows = progcache__malloc(n * sizeof *rows + 1);
    if (!rows || lseek(fd, (off_t)sizeof *h, SEEK_SET) != (off_t)sizeof *h ||
        progcache__fs_read_full(fd, rows, n * sizeof *rows) != (ssize_t)(n * sizeof *rows) ||
        !progcache__file_record_bounded(rows, (uint32_t)n)) {
        progcache__free(rows);
        return -1;
    }
    qsort(rows, n, sizeof *rows, progcache__file_record_cmp);
    size_t kept = 0;
    sum->bytes = sum->count = 0;
    for (size_t i = 0; i < n; i++) {
        /* (rows[i - 1] is intact: only rows[kept], kept <= i, is written) */
        if (i && !progcache__file_record_cmp(&rows[i - 1], &rows[i]))
            continue;
        sum->bytes += (int64_t)rows[i].size;
        sum->count++;
        if (rows[i].ino) /* (a name listed without an inode number is not recorded) */
            rows[kept++] = rows[i];
    }
    if (progcache__file_record_due((int)h->stale, h->statted, old_n, kept))
        progcache__file_record_write(fs, shard, h->dir_ino, rows, (uint32_t)kept);
    progcache__free(rows);
    (void)ftruncate(fd, 0); /* done: nothing to go on with */
    progcache__file_scan_count(1, 0);
    return 0;
}

/* A getdents64 buffer for about names entries (~88 bytes each), so that
 * the kernel lists little more than the slice uses. */
#define DIRENT_GUESS 96
#define BUF_MAX 32768

int progcache__file_shard_slice(file_store *fs, int shard, uint64_t *names, uint64_t *stats,
                                file_slice_done *done)
{
    char rel[16];
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    int dirfd = progcache__file_dir(fs, rel);
    if (dirfd < 0)
        return -1; /* gone or refused: measured whole (it finds it so) */
    int fd = -1, rc = -1;
    uint32_t old_n = 0;
    int refused = 0;
    record_row *old = NULL, *rows = NULL;
    char *buf = NULL;
    struct stat dst;
    slice_head h;
    if (fstat(dirfd, &dst) != 0 || (fd = open_next(fs)) < 0 ||
        head_load(fs, fd, shard, (uint64_t)dst.st_ino, &h) != 0)
        goto out;
    old = progcache__file_record_read(fs, shard, (uint64_t)dst.st_ino, &old_n, &refused);
    size_t len = *names * DIRENT_GUESS < BUF_MAX ? (size_t)*names * DIRENT_GUESS : BUF_MAX;
    if (len < 1024)
        len = 1024;
    /* Rows grow with what the slice sees (a test's budget may be huge). */
    size_t n = 0, cap = *names < 1024 ? (size_t)*names : 1024;
    if (refused || !(buf = progcache__malloc(len)) ||
        !(rows = progcache__malloc(cap * sizeof *rows + 1)) ||
        lseek(dirfd, (off_t)h.cursor, SEEK_SET) == (off_t)-1)
        goto out;
    record_measure m = {old, old_n, progcache__file_record_mix(h.seen), h.statted, 0,
                        (int)h.stale};
    int end = 0, spent = 0;
    while (!spent && *names) {
        ssize_t got = getdents64(dirfd, buf, len);
        if (got < 0)
            goto out;
        if (got == 0) {
            end = 1;
            break;
        }
        for (ssize_t off = 0; off < got;) {
            struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);
            record_name name;
            int entry = progcache__file_record_look(&m, e->d_ino, e->d_type, e->d_name, &name);
            if (!*names || (entry && name.need && !*stats)) {
                spent = 1; /* this name is the next slice's */
                break;
            }
            (*names)--;
            off += e->d_reclen;
            h.cursor = (uint64_t)e->d_off;
            if (!entry)
                continue;
            if (name.need) {
                (*stats)--;
                if (!progcache__file_record_stat(&m, dirfd, e->d_name, &name))
                    continue;
            }
            if (n == cap) {
                record_row *more = n < RECORD_MAX_ROWS
                                       ? progcache__realloc(rows, 2 * cap * sizeof *rows)
                                       : NULL;
                if (!more)
                    goto out; /* measured whole instead */
                rows = more;
                cap *= 2;
            }
            rows[n++] = name.row;
        }
    }
    h.statted = m.unknown;
    h.stale = (uint64_t)m.stale;
    progcache__file_record_statted(m.statted);
    if (head_save(fs, fd, &h, rows, n) != 0)
        goto out;
    rc = 0;
    if (end) {
        if (finish(fs, fd, shard, &h, old_n, &done->sum) != 0) {
            rc = -1;
            goto out;
        }
        done->bytes_before = h.bytes_before;
        done->count_before = h.count_before;
        done->seen = h.seen;
        done->seen_was = h.seen_was;
        rc = 1;
    }
out:
    if (rc < 0 && fd >= 0)
        (void)ftruncate(fd, 0); /* measured whole instead: nothing to go on with */
    if (fd >= 0)
        close(fd);
    close(dirfd);
    progcache__free(buf);
    progcache__free(rows);
    progcache__free(old);
    return rc;
}
