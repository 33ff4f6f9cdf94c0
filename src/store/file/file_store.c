/* The file store: cuda.core's FileStreamProgramCache directory layout,
 * entries/<h[0:2]>/<h[2:]> with h = hex SHA-256(key), raw bytes per file.
 *
 * Writers: temp file in tmp/ -> write -> fsync -> rename into the shard ->
 * fsync the shard directory. rename is atomic, so a reader sees the old
 * entry or the new one, never a torn one; the two fsyncs make a completed
 * put survive power loss. Readers take no lock. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "options.h"
#include "sha256.h"
#include "artifact/validate.h"
#include "store/file/file_stats.h"

/* A hit refreshes the entry's atime (the LRU clock) only when it is older
 * than this: one futimens per entry per minute keeps the hit path at four
 * system calls, and eviction does not need finer ordering than that. */
#define ATIME_REFRESH_SECONDS 60

void progcache_file_options_init(progcache_file_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->version = PROGCACHE_FILE_OPTIONS_VERSION;
}

void progcache__file_log(file_store *fs, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(fs->log, fs->log_ctx, level, fmt, ap);
    va_end(ap);
}

PROGCACHE_HOT
int progcache__file_rel_path(char out[FILE_REL_PATH_MAX], int *shard, const void *key,
                             size_t key_len)
{
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    char hex[2 * PROGCACHE_SHA256_SIZE + 1];
    int rc = progcache__sha256_oneshot(digest, key, key_len);
    if (rc)
        return rc;
    progcache__hex(hex, digest, sizeof digest);
    memcpy(out, "entries/", 8);
    out[8] = hex[0];
    out[9] = hex[1];
    out[10] = '/';
    memcpy(out + 11, hex + 2, 63); /* 62 digits and the NUL */
    if (shard)
        *shard = digest[0];
    return PROGCACHE_OK;
}

static int64_t now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* ---- get --------------------------------------------------------------- */

/* Only files this user wrote are loaded as code: in a directory others can
 * write to, anything else could be planted (docs/SECURITY.md). A
 * group-shared cache trusts its group instead. Writable by all: never. */
static int trusted(const file_store *fs, const struct stat *st)
{
    if (st->st_mode & S_IWOTH)
        return 0;
    if (st->st_uid == fs->euid)
        return 1;
    return (fs->flags & PROGCACHE_FILE_SHARED_GROUP) && st->st_gid == fs->root_gid;
}

/* The digest of a seal: SHA-256 over the tag, the entry's name, then the
 * bytes; one pass over the bytes. */
PROGCACHE_HOT
static int seal_digest(unsigned char out[PROGCACHE_SHA256_SIZE], const char name[FILE_NAME_LEN],
                       const unsigned char *data, size_t size)
{
    unsigned char prefix[FILE_SEAL_TAG_SIZE + FILE_NAME_LEN];
    memcpy(prefix, FILE_SEAL_TAG, FILE_SEAL_TAG_SIZE); /* with its NUL */
    memcpy(prefix + FILE_SEAL_TAG_SIZE, name, FILE_NAME_LEN);
    return progcache__sha256_two(out, prefix, sizeof prefix, data, size);
}

/* The first 8 bytes of the name's digest, from its first 16 hex digits. */
PROGCACHE_HOT
static void name_prefix(unsigned char out[8], const char name[FILE_NAME_LEN])
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(progcache__hex_digit(name[2 * i]) << 4 |
                                 progcache__hex_digit(name[2 * i + 1]));
}

void progcache__file_seal(int fd, const char name[FILE_NAME_LEN], const unsigned char *data,
                          size_t size)
{
    unsigned char seal[FILE_SEAL_SIZE];
    if (seal_digest(seal + 10, name, data, size) != PROGCACHE_OK)
        return;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    (void)progcache__validate(&info, data, size, 0); /* no names: cannot fail */
    seal[0] = FILE_SEAL_FORMAT;
    seal[1] = info.valid ? FILE_SEAL_WHOLE : 0;
    name_prefix(seal + 2, name);
    (void)fsetxattr(fd, FILE_SEAL_XATTR, seal, sizeof seal, 0);
}

