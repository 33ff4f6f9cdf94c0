/* The explain index: progcache/explain/<2 hex>/<62 hex>, one small text
 * file per program identity (src/program/explain.c says which), holding
 * the inputs of the newest keys stored for it, one line each. A miss
 * reads one or two of these files, never a directory: its cost does not
 * grow with the cache.
 *
 * cuda.core reads and counts only entries/ and tmp/, so the index is not
 * part of its size cap and never one of its entries. The files are
 * trusted only as entries are (progcache__file_trusted: another user's
 * in a private cache is ignored), reached only through file_path.c (a
 * link where a directory or the file belongs is refused and counted), read
 * within a bound, and replaced whole (temp file, rename). They are not
 * removed with the entries they name: a record whose entry was evicted is
 * stale, which is harmless (an explanation names inputs, never loads
 * bytes); `progcache clear` removes the whole index (the tier's clear,
 * store/file/file_sweep.c). */
#include "dir/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

/* "progcache/explain/ab" into dir, "<62 hex>" into name. */
static void paths_of(char dir[32], char name[FILE_NAME_LEN], const unsigned char id[32])
{
    static const char hex[] = "0123456789abcdef";
    char all[FILE_NAME_LEN + 1];
    for (int i = 0; i < 32; i++) {
        all[2 * i] = hex[id[i] >> 4];
        all[2 * i + 1] = hex[id[i] & 15];
    }
    all[FILE_NAME_LEN] = '\0';
    snprintf(dir, 32, FILE_EXPLAIN_DIR "/%.2s", all);
    memcpy(name, all + 2, FILE_NAME_LEN - 2);
    name[FILE_NAME_LEN - 2] = '\0';
}

static void refused(file_store *fs)
{
    progcache__stats_add(fs->stats, PROGCACHE__EXPLAIN_REFUSED, 1);
}

/* Append the trusted file's whole lines to out. Plain system calls, as
 * dir_nvrtc.c's: an index that cannot be read only costs an explanation. */
static int read_file(file_store *fs, int shard, const char *name, progcache_buf *out)
{
    int fd = openat(shard, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            refused(fs); /* a link (ELOOP), or a file we may not read */
        return PROGCACHE_OK;
    }
    struct stat st;
    int rc = PROGCACHE_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
        (uint64_t)st.st_size > PROGCACHE__EXPLAIN_FILE_MAX || !progcache__file_trusted(fs, &st)) {
        refused(fs);
        goto done;
    }
    size_t size = (size_t)st.st_size;
    if ((rc = progcache__buf_reserve(out, out->size + size + 1)))
        goto done;
    size_t n = 0;
    ssize_t got;
    /* At most size bytes, whatever the file grows to meanwhile. */
    while (n < size && ((got = read(fd, out->data + out->size + n, size - n)) > 0 ||
                        (got < 0 && errno == EINTR)))
        n += got > 0 ? (size_t)got : 0;
    /* Only whole lines count: a file cut short loses its last one. */
    while (n > 0 && out->data[out->size + n - 1] != '\n')
        n--;
    progcache__buf_set_size(out, out->size + n);
done:
    close(fd);
    return rc;
}

int progcache__file_explain_read(progcache_file *file, const unsigned char id[32],
                                 progcache_buf *out)
{
    file_store *fs = file;
    char dir[32], name[FILE_NAME_LEN];
    out->size = 0;
    paths_of(dir, name, id);
    int shard = progcache__file_dir(fs, dir); /* a link there: refused, counted, named */
    if (shard < 0)
        return PROGCACHE_OK;
    int rc = read_file(fs, shard, name, out);
    close(shard);
    return rc;
}

/* A directory of the index that an older run left loose (made under umask
 * 000, or loosened by hand) gets the cache's mode, as a put's shard does
 * (file_put.c): counted in modes_fixed. Another member's is left alone. */
static void fix_mode(file_store *fs, int fd)
{
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 &&
        (st.st_mode & 07777) != progcache__perm_dir_mode(&fs->perm) &&
        progcache__perm_fix(&fs->perm, fd, &st, progcache__perm_dir_mode(&fs->perm)) > 0)
        progcache__stats_add(fs->stats, PROGCACHE__MODES_FIXED, 1);
}

/* The index files of one shard, for the bound below. */
typedef struct shard_files {
    const file_store *fs;
    char names[PROGCACHE__EXPLAIN_SHARD_FILES + 1][FILE_NAME_LEN - 1];
    int64_t mtime[PROGCACHE__EXPLAIN_SHARD_FILES + 1];
    size_t n;
} shard_files;

