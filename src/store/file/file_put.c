/* The file store's write path: temp file in progcache/tmp/ -> write -> seal ->
 * fsync -> rename into the shard -> fsync the shard directory. rename is
 * atomic, so a reader sees the old entry or the new one, never a torn one;
 * the two fsyncs make a completed put survive power loss. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fs.h"
#include "store/file/file_stats.h"

const char *progcache__file_errno_hint(int errnum)
{
    switch (errnum) {
    case ENOSPC:
    case EDQUOT:
        return " (the disk is full: free space, or lower the size cap: progcache config "
               "max_size)";
    case EROFS: return " (read-only file system: choose another cache directory)";
    case EACCES:
    case EPERM: return " (no permission: choose another directory or fix its permissions)";
    case ENOTDIR: return " (a path component is a file, not a directory)";
    default: return "";
    }
}

static int put_error(file_store *fs, int errnum, const char *what, const char *where)
{
    int code = progcache__code_from_errno(errnum);
    char why[160];
    /* EFBIG: refused before the write (progcache__fs_write_full), as
     * crossing the file size limit would kill the process; the message
     * gives the limit. */
    return progcache__error(code, "cannot %s %s/%s: %s%s", what, fs->root, where,
                            progcache__fs_strerror(why, sizeof why, errnum),
                            progcache__file_errno_hint(errnum));
}

/* progcache/tmp/'s mode: the cache's directory mode (0700, or the
 * group's 02770), whatever the umask (file_perm.c). */
mode_t progcache__file_tmp_mode(const file_store *fs)
{
    return progcache__perm_dir_mode(&fs->perm);
}

/* Open progcache/tmp/, recreating it (and progcache/) if someone removed
 * it since open; a link there is refused (file_path.c). */
int progcache__file_open_tmp(file_store *fs)
{
    int made;
    return progcache__file_dir_make(fs, FILE_TMP_DIR, progcache__file_tmp_mode(fs),
                                    progcache__perm_new_gid(&fs->perm), &made);
}

/* Open the shard directory of rel ("entries/ab/..."), creating entries/ and
 * the shard if missing. *created tells the caller to fsync entries/ too. */
static int open_shard_dir(file_store *fs, const char *rel, int *created)
{
    char shard[11];
    memcpy(shard, rel, 10);
    shard[10] = '\0';
    int fd = progcache__file_dir_make(fs, shard, progcache__perm_dir_mode(&fs->perm),
                                      progcache__perm_new_gid(&fs->perm), created);
    if (fd >= 0 && !*created) {
        /* A shard of ours that an older version (or a umask 000) left
         * open to others, or closed to the group, gets its mode: one fstat
         * per put. Another member's is theirs to fix (open names it). */
        struct stat st;
        if (fstat(fd, &st) == 0 && (st.st_mode & 07777) != progcache__perm_dir_mode(&fs->perm) &&
            progcache__perm_fix(&fs->perm, fd, &st, progcache__perm_dir_mode(&fs->perm)) > 0)
            progcache__stats_add(fs->stats, PROGCACHE__MODES_FIXED, 1);
    }
    return fd;
}