PROGCACHE_HOT
int progcache__file_seal_check(int fd, const char name[FILE_NAME_LEN], const unsigned char *data,
                               size_t size, int *whole, char *other)
{
    /* One byte more than a seal of ours, so that a longer value (a future
     * format) is read, and told apart, rather than failing with ERANGE. */
    unsigned char seal[FILE_SEAL_SIZE + 1], got[PROGCACHE_SHA256_SIZE], prefix[8];
    *whole = 0;
    ssize_t n = fgetxattr(fd, FILE_SEAL_XATTR, seal, sizeof seal);
    /* None, an older format that bound no name (32 or 33 bytes), or one
     * this version does not know: nothing to check the bytes against. */
    if (n != FILE_SEAL_SIZE || seal[0] != FILE_SEAL_FORMAT)
        return FILE_SEAL_NONE;
    name_prefix(prefix, name);
    if (memcmp(seal + 2, prefix, sizeof prefix) != 0) {
        if (other)
            progcache__hex(other, seal + 2, 8);
        return FILE_SEAL_OTHER;
    }
    if (seal_digest(got, name, data, size) != PROGCACHE_OK ||
        memcmp(seal + 10, got, sizeof got) != 0)
        return FILE_SEAL_CHANGED;
    *whole = (seal[1] & FILE_SEAL_WHOLE) != 0;
    return FILE_SEAL_MATCH;
}

/* "ab" + "cdef..." of "entries/ab/cdef...": the entry's 64-digit name. */
PROGCACHE_HOT
static void name_of_rel(char name[FILE_NAME_LEN], const char *rel)
{
    memcpy(name, rel + 8, 2);
    memcpy(name + 2, rel + 11, FILE_NAME_LEN - 2);
}

/* The checks of an entry read:
 *  - if the entry carries progcache's seal, it must be the seal of this
 *    entry (not one copied, linked or moved here from another key's path)
 *    and the bytes must match its digest (any change on disk: a flipped
 *    bit, a torn or truncated file, an edit in place). A match proves the
 *    bytes are exactly the ones that were put under this key, so their
 *    structure is not checked again here; when the writer also found them
 *    to be a whole artifact, *sealed tells the caller, which then need not
 *    check their structure either (compile-or-load checks their kind,
 *    src/cuda/artifact.c). The hit path pays for every step;
 *  - without a seal this version can check (written by cuda.core, by an
 *    older progcache, or on a file system without user xattrs), bytes that
 *    announce an artifact (ELF, fatbin, LTO-IR or PTX magic or text) must
 *    be a whole one (src/store/validate.c: headers and tables inside the
 *    file). Other bytes (the store holds any values) pass. */
static int intact(int fd, const char *rel, const unsigned char *data, size_t size, int *sealed,
                  char *why, size_t why_len)
{
    char name[FILE_NAME_LEN], other[17];
    name_of_rel(name, rel);
    int seal = progcache__file_seal_check(fd, name, data, size, sealed, other);
    if (seal == FILE_SEAL_OTHER) {
        snprintf(why, why_len,
                 "sealed for another entry (%s...): copied, linked or moved here from another "
                 "key's path",
                 other);
        return 0;
    }
    if (seal == FILE_SEAL_CHANGED) {
        snprintf(why, why_len, "SHA-256 mismatch");
        return 0;
    }
    if (seal == FILE_SEAL_MATCH)
        return 1;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    (void)progcache__validate(&info, data, size, 0); /* no names: cannot fail */
    if (info.kind != PROGCACHE_KIND_UNKNOWN && !info.valid) {
        snprintf(why, why_len, "%s: %s", progcache_kind_name(info.kind), info.reason);
        return 0;
    }
    return 1;
}

