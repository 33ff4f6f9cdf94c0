/* The file store's read path: a hit is open, fstat, read, the seal (one
 * fgetxattr and one SHA-256 pass), and at most once a minute a futimens for
 * the LRU clock (on a directory without user xattrs, the seal is a small
 * file of its own: one open and read more, file_sidecar.c). Readers take
 * no lock: writers publish by rename, so a reader sees the old entry or
 * the new one, never a torn one. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "error.h"
#include "fs.h"
#include "sha256.h"
#include "artifact/format.h"
#include "artifact/inspect.h"
#include "store/file/file_stats.h"

/* A hit refreshes the entry's atime (the LRU clock) only when it is older
 * than this: one futimens per entry per minute keeps the hit path at four
 * system calls, and eviction does not need finer ordering than that. */
#define ATIME_REFRESH_SECONDS 60

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

PROGCACHE_HOT
void progcache__file_name_of_rel(char name[FILE_NAME_LEN], const char *rel)
{
    memcpy(name, rel + 8, 2);
    memcpy(name + 2, rel + 11, FILE_NAME_LEN - 2);
}

static int64_t now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* Only files this user (or root, who can replace this user's programs
 * anyway) wrote are loaded as code: in a directory others can write to,
 * anything else could be planted (docs/SECURITY.md). Written means that
 * nobody else can write it: a file of this user's that the group may
 * write (progcache/lock in a team's cache, 0660) is any member's to fill
 * and rename onto an entry's path, so it is nobody's own (issue 29). A
 * group-shared cache trusts its group's files too, whatever their group
 * bits (a member can plant entries there: the contract of a team cache).
 * Writable by all: never. */
int progcache__file_trusted(const file_store *fs, const struct stat *st)
{
    if (!progcache__perm_sole_writer(&fs->perm, st, 1))
        return 0;
    if (fs->perm.group && st->st_gid == fs->perm.team)
        return 1;
    return st->st_uid == fs->euid || st->st_uid == 0;
}

/* The checks of an entry read:
 *  - if the entry carries progcache's seal, it must be the seal of this
 *    entry (not one copied, linked or moved here from another key's path)
 *    and the bytes must match its digest (any change on disk: a flipped
 *    bit, a torn or truncated file, an edit in place). A match proves the
 *    bytes are exactly the ones that were put under this key, so their
 *    structure is not checked again here; when the writer also found them
 *    to be a whole artifact, meta->seal tells the caller, which then need not
 *    check their structure either (compile-or-load checks their kind,
 *    src/artifact/expect.c). The hit path pays for every step;
 *  - without a seal this version can check (written by cuda.core, by an
 *    older progcache, or on a file system without user xattrs), bytes that
 *    announce an artifact (ELF, fatbin, LTO-IR or PTX magic or text) must
 *    be a whole one (src/artifact/: headers and tables inside the
 *    file). Other bytes (the store holds any values) pass. */
static int intact(file_store *fs, int fd, const char *rel, const unsigned char *data, size_t size,
                  progcache_entry_meta *meta, int *sealed, char *why, size_t why_len)
{
    char name[FILE_NAME_LEN], other[17];
    progcache__file_name_of_rel(name, rel);
    int seal = progcache__file_seal_check(fs, fd, name, data, size, meta, sealed, other);
    if (seal == FILE_SEAL_OTHER || seal == FILE_SEAL_LOST) {
        progcache__file_seal_why(why, why_len, seal, other);
        return 0;
    }
    if (seal == FILE_SEAL_CHANGED) {
        snprintf(why, why_len, "SHA-256 mismatch");
        return 0;
    }
    if (seal == FILE_SEAL_MATCH) {
        if (meta)
            meta->seal = *sealed ? PROGCACHE_SEAL_WHOLE : PROGCACHE_SEAL_MATCHED;
        return 1;
    }
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    (void)progcache__validate(&info, data, size, 0); /* no names: cannot fail */
    if (info.kind != PROGCACHE_KIND_UNKNOWN && !info.valid) {
        snprintf(why, why_len, "%s: %s", progcache_kind_name(info.kind), info.reason);
        return 0;
    }
    return 1;
}

/* Open key's entry: *fd and st set, or PROGCACHE_ENOTFOUND, or an error. */
PROGCACHE_HOT
static int open_entry(int *fd, struct stat *st, char rel[FILE_REL_PATH_MAX], file_store *fs,
                      const void *key, size_t key_len)
{
    int rc = progcache__file_rel_path(rel, NULL, key, key_len);
    if (rc)
        return rc;
    /* Non-blocking (progcache__fs_open_regular): a FIFO planted at an
     * entry's path would otherwise hang the open until someone writes. */
    *fd = progcache__fs_open_regular(fs->root_fd, rel, O_RDONLY, 0, st);
    if (*fd >= 0)
        return PROGCACHE_OK;
    /* ELOOP: a symbolic link where an entry or shard should be; a hostile
     * or broken directory is a miss, never followed. So is anything but a
     * regular file (PROGCACHE__FS_ENOTREG). A link or file in place of
     * the shard is counted and named (file_path.c). */
    if ((errno == ELOOP || errno == ENOTDIR) && progcache__file_refused(fs, rel, errno, 0))
        return PROGCACHE_ENOTFOUND;
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV ||
        errno == PROGCACHE__FS_ENOTREG)
        return PROGCACHE_ENOTFOUND;
    /* An entry this user may not read (another member's, made by an older
     * version without group read; one that root left): a miss, which the
     * put after the compile replaces (the shard is ours or the group's). */
    if (errno == EACCES)
        return PROGCACHE_ENOTFOUND;
    return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                  "cannot open cache entry %s/%s", fs->root, rel);
}