/* Keep the newest PROGCACHE__EXPLAIN_SHARD_FILES: one more is dropped,
 * the oldest, as each name is seen (the shard is read once). */
static int collect(void *ctx, int dirfd, const char *name, unsigned char type)
{
    (void)type;
    shard_files *f = ctx;
    struct stat st;
    /* Only index files trusted as entries are (ours; a team's in a
     * group-trusting open) are counted and may go: one another user left
     * in a private cache is neither ours to remove nor read (rule 2). */
    if (!progcache__file_is_entry_name(name) ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        !progcache__file_trusted(f->fs, &st))
        return 0;
    memcpy(f->names[f->n], name, FILE_NAME_LEN - 1);
    f->mtime[f->n++] = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (f->n <= PROGCACHE__EXPLAIN_SHARD_FILES)
        return 0;
    size_t old = 0;
    for (size_t i = 1; i < f->n; i++)
        if (f->mtime[i] < f->mtime[old])
            old = i;
    (void)unlinkat(dirfd, f->names[old], 0);
    f->n--;
    memcpy(f->names[old], f->names[f->n], FILE_NAME_LEN - 1);
    f->mtime[old] = f->mtime[f->n];
    return 0;
}

/* After a new index file: the shard holds at most
 * PROGCACHE__EXPLAIN_SHARD_FILES (a new program identity is made by every
 * edit of a source, and nothing else removes one but clear). */
static void bound_shard(const file_store *fs, int shard)
{
    shard_files f;
    f.fs = fs;
    f.n = 0;
    int fd = fcntl(shard, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0)
        progcache__fs_each_name(fd, collect, &f); /* closes fd */
}

/* The first field of a line (up to its first space). */
static size_t field_len(const char *line, size_t len)
{
    const char *sp = memchr(line, ' ', len);
    return sp ? (size_t)(sp - line) : len;
}

int progcache__file_explain_add(progcache_file *file, const unsigned char id[32],
                                const char *line, size_t len)
{
    file_store *fs = file;
    if (!len || len > PROGCACHE__EXPLAIN_LINE_MAX || line[len - 1] != '\n' ||
        memchr(line, '\n', len - 1) || memchr(line, '\0', len))
        return progcache__error(PROGCACHE_EINVAL, "an explain record must be one text line of "
                                "at most %zu bytes", PROGCACHE__EXPLAIN_LINE_MAX);
    if ((fs->flags & PROGCACHE_FILE_READONLY) || fs->foreign)
        return progcache__error(PROGCACHE_EIO, "%s is read-only: no explain record written",
                                fs->root);
    char dir[32], name[FILE_NAME_LEN];
    paths_of(dir, name, id);
    int made;
    int shard = progcache__file_dir_make(fs, dir, progcache__perm_dir_mode(&fs->perm),
                                         progcache__perm_new_gid(&fs->perm), &made);
    if (shard < 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot open %s/%s", fs->root, dir);
    if (!made) {
        int top = progcache__file_dir(fs, FILE_EXPLAIN_DIR);
        fix_mode(fs, top);
        fix_mode(fs, shard);
        if (top >= 0)
            close(top);
    }
    progcache_buf old = PROGCACHE_BUF_INIT, text = PROGCACHE_BUF_INIT;
    struct stat st;
    int fresh = fstatat(shard, name, &st, AT_SYMLINK_NOFOLLOW) != 0;
    int rc = read_file(fs, shard, name, &old);
    if (!rc)
        rc = progcache__buf_append(&text, line, len);
    size_t id_len = field_len(line, len), kept = 1;
    const char *p = (const char *)old.data, *end = p + old.size;
    while (!rc && p < end && kept < PROGCACHE__EXPLAIN_KEEP) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = (size_t)(nl - p) + 1; /* old holds whole lines only */
        if ((field_len(p, l) != id_len || memcmp(p, line, id_len)) &&
            l <= PROGCACHE__EXPLAIN_LINE_MAX) {
            rc = progcache__buf_append(&text, p, l);
            kept++;
        }
        p += l;
    }
    if (!rc && progcache__fs_publish(shard, name, "explain-tmp-", text.data, text.size,
                                     PROGCACHE__PUBLISH_REPLACE |
                                         (fs->perm.group ? PROGCACHE__PUBLISH_GROUP : 0)) != 0)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write %s/%s/%s", fs->root, dir,
                                    name);
    if (!rc)
        progcache__stats_add(fs->stats, PROGCACHE__EXPLAIN_RECORDS, 1);
    if (!rc && fresh)
        bound_shard(fs, shard);
    progcache_buf_free(&old);
    progcache_buf_free(&text);
    close(shard);
    return rc;
}