PROGCACHE_HOT
int progcache__file_get(progcache_buf *out, file_store *fs, const void *key, size_t key_len,
                        int *sealed)
{
    int sealed_here = 0;
    if (!sealed)
        sealed = &sealed_here;
    *sealed = 0;
    char rel[FILE_REL_PATH_MAX];
    int rc = progcache__file_rel_path(rel, NULL, key, key_len);
    if (rc)
        return rc;

    /* Non-blocking (progcache__fs_open_regular): a FIFO planted at an
     * entry's path would otherwise hang the open until someone writes. */
    struct stat st;
    int fd = progcache__fs_open_regular(fs->root_fd, rel, O_RDONLY, 0, &st);
    if (fd < 0) {
        /* ELOOP: a symbolic link where an entry or shard should be; a
         * hostile or broken directory is a miss, never followed. So is
         * anything but a regular file (PROGCACHE__FS_ENOTREG). */
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ||
            errno == PROGCACHE__FS_ENOTREG)
            return PROGCACHE_ENOTFOUND;
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot open cache entry %s/%s", fs->root, rel);
    }
    if (!trusted(fs, &st)) {
        rc = PROGCACHE_ENOTFOUND;
        goto done;
    }
    if ((uint64_t)st.st_size > fs->max_artifact_size) {
        /* Not read: memory stays bounded whatever is planted here. Not
         * removed either: it may be a real artifact of a process that
         * allows more (compile-or-load reports this and recompiles). */
        rc = progcache__error(PROGCACHE_ECORRUPT,
                              "cache entry %s/%s is %lld bytes, more than max_artifact_size "
                              "(%llu bytes); it was not read (raise max_artifact_size to use "
                              "it, or remove the entry)",
                              fs->root, rel, (long long)st.st_size,
                              (unsigned long long)fs->max_artifact_size);
        goto done;
    }
    size_t size = (size_t)st.st_size;
    rc = progcache__buf_reserve(out, size);
    if (rc)
        goto done;
    ssize_t n = progcache__fs_read_full(fd, out->data, size);
    if (n < 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot read cache entry %s/%s",
                                    fs->root, rel);
        goto done;
    }
    if ((size_t)n != size) {
        /* Entries are only ever replaced by rename, never rewritten in
         * place, so a short read means someone truncated the file under
         * us: treat it as a miss rather than return part of an artifact. */
        rc = PROGCACHE_ENOTFOUND;
        goto done;
    }
    progcache__buf_set_size(out, size);
    char why[200];
    if (!(fs->flags & PROGCACHE_FILE_NO_VERIFY) &&
        !intact(fd, rel, out->data, size, sealed, why, sizeof why)) {
        /* Never hand out bytes that changed on disk or an artifact that is
         * not whole. Remove the entry (if it is still this file: another
         * process may have replaced it meanwhile) so the next put heals it. */
        int shard = (int)strtol((char[]){rel[8], rel[9], 0}, NULL, 16);
        if (progcache__file_remove_if_same(fs, shard, rel + 11, &st, 0)) {
            progcache__stats_add(fs->stats, PROGCACHE__CORRUPT_REMOVED, 1);
            progcache__file_log(fs, PROGCACHE_LOG_WARN, "removed corrupt entry %s/%s (%s)",
                                fs->root, rel, why);
        }
        out->size = 0;
        rc = PROGCACHE_ENOTFOUND;
        goto done;
    }
    /* LRU: a hit is a use. Mounts with noatime/relatime do not record it,
     * so set atime explicitly, on the file we read (not the path, which a
     * writer may have replaced meanwhile), leaving mtime alone. */
    if ((int64_t)st.st_atim.tv_sec < now_seconds() - ATIME_REFRESH_SECONDS) {
        const struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
        (void)futimens(fd, times); /* best effort: read-only media, other owner */
    }
    rc = PROGCACHE_OK;
done:
    close(fd);
    return rc;
}

static int file_get(progcache_buf *out, progcache_store *store, const void *key, size_t key_len)
{
    return progcache__file_get(out, (file_store *)store, key, key_len, NULL);
}

/* ---- put --------------------------------------------------------------- */

static const char *errno_hint(int errnum)
{
    switch (errnum) {
    case ENOSPC:
    case EDQUOT: return " (the disk is full: free space or set a size cap)";
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
                            progcache__fs_strerror(why, sizeof why, errnum), errno_hint(errnum));
}

static mode_t tmp_mode(const file_store *fs)
{
    return (fs->flags & PROGCACHE_FILE_SHARED_GROUP) ? 02770 : 0700;
}

/* Open tmp/, recreating it if someone removed it since open. */
static int open_tmp_dir(file_store *fs)
{
    int fd = progcache__fs_open_dir(fs->root_fd, "tmp");
    if (fd < 0 && errno == ENOENT) {
        if (progcache__fs_mkdirat(fs->root_fd, "tmp", tmp_mode(fs)) != 0)
            return -1;
        fd = progcache__fs_open_dir(fs->root_fd, "tmp");
    }
    return fd;
}