PROGCACHE_HOT
int progcache__file_get(progcache_buf *out, progcache_entry_meta *meta, file_store *fs,
                        const void *key, size_t key_len)
{
    int sealed = 0, fd = -1;
    progcache_entry_meta_clear(meta);
    char rel[FILE_REL_PATH_MAX];
    struct stat st;
    int rc = open_entry(&fd, &st, rel, fs, key, key_len);
    if (rc)
        return rc;
    if (!progcache__file_trusted(fs, &st)) {
        /* Not an error (another user's entry in a shared directory is
         * normal there), but counted: a group-writable file of ours at an
         * entry's path is what a hostile member leaves (issue 29). */
        progcache__stats_add(fs->stats, PROGCACHE__ENTRIES_UNTRUSTED, 1);
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
        !intact(fs, fd, rel, out->data, size, meta, &sealed, why, sizeof why)) {
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
    if (meta)
        meta->kind = progcache__kind_of(out->data, size);
    rc = PROGCACHE_OK;
done:
    close(fd);
    return rc;
}

PROGCACHE_HOT
int progcache__file_vget(progcache_buf *out, progcache_store *store, const void *key,
                         size_t key_len)
{
    return progcache__file_get(out, NULL, (file_store *)store, key, key_len);
}

PROGCACHE_HOT
int progcache__file_vget_meta(progcache_buf *out, progcache_entry_meta *meta,
                              progcache_store *store, const void *key, size_t key_len)
{
    return progcache__file_get(out, meta, (file_store *)store, key, key_len);
}


/* exists: what a get would find, short of reading it: a regular file this
 * user may trust, within max_artifact_size. Its bytes are not read, so a
 * damaged entry counts as held until a get finds the damage. */
int progcache__file_vexists(progcache_store *store, const void *key, size_t key_len)
{
    file_store *fs = (file_store *)store;
    char rel[FILE_REL_PATH_MAX];
    struct stat st;
    int fd = -1, rc = open_entry(&fd, &st, rel, fs, key, key_len);
    if (rc)
        return rc;
    rc = progcache__file_trusted(fs, &st) && (uint64_t)st.st_size <= fs->max_artifact_size
             ? PROGCACHE_OK
             : PROGCACHE_ENOTFOUND;
    close(fd);
    return rc;
}