static int fsync_dir(file_store *fs, const char *rel)
{
    int fd = progcache__file_dir(fs, rel);
    if (fd < 0)
        return -1;
    int rc = progcache__fs_fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int progcache__file_vput_meta(progcache_store *store, const void *key, size_t key_len,
                              const void *data, size_t size, const progcache_entry_meta *meta)
{
    char rel[FILE_REL_PATH_MAX];
    int shard = 0;
    int rc = progcache__file_rel_path(rel, &shard, key, key_len);
    if (rc)
        return rc;
    return progcache__file_put_rel((file_store *)store, rel, shard, data, size, meta);
}

int progcache__file_vput(progcache_store *store, const void *key, size_t key_len,
                         const void *data, size_t size)
{
    return progcache__file_vput_meta(store, key, key_len, data, size, NULL);
}

int progcache__file_put_rel(file_store *fs, const char *rel, int shard, const void *data,
                            size_t size, const progcache_entry_meta *meta)
{
    if (fs->flags & PROGCACHE_FILE_READONLY) {
        if (fs->foreign)
            progcache__stats_add(fs->stats, PROGCACHE__FOREIGN_NOT_STORED, 1);
        return progcache__file_refuse_write(fs, "put");
    }
    if ((uint64_t)size > fs->max_artifact_size)
        return progcache__error(PROGCACHE_EINVAL,
                                "cannot store %zu bytes in cache %s: more than max_artifact_size "
                                "(%llu bytes); raise max_artifact_size (progcache_file_options or "
                                "progcache_options) to store larger artifacts",
                                size, fs->root, (unsigned long long)fs->max_artifact_size);
    int rc;
    const int sync = !(fs->flags & PROGCACHE_FILE_NO_FSYNC);
    char tmp_name[64];
    int tmp_fd = -1, fd = -1, shard_fd = -1, created = 0, have_tmp = 0;

    tmp_fd = progcache__file_open_tmp(fs);
    if (tmp_fd < 0) {
        rc = put_error(fs, errno, "open temp directory", FILE_TMP_DIR);
        goto done;
    }
    /* Private to the writer until the rename publishes it (cuda.core does
     * the same), so nobody can read or swap a half-written entry. */
    fd = progcache__fs_create_temp_exact(tmp_fd, "entry-",
                                         progcache__perm_entry_mode(&fs->perm), tmp_name,
                                         sizeof tmp_name);
    if (fd < 0) {
        rc = put_error(fs, errno, "create a temp file in", FILE_TMP_DIR);
        goto done;
    }
    have_tmp = 1;
    char tmp_rel[80];
    snprintf(tmp_rel, sizeof tmp_rel, FILE_TMP_DIR "/%s", tmp_name);
    if (progcache__fs_write_full(fd, data, size) != 0) {
        rc = put_error(fs, errno, "write temp file", tmp_rel);
        goto done;
    }
    /* The seal (and the records it covers) travels with the inode, so the
     * rename publishes bytes, records and seal at once. Without xattrs it
     * is a file of its own, published now, before the entry's rename
     * (file_sidecar.c says why that order is safe). */
    char name[FILE_NAME_LEN];
    progcache__file_name_of_rel(name, rel);
    if (progcache__file_seal(fs, fd, name, data, size, meta) != 0) {
        rc = put_error(fs, errno, "write the seal of", rel);
        goto done;
    }
    if (sync && progcache__fs_fsync(fd) != 0) {
        rc = put_error(fs, errno, "fsync temp file", tmp_rel);
        goto done;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = put_error(fs, errno, "close temp file", tmp_rel);
        goto done;
    }
    fd = -1;

    shard_fd = open_shard_dir(fs, rel, &created);
    if (shard_fd < 0) {
        rc = put_error(fs, errno, "open shard directory for", rel);
        goto done;
    }
    /* Size of the entry being replaced, for the accounting delta. A racing
     * writer can make this slightly off; eviction passes re-measure. */
    struct stat old;
    int replaced = fstatat(shard_fd, rel + 11, &old, AT_SYMLINK_NOFOLLOW) == 0 &&
                   S_ISREG(old.st_mode);
    file_own_write own;
    progcache__file_own_write_begin(fs, shard, shard_fd, &own);
    if (progcache__fs_renameat(tmp_fd, tmp_name, shard_fd, rel + 11) != 0) {
        rc = put_error(fs, errno, "rename temp file into", rel);
        goto done;
    }
    have_tmp = 0;
    progcache__file_own_write_end(fs, shard, shard_fd, &own);
    if (sync && (progcache__fs_fsync(shard_fd) != 0 ||
                 (created && fsync_dir(fs, "entries") != 0))) {
        /* The entry is in place and readable; only its durability across
         * a power loss is in doubt. Report it: the caller asked for it. */
        rc = put_error(fs, errno, "fsync directory of", rel);
        progcache__file_account(fs, shard, (int64_t)size - (replaced ? old.st_size : 0),
                                replaced ? 0 : 1);
        goto done;
    }
    progcache__file_account(fs, shard, (int64_t)size - (replaced ? old.st_size : 0),
                            replaced ? 0 : 1);
    rc = PROGCACHE_OK;
    if (fs->max_size)
        (void)progcache__file_evict_if_needed(fs); /* the put itself succeeded */
done:
    if (fd >= 0)
        close(fd);
    if (have_tmp)
        (void)unlinkat(tmp_fd, tmp_name, 0);
    if (tmp_fd >= 0)
        close(tmp_fd);
    if (shard_fd >= 0)
        close(shard_fd);
    return rc;
}

int progcache__file_vremove(progcache_store *store, const void *key, size_t key_len)
{
    file_store *fs = (file_store *)store;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__file_refuse_write(fs, "remove");
    char rel[FILE_REL_PATH_MAX];
    int shard = 0;
    int rc = progcache__file_rel_path(rel, &shard, key, key_len);
    if (rc)
        return rc;
    /* Only an entry is removed: what is not a regular file at an entry's
     * path was not made by a put, and is a miss to get as well (`progcache
     * verify --fix` removes such things, and says so). Both calls name the
     * entry in its shard held open: a link at the shard is refused, never
     * followed to what it points to (file_path.c). */
    struct stat st;
    const char *last;
    int shard_fd = progcache__file_parent(fs, rel, &last);
    if (shard_fd < 0)
        return errno == ENOENT ? PROGCACHE_ENOTFOUND : put_error(fs, errno, "remove", rel);
    int rm = fstatat(shard_fd, last, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)
                   ? progcache__fs_unlinkat(shard_fd, last, 0)
                   : (errno = ENOENT, -1);
    int saved = errno;
    close(shard_fd);
    if (rm != 0)
        return saved == ENOENT ? PROGCACHE_ENOTFOUND : put_error(fs, saved, "remove", rel);
    progcache__file_account(fs, shard, -(int64_t)st.st_size, -1);
    char name[FILE_NAME_LEN];
    progcache__file_name_of_rel(name, rel);
    progcache__file_sidecar_forget(fs, name);
    return PROGCACHE_OK;
}

