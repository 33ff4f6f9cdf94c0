/* The seal where a directory has no user extended attributes (sshfs, NFS
 * before 4.2, some FUSE and SMB mounts, tmpfs before Linux 6.6): the same
 * 42 bytes (file_seal.c), and the records they cover, in a file of their
 * own, progcache/seals/<2 hex>/<62 hex>, beside the entry it vouches for
 * (docs/FORMAT.md, "The seal without extended attributes"). cuda.core
 * reads and counts only entries/ and tmp/, so it sees neither the seals nor
 * their temp files, and the entry file stays byte for byte what it writes.
 *
 * Pairing: a put publishes the seal (temp file in progcache/seals/, rename
 * into its shard) before it renames the entry into place. The seal is a
 * SHA-256 over the name and the bytes, so it can only ever vouch for the
 * bytes it was made from: a put killed between the two renames leaves a
 * seal that the old entry (if any) does not match, which a read takes for
 * damage (a miss; the entry is removed and rebuilt), never a seal that
 * passes other bytes. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "buf.h"
#include "error.h"
#include "fs.h"
#include "netfs.h"
#include "sha256.h"
#include "store/file/file_stats.h"

#define SEALS_DIR FILE_STATE_DIR "/seals"

/* Said once per process, whichever directory first needs it. */
static int said_once;

int progcache__file_seal_detect(file_store *fs)
{
    /* One call at open: a file system without user xattrs answers ENOTSUP
     * (EOPNOTSUPP) for any name; one with them ENODATA for a missing one. */
    if (fgetxattr(fs->root_fd, FILE_SEAL_XATTR, NULL, 0) >= 0 ||
        (errno != ENOTSUP && errno != EOPNOTSUPP))
        return 0;
    progcache__file_seal_use_sidecar(fs);
    return 1;
}

void progcache__file_seal_use_sidecar(file_store *fs)
{
    __atomic_store_n(&fs->seal_sidecar, 1, __ATOMIC_RELAXED);
    /* Said to the first handle that has a log callback to hear it. */
    if (fs->log && !__atomic_exchange_n(&said_once, 1, __ATOMIC_RELAXED))
        progcache__file_log(fs, PROGCACHE_LOG_WARN,
                            "progcache: %s has no user extended attributes (a network or FUSE "
                            "file system?): entries are sealed in %s/" SEALS_DIR "/ instead, "
                            "one small file per entry (docs/SHARED.md)",
                            fs->root, fs->root);
}

const char *progcache_file_flight_mechanism(const progcache_file *file)
{
    if (!file)
        return NULL;
    return progcache__netfs_kind(file->root_fd, NULL) ? "lease" : "range";
}

const char *progcache_file_seal_mechanism(const progcache_file *file)
{
    if (!file)
        return NULL;
    return __atomic_load_n(&file->seal_sidecar, __ATOMIC_RELAXED) ? "sidecar" : "xattr";
}

/* "progcache/seals/ab/<62 hex>" for the entry named name. */
static void sidecar_rel(char out[FILE_REL_PATH_MAX + 16], const char name[FILE_NAME_LEN])
{
    memcpy(out, SEALS_DIR "/", sizeof SEALS_DIR);
    char *p = out + sizeof SEALS_DIR;
    p[0] = name[0];
    p[1] = name[1];
    p[2] = '/';
    memcpy(p + 3, name + 2, FILE_NAME_LEN - 2);
    p[3 + FILE_NAME_LEN - 2] = '\0';
}

/* The cache's directory mode whatever the umask (file_perm.c); a link at
 * progcache/seals or at its shard is refused, never followed (file_path.c). */
static int open_or_make_dir(file_store *fs, const char *rel)
{
    int made;
    return progcache__file_dir_make(fs, rel, progcache__perm_dir_mode(&fs->perm),
                                    progcache__perm_new_gid(&fs->perm), &made);
}