/* Open the shard directory of rel ("entries/ab/..."), creating entries/ and
 * the shard if missing. *created tells the caller to fsync entries/ too. */
static int open_shard_dir(file_store *fs, const char *rel, int *created)
{
    char shard[11];
    memcpy(shard, rel, 10);
    shard[10] = '\0';
    *created = 0;
    int fd = progcache__fs_open_dir(fs->root_fd, shard);
    if (fd >= 0 || errno != ENOENT)
        return fd;
    if (progcache__fs_mkdirat(fs->root_fd, "entries", 0777) != 0 ||
        progcache__fs_mkdirat(fs->root_fd, shard, 0777) != 0)
        return -1;
    *created = 1;
    return progcache__fs_open_dir(fs->root_fd, shard);
}

static int fsync_dir(int dirfd, const char *path)
{
    int fd = progcache__fs_open_dir(dirfd, path);
    if (fd < 0)
        return -1;
    int rc = progcache__fs_fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

static int file_put(progcache_store *store, const void *key, size_t key_len, const void *data,
                    size_t size)
{
    char rel[FILE_REL_PATH_MAX];
    int shard = 0;
    int rc = progcache__file_rel_path(rel, &shard, key, key_len);
    if (rc)
        return rc;
    return progcache__file_put_rel((file_store *)store, rel, shard, data, size);
}

int progcache__file_put_rel(file_store *fs, const char *rel, int shard, const void *data,
                            size_t size)
{
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__error(PROGCACHE_EINVAL, "cache %s was opened read-only; cannot put",
                                fs->root);
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

    tmp_fd = open_tmp_dir(fs);
    if (tmp_fd < 0) {
        rc = put_error(fs, errno, "open temp directory", "tmp");
        goto done;
    }
    /* Private to the writer until the rename publishes it (cuda.core does
     * the same), so nobody can read or swap a half-written entry. */
    fd = progcache__fs_create_temp(tmp_fd, "entry-",
                                   (fs->flags & PROGCACHE_FILE_SHARED_GROUP) ? 0640 : 0600,
                                   tmp_name, sizeof tmp_name);
    if (fd < 0) {
        rc = put_error(fs, errno, "create a temp file in", "tmp");
        goto done;
    }
    have_tmp = 1;
    char tmp_rel[80];
    snprintf(tmp_rel, sizeof tmp_rel, "tmp/%s", tmp_name);
    if (progcache__fs_write_full(fd, data, size) != 0) {
        rc = put_error(fs, errno, "write temp file", tmp_rel);
        goto done;
    }
    /* The seal travels with the inode, so the rename publishes bytes and
     * seal at once. */
    char name[FILE_NAME_LEN];
    name_of_rel(name, rel);
    progcache__file_seal(fd, name, data, size);
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
    if (progcache__fs_renameat(tmp_fd, tmp_name, shard_fd, rel + 11) != 0) {
        rc = put_error(fs, errno, "rename temp file into", rel);
        goto done;
    }
    have_tmp = 0;
    if (sync && (progcache__fs_fsync(shard_fd) != 0 ||
                 (created && fsync_dir(fs->root_fd, "entries") != 0))) {
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

/* ---- remove, clear, totals --------------------------------------------- */

static int file_remove(progcache_store *store, const void *key, size_t key_len)
{
    file_store *fs = (file_store *)store;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__error(PROGCACHE_EINVAL, "cache %s was opened read-only; cannot remove",
                                fs->root);
    char rel[FILE_REL_PATH_MAX];
    int shard = 0;
    int rc = progcache__file_rel_path(rel, &shard, key, key_len);
    if (rc)
        return rc;
    /* Only an entry is removed: what is not a regular file at an entry's
     * path was not made by a put, and is a miss to get as well (`progcache
     * verify --fix` removes such things, and says so). */
    struct stat st;
    if (fstatat(fs->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return PROGCACHE_ENOTFOUND;
    if (progcache__fs_unlinkat(fs->root_fd, rel, 0) != 0) {
        if (errno == ENOENT)
            return PROGCACHE_ENOTFOUND;
        return put_error(fs, errno, "remove", rel);
    }
    progcache__file_account(fs, shard, -(int64_t)st.st_size, -1);
    return PROGCACHE_OK;
}

static int file_clear(progcache_store *store)
{
    file_store *fs = (file_store *)store;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__error(PROGCACHE_EINVAL, "cache %s was opened read-only; cannot clear",
                                fs->root);
    int rc = PROGCACHE_OK;
    for (int shard = 0; shard < FILE_SHARDS; shard++) {
        int r = progcache__file_clear_shard(fs, shard);
        if (r && !rc)
            rc = r;
    }
    progcache__file_sweep_tmp(fs, 1);
    return rc;
}

static int file_count(uint64_t *out, progcache_store *store)
{
    uint64_t bytes;
    return progcache__file_totals((file_store *)store, &bytes, out);
}

static int file_total_size(uint64_t *out, progcache_store *store)
{
    uint64_t count;
    return progcache__file_totals((file_store *)store, out, &count);
}

static void file_free(progcache_store *store)
{
    file_store *fs = (file_store *)store;
    progcache__stats_close(fs->stats);
    progcache__file_state_close(fs);
    if (fs->lock_fd >= 0)
        close(fs->lock_fd);
    if (fs->root_fd >= 0)
        close(fs->root_fd);
    pthread_mutex_destroy(&fs->evict_mutex);
    progcache__free(fs->root);
    progcache__free(fs);
}

file_store *progcache__file_store_cast(progcache_store *store)
{
    return store && store->free == file_free ? (file_store *)store : NULL;
}

/* ---- open -------------------------------------------------------------- */

static int open_error(const char *path, const char *what, int errnum)
{
    return progcache__error(progcache__code_from_errno(errnum),
                            "cannot use cache directory %s: %s: %s%s", path, what,
                            strerror(errnum), errno_hint(errnum));
}

/* The struct's size in each version, for progcache__options_load. */
static const size_t file_options_size[] = {
    0, offsetof(progcache_file_options, max_artifact_size), sizeof(progcache_file_options)};

static int check_options(const progcache_file_options *opts)
{
    if (opts->low_water_percent > 100)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_file_options.low_water_percent is %u; it must be "
                                "1-100 (0 for the default, 90)",
                                opts->low_water_percent);
    if (opts->flags & ~(PROGCACHE_FILE_NO_FSYNC | PROGCACHE_FILE_READONLY |
                        PROGCACHE_FILE_SHARED_GROUP | PROGCACHE_FILE_NO_VERIFY))
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_options.flags has unknown bits 0x%x",
                                opts->flags);
    return PROGCACHE_OK;
}

/* Whether the directory held open as fs->root_fd is a cache, or empty: its
 * top level holds nothing but entries/, tmp/ and progcache/ (cuda.core's
 * layout is entries/ and tmp/; progcache/ is ours). Anything else means
 * the path names somebody's directory (a home, a project), and a cache
 * there would sweep and clear what it finds under those names: refuse.
 *
 * Cheap, as it runs at every open: getdents64 on root_fd itself into a
 * stack buffer (a cache's top level fits in one call; the second returns
 * 0), no DIR and no second descriptor. The read moves root_fd's directory
 * offset, which nothing uses: root_fd serves only *at() calls. */
static int check_cache_dir(file_store *fs, const char *path)
{
    union {
        struct dirent64 align;
        char bytes[4096];
    } buf;
    for (;;) {
        ssize_t n = getdents64(fs->root_fd, buf.bytes, sizeof buf.bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return open_error(path, "cannot list it", errno);
        if (n == 0)
            return PROGCACHE_OK;
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *e = (const struct dirent64 *)(void *)(buf.bytes + off);
            off += e->d_reclen;
            const char *name = e->d_name;
            if (!strcmp(name, ".") || !strcmp(name, ".."))
                continue;
            if (!progcache__file_is_layout_name(name))
                return progcache__error(PROGCACHE_EINVAL,
                                        "%s is not a cache directory: it holds \"%s\", and a "
                                        "cache directory holds only entries/, tmp/ and "
                                        FILE_STATE_DIR "/; choose an empty or new directory "
                                        "for the cache",
                                        path, name);
            struct stat st;
            int is_dir = e->d_type == DT_DIR;
            if (e->d_type == DT_UNKNOWN)
                is_dir = fstatat(fs->root_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                         S_ISDIR(st.st_mode);
            if (!is_dir)
                return progcache__error(PROGCACHE_EINVAL,
                                        "%s is not a cache directory: %s/%s is not a directory; "
                                        "choose an empty or new directory for the cache",
                                        path, path, name);
        }
    }
}

/* Create the layout (unless read-only) and hold the root open. */
static int open_layout(file_store *fs, const char *path)
{
    const int readonly = fs->flags & PROGCACHE_FILE_READONLY;
    if (!readonly && progcache__fs_mkdir_p(path, 0777) != 0 && errno != EEXIST)
        return open_error(path, "cannot create it", errno);
    fs->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->root_fd < 0)
        return open_error(path, "cannot open it", errno);
    struct stat root_st;
    if (fstat(fs->root_fd, &root_st) != 0)
        return open_error(path, "cannot stat it", errno);
    fs->root_gid = root_st.st_gid;
    fs->euid = geteuid();
    int rc = check_cache_dir(fs, path);
    if (rc || readonly)
        return rc;
    if (progcache__fs_mkdirat(fs->root_fd, "entries", 0777) != 0)
        return open_error(path, "cannot create entries/", errno);
    /* tmp/ is owner-only: nobody else can read or replace a file while it
     * is being written. An existing tmp/ is left as it is (cuda.core does
     * not chmod either). */
    if (progcache__fs_mkdirat(fs->root_fd, "tmp", tmp_mode(fs)) != 0)
        return open_error(path, "cannot create tmp/", errno);
    /* Writable? A cache that cannot take a put should say so at open, not
     * at the first compile. */
    if (faccessat(fs->root_fd, "tmp", W_OK, AT_EACCESS) != 0)
        return open_error(path, "tmp/ is not writable", errno);
    if (progcache__fs_mkdirat(fs->root_fd, FILE_STATE_DIR, 0777) != 0)
        return open_error(path, "cannot create " FILE_STATE_DIR "/", errno);
    return PROGCACHE_OK;
}

int progcache_store_file_new(progcache_store **out, const char *path,
                             const progcache_file_options *opts)
{
    progcache_file_options o;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_file_new: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_file_new: the cache directory "
                                                  "path is empty");
    progcache_file_options_init(&o);
    int rc = progcache__options_load(&o, opts, file_options_size, PROGCACHE_FILE_OPTIONS_VERSION,
                                     "progcache_store_file_new", "progcache_file_options");
    if (!rc)
        rc = check_options(&o);
    if (rc)
        return rc;
    opts = &o;

    file_store *fs = progcache__calloc(1, sizeof *fs);
    if (!fs)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory opening cache %s", path);
    fs->root_fd = -1;
    fs->lock_fd = -1;
    pthread_mutex_init(&fs->evict_mutex, NULL);
    fs->base.version = PROGCACHE_STORE_VERSION;
    fs->base.name = "file";
    fs->base.get = file_get;
    fs->base.put = file_put;
    fs->base.remove = file_remove;
    fs->base.clear = file_clear;
    fs->base.count = file_count;
    fs->base.total_size = file_total_size;
    fs->base.free = file_free;
    fs->flags = opts->flags;
    fs->max_size = opts->max_size;
    unsigned int pct = opts->low_water_percent ? opts->low_water_percent : 90;
    fs->low_water = opts->max_size / 100 * pct + opts->max_size % 100 * pct / 100;
    fs->log = opts->log;
    fs->log_ctx = opts->log_ctx;
    fs->max_artifact_size =
        opts->max_artifact_size ? opts->max_artifact_size : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    fs->root = progcache__strdup(path);
    if (!fs->root) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory opening cache %s", path);
        goto fail;
    }
    rc = open_layout(fs, path);
    if (rc)
        goto fail;
    rc = progcache__file_state_open(fs);
    if (rc)
        goto fail;
    /* Statistics are worth less than a working cache: without them the
     * store works and counts nothing. */
    if (progcache__stats_open(&fs->stats, fs->root_fd, fs->root,
                              !(fs->flags & PROGCACHE_FILE_READONLY)) != PROGCACHE_OK)
        progcache__file_log(fs, PROGCACHE_LOG_WARN, "no statistics for %s: %s", fs->root,
                            progcache_error_last());
    progcache__stats_set_max_size(fs->stats, fs->max_size);
    if (!(fs->flags & PROGCACHE_FILE_READONLY))
        progcache__file_sweep_tmp(fs, 0);
    *out = &fs->base;
    return PROGCACHE_OK;
fail:
    file_free(&fs->base);
    return rc;
}
