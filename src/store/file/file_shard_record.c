/* What a shard held when it was last measured, so that measuring it again
 * costs what changed (issue 32): progcache/shards/<2 hex>, the sorted
 * (inode, size, name hash) of every entry the measurement saw
 * (docs/FORMAT.md, "Shard records"). Measuring a shard again reads the
 * record, lists the shard (getdents gives each name's inode) and stats
 * only the names whose inode and name are not in the record: after
 * another program wrote one entry into a shard of 4,000, one fstatat
 * instead of 4,000.
 *
 * A record is a set of facts, never a snapshot to trust as a whole: an
 * entry file is never changed in place (every writer renames a new file
 * over it, which gives a new inode), so an (inode, name) pair seen with a
 * size mostly keeps that size for as long as the pair is there. Not
 * always: a file system may hand a freed inode number out again, and ext4
 * does so at once, so a name replaced twice between two measurements can
 * be back at its old inode number with other bytes. Each measurement
 * therefore stats again a sixteenth of the names it knows (a different
 * sixteenth each time: chosen by the shard's change time), and a size
 * found changed rewrites the record: such a stale size lasts some 16
 * measurements of its shard on average, not for ever (FORMAT.md, "Shard
 * records"). Otherwise staleness costs stats; a record that is missing, damaged, of
 * another shard directory, or not this user's to trust is not used (one
 * fstatat per name, as without records). Where a listing's inode numbers
 * cannot be trusted (network and FUSE file systems, whose clients may
 * number inodes of their own; a name listed with inode 0) every name is
 * stat'ed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

#define RECORD_MAGIC "PCSHARD1"
#define RECORD_VERSION 1
/* Names a measurement may stat beyond what changed before the record is
 * written again: RECORD_SLACK plus a sixteenth of the shard. */
#define RECORD_SLACK 64
/* One in RECHECK_EVERY known names is stat'ed again at each measurement. */
#define RECHECK_EVERY 16

typedef struct record_head {
    char magic[8];    /* "PCSHARD1" */
    uint32_t version; /* 1 */
    uint32_t rows;    /* rows that follow */
    uint64_t dir_ino; /* the shard directory's inode when it was measured */
    uint64_t check;   /* mix of every row, dir_ino and rows: damage shows */
} record_head;

/* Names stat'ed by measurements in this process (a test hook). */
static uint64_t names_statted;

uint64_t progcache__file_shard_names_statted(void)
{
    return __atomic_load_n(&names_statted, __ATOMIC_RELAXED);
}

void progcache__file_record_statted(uint64_t names)
{
    progcache__file_scan_count(0, names);
    __atomic_add_fetch(&names_statted, names, __ATOMIC_RELAXED);
}

/* Rewritten only when what it does not know (names stat'ed, names gone)
 * passes a bound: a write and a rename of ~94 KB at a million entries
 * cost more than stat'ing a few dozen names again (5-10 ms on a busy
 * disk, issue 32), and every measurement until then stats at most that
 * bound plus what changed since. A shard of up to 64 entries has no
 * record at all. */
int progcache__file_record_due(int stale, uint64_t statted, uint64_t old_n, uint64_t n)
{
    uint64_t gone = old_n + statted > n ? old_n + statted - n : 0;
    return stale || statted + gone > RECORD_SLACK + n / 16;
}

uint64_t progcache__file_record_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* FNV-1a of the 62 hex digits, never 0. */
static uint64_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h | 1;
}

static uint64_t rows_check(const record_row *rows, uint32_t n, uint64_t dir_ino)
{
    uint64_t (*mix)(uint64_t) = progcache__file_record_mix;
    uint64_t c = mix(dir_ino ^ ((uint64_t)n << 32));
    for (uint32_t i = 0; i < n; i++)
        c = mix(c ^ rows[i].ino) + mix(rows[i].name ^ (rows[i].size * 0x9e3779b97f4a7c15ull));
    return c;
}