int progcache__file_sidecar_write(file_store *fs, const char name[FILE_NAME_LEN],
                                  const unsigned char seal[FILE_SEAL_SIZE],
                                  const progcache_buf *records)
{
    const int sync = !(fs->flags & PROGCACHE_FILE_NO_FSYNC);
    char rel[FILE_REL_PATH_MAX + 16], tmp[64];
    sidecar_rel(rel, name);
    int seals = open_or_make_dir(fs, SEALS_DIR);
    if (seals < 0)
        return -1;
    rel[sizeof SEALS_DIR + 2] = '\0'; /* "progcache/seals/ab" */
    int shard_fd = open_or_make_dir(fs, rel);
    rel[sizeof SEALS_DIR + 2] = '/';
    if (shard_fd < 0) {
        int saved = errno;
        close(seals);
        errno = saved;
        return -1;
    }
    int rc = -1, saved = 0;
    int fd = progcache__fs_create_temp_exact(seals, "seal-", progcache__perm_entry_mode(&fs->perm),
                                             tmp, sizeof tmp);
    if (fd < 0)
        goto out;
    if (progcache__fs_write_full(fd, seal, FILE_SEAL_SIZE) == 0 &&
        (!records || progcache__fs_write_full(fd, records->data, records->size) == 0) &&
        (!sync || progcache__fs_fsync(fd) == 0) && close(fd) == 0) {
        fd = -1;
        if (progcache__fs_renameat(seals, tmp, shard_fd, rel + sizeof SEALS_DIR + 3) == 0) {
            rc = 0;
            if (sync)
                (void)progcache__fs_fsync(shard_fd); /* the entry's rename follows */
        }
    }
    saved = errno;
    if (fd >= 0)
        close(fd);
    if (rc)
        (void)unlinkat(seals, tmp, 0);
    progcache__stats_add(fs->stats, PROGCACHE__SIDECAR_SEALS, rc ? 0 : 1);
out:
    if (!saved)
        saved = errno;
    close(shard_fd);
    close(seals);
    errno = saved;
    return rc;
}

int progcache__file_sidecar_read(file_store *fs, const char name[FILE_NAME_LEN],
                                 unsigned char seal[FILE_SEAL_SIZE], progcache_buf *records,
                                 int *has_records)
{
    char rel[FILE_REL_PATH_MAX + 16];
    sidecar_rel(rel, name);
    struct stat st;
    int fd = progcache__fs_open_regular(fs->root_fd, rel, O_RDONLY, 0, &st);
    if (fd < 0) {
        (void)progcache__file_refused(fs, rel, errno, 0); /* a link on the way */
        return -1;
    }
    /* Trusted as an entry is (file_get.c): a seal anyone else wrote could
     * vouch for bytes they planted. Bounded as the records xattr is. */
    ssize_t n = -1;
    *has_records = 0;
    if (progcache__file_trusted(fs, &st) && (uint64_t)st.st_size >= FILE_SEAL_SIZE &&
        (uint64_t)st.st_size - FILE_SEAL_SIZE <= PROGCACHE_RECORDS_MAX) {
        n = progcache__fs_read_full(fd, seal, FILE_SEAL_SIZE);
        size_t extra = (size_t)st.st_size - FILE_SEAL_SIZE;
        if (n == (ssize_t)FILE_SEAL_SIZE && extra && records) {
            if (progcache__buf_reserve(records, extra) != PROGCACHE_OK ||
                pread(fd, records->data, extra, FILE_SEAL_SIZE) != (ssize_t)extra)
                n = -1;
            else {
                progcache__buf_set_size(records, extra);
                *has_records = 1;
            }
        }
    }
    close(fd);
    return (int)n;
}

void progcache__file_sidecar_forget(file_store *fs, const char name[FILE_NAME_LEN])
{
    if (!__atomic_load_n(&fs->seal_sidecar, __ATOMIC_RELAXED))
        return;
    char rel[FILE_REL_PATH_MAX + 16];
    sidecar_rel(rel, name);
    (void)progcache__file_unlink(fs, rel, 0); /* in its shard, held open */
}

/* Temp seals older than an hour: a writer died between create and rename. */
int progcache__file_is_seal_tmp_name(const char *name)
{
    return strncmp(name, "seal-", 5) == 0 && strlen(name) == 21 && progcache__is_hex(name + 5, 16);
}