int progcache__file_record_bounded(const record_row *rows, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (rows[i].size >= ROW_SIZE_MAX)
            return 0;
    return 1;
}

int progcache__file_record_cmp(const void *a, const void *b)
{
    const record_row *x = a, *y = b;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Whether this open may write records: a writable open of the user's own
 * cache, or a read-only admin open that keeps the counters it measures
 * (file_account.c), on a file system whose listings give inode numbers. */
int progcache__file_record_may_write(const file_store *fs)
{
    if (fs->foreign)
        return 0;
    if (!(fs->flags & PROGCACHE_FILE_READONLY))
        return 1;
    return (fs->flags & PROGCACHE_FILE_KEEP_COUNTS) && fs->state_shared;
}

/* A record's place holds something else: counted in files_refused (links
 * in links_refused, with their warning), and said once per handle. */
void progcache__file_record_refused(file_store *fs, const char *rel, int err)
{
    if (progcache__file_refused(fs, rel, err, 0))
        return;
    progcache__stats_add(fs->stats, PROGCACHE__FILES_REFUSED, 1);
    struct stat st;
    const char *what = fstatat(fs->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0
                           ? progcache__fs_type_name(st.st_mode)
                           : strerror(err);
    if (!__atomic_exchange_n(&fs->shard_record_told, 1, __ATOMIC_RELAXED))
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "progcache: %s/%s cannot be used (%s, not the file progcache "
                            "keeps there): left alone; shards are measured name by name "
                            "(files_refused in progcache stats)",
                            fs->root, rel, what);
}

/* The record of shard, when there is one this process can trust, of the
 * shard directory dir_ino: its rows (caller frees) and *n; else NULL. A
 * record this user may not trust (another user's, writable by others) is
 * counted in files_refused and *refused set: it is neither used nor
 * replaced. */
record_row *progcache__file_record_read(file_store *fs, int shard, uint64_t dir_ino, uint32_t *n,
                                        int *refused)
{
    char rel[32], why[192];
    struct stat st;
    *n = 0;
    *refused = 0;
    snprintf(rel, sizeof rel, FILE_SHARD_RECORD_DIR "/%02x", shard);
    int fd = progcache__fs_open_regular(fs->root_fd, rel, O_RDONLY, 0, &st);
    if (fd < 0) {
        /* Something other than a regular file there (a link, a FIFO, a
         * folder): left alone, counted and said once. */
        if (errno != ENOENT) {
            *refused = 1;
            progcache__file_record_refused(fs, rel, errno);
        }
        return NULL;
    }
    record_head head;
    record_row *rows = NULL;
    /* A mode is given only by an open that may write records: a read-only
     * `progcache stats` changes nothing (a team member's own record made
     * 0600 by it would lock the team out of it). */
    if (progcache__file_record_may_write(fs) && st.st_uid == fs->perm.euid &&
        progcache__perm_fix(&fs->perm, fd, &st, progcache__perm_state_mode(&fs->perm)) > 0)
        progcache__stats_add(fs->stats, PROGCACHE__MODES_FIXED, 1); /* ours, made loose */
    if (!progcache__perm_file_ok(&fs->perm, &st, why, sizeof why)) {
        progcache__stats_add(fs->stats, PROGCACHE__FILES_REFUSED, 1);
        *refused = 1;
    } else if (st.st_size >= (off_t)sizeof head &&
               progcache__fs_read_full(fd, &head, sizeof head) == (ssize_t)sizeof head &&
               !memcmp(head.magic, RECORD_MAGIC, 8) && head.version == RECORD_VERSION &&
               head.rows <= RECORD_MAX_ROWS && head.dir_ino == dir_ino &&
               st.st_size == (off_t)(sizeof head + (size_t)head.rows * sizeof *rows) &&
               (rows = progcache__malloc((size_t)head.rows * sizeof *rows + 1))) {
        size_t len = (size_t)head.rows * sizeof *rows;
        if (progcache__fs_read_full(fd, rows, len) != (ssize_t)len ||
            rows_check(rows, head.rows, dir_ino) != head.check ||
            !progcache__file_record_bounded(rows, head.rows)) {
            progcache__free(rows); /* damaged: as if there were none */
            rows = NULL;
        } else {
            *n = head.rows;
        }
    }
    close(fd);
    return rows;
}

/* Publish rows (sorted here) as shard's record: a temp file in
 * progcache/shards/ renamed over the last one, made with the mode of
 * progcache/state. Best effort: a record is an optimisation. */
void progcache__file_record_write(file_store *fs, int shard, uint64_t dir_ino, record_row *rows,
                                  uint32_t n)
{
    int made;
    int dirfd = progcache__file_dir_make_ro(fs, FILE_SHARD_RECORD_DIR,
                                            progcache__perm_dir_mode(&fs->perm),
                                            progcache__perm_new_gid(&fs->perm), &made, 0);
    if (dirfd < 0)
        return;
    if (n > 1) /* (rows may be NULL when there are none) */
        qsort(rows, n, sizeof *rows, progcache__file_record_cmp);
    size_t len = sizeof(record_head) + (size_t)n * sizeof *rows;
    unsigned char *buf = progcache__malloc(len);
    if (buf) {
        record_head head;
        memset(&head, 0, sizeof head);
        memcpy(head.magic, RECORD_MAGIC, 8);
        head.version = RECORD_VERSION;
        head.rows = n;
        head.dir_ino = dir_ino;
        head.check = rows_check(rows, n, dir_ino);
        memcpy(buf, &head, sizeof head);
        if (n)
            memcpy(buf + sizeof head, rows, (size_t)n * sizeof *rows);
        char name[4];
        snprintf(name, sizeof name, "%02x", shard);
        (void)progcache__fs_publish(dirfd, name, "shard-", buf, len,
                                    PROGCACHE__PUBLISH_REPLACE |
                                        (fs->perm.group ? PROGCACHE__PUBLISH_GROUP : 0));
        progcache__free(buf);
    }
    close(dirfd);
}

/* Whether a known name is stat'ed again this time: one in RECHECK_EVERY,
 * a different one at each change of the shard directory (the salt, mixed
 * once per measurement from the directory's change time). */
static uint64_t recheck_salt(const struct stat *dir)
{
    return progcache__file_record_mix((uint64_t)dir->st_ctim.tv_sec * 1000000000u +
                                      (uint64_t)dir->st_ctim.tv_nsec);
}

static int recheck(uint64_t name, uint64_t salt)
{
    return progcache__file_record_mix(name ^ salt) % RECHECK_EVERY == 0;
}

static const record_row *find(const record_row *rows, uint32_t n, uint64_t ino,
                              uint64_t name)
{
    record_row key = {ino, name, 0};
    return n ? bsearch(&key, rows, n, sizeof *rows, progcache__file_record_cmp) : NULL;
}

int progcache__file_record_look(const record_measure *m, uint64_t ino, unsigned char type,
                                const char *name, record_name *out)
{
    if ((type != DT_REG && type != DT_UNKNOWN) || !progcache__file_is_entry_name(name))
        return 0;
    uint64_t h = name_hash(name);
    out->was = ino ? find(m->old, m->old_n, ino, h) : NULL;
    out->row = (record_row){ino, h, out->was ? out->was->size : 0};
    out->need = !out->was || recheck(h, m->salt);
    return 1;
}

int progcache__file_record_stat(record_measure *m, int dirfd, const char *name, record_name *n)
{
    struct stat st;
    m->statted++;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return 0;
    if (n->was && n->was->size != (uint64_t)st.st_size)
        m->stale = 1; /* the inode number came back with other bytes */
    else if (!n->was)
        m->unknown++;
    n->row.size = (uint64_t)st.st_size;
    return 1;
}

static int sum_entry(void *ctx, int shard, const char *name, const struct stat *st)
{
    file_shard_sum *sum = ctx;
    (void)shard;
    (void)name;
    sum->bytes += st->st_size;
    sum->count++;
    __atomic_add_fetch(&names_statted, 1, __ATOMIC_RELAXED);
    return 0;
}

int progcache__file_shard_sum_full(file_store *fs, int shard, file_shard_sum *sum)
{
    sum->bytes = sum->count = 0;
    return progcache__file_scan_shard(fs, shard, sum_entry, sum);
}

int progcache__file_shard_sum(file_store *fs, int shard, file_shard_sum *sum)
{
    sum->bytes = sum->count = 0;
    if (fs->network_fs) /* inode numbers of a listing not to be trusted */
        return progcache__file_shard_sum_full(fs, shard, sum);
    char rel[16];
    snprintf(rel, sizeof rel, "entries/%02x", shard);
    int dirfd = progcache__file_dir(fs, rel);
    if (dirfd < 0)
        return 0;
    struct stat dst;
    DIR *dir = fstat(dirfd, &dst) == 0 ? fdopendir(dirfd) : NULL;
    if (!dir) {
        close(dirfd);
        return progcache__file_shard_sum_full(fs, shard, sum);
    }
    uint32_t old_n = 0, n = 0, cap = 0;
    int refused = 0;
    record_row *old =
        progcache__file_record_read(fs, shard, (uint64_t)dst.st_ino, &old_n, &refused);
    record_row *rows = NULL;
    int keep = progcache__file_record_may_write(fs) && !refused;
    record_measure m = {old, old_n, recheck_salt(&dst), 0, 0, 0};
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        record_name name;
        if (!progcache__file_record_look(&m, e->d_ino, e->d_type, e->d_name, &name) ||
            (name.need && !progcache__file_record_stat(&m, dirfd, e->d_name, &name)))
            continue;
        record_row row = name.row;
        sum->bytes += (int64_t)row.size;
        sum->count++;
        if (!keep || !e->d_ino)
            continue; /* (a name without an inode number is stat'ed every time) */
        if (n == cap) {
            uint32_t grown = cap ? cap * 2 : 256;
            record_row *more = grown <= RECORD_MAX_ROWS
                                   ? progcache__realloc(rows, (size_t)grown * sizeof *rows)
                                   : NULL;
            if (!more) {
                keep = 0; /* too many, or no memory: no record this time */
                continue;
            }
            rows = more;
            cap = grown;
        }
        rows[n++] = row;
    }
    closedir(dir); /* closes dirfd */
    progcache__file_scan_count(1, 0);
    progcache__file_record_statted(m.statted);
    if (keep && progcache__file_record_due(m.stale, m.unknown, old_n, n))
        progcache__file_record_write(fs, shard, (uint64_t)dst.st_ino, rows, n);
    progcache__free(rows);
    progcache__free(old);
    return 0;
}

void progcache__file_shard_records_fix(file_store *fs)
{
    struct stat st;
    int dirfd = progcache__file_dir(fs, FILE_SHARD_RECORD_DIR);
    if (dirfd < 0)
        return;
    if (fstat(dirfd, &st) == 0)
        (void)progcache__file_check_mode(fs, dirfd, FILE_SHARD_RECORD_DIR, &st);
    for (int shard = 0; shard < FILE_SHARDS && !fs->foreign; shard++) {
        char name[4];
        snprintf(name, sizeof name, "%02x", shard);
        int fd = progcache__fs_open_regular(dirfd, name, O_RDONLY, 0, &st);
        if (fd < 0)
            continue;
        if (st.st_uid == fs->perm.euid &&
            progcache__perm_fix(&fs->perm, fd, &st, progcache__perm_state_mode(&fs->perm)) > 0)
            fs->modes_fixed++; /* (counted when the statistics open) */
        close(fd);
    }
    close(dirfd);
}
