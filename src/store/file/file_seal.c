/* The seal of an entry (docs/FORMAT.md, "The seal"): the extended
 * attribute (or, on a file system without user xattrs, the sidecar file of
 * file_sidecar.c) that binds an entry's bytes, and the records kept with them,
 * to the entry's name, so that a flipped bit, a torn file or an entry
 * copied to another key's path is never served. Written on the temp file
 * before the rename, so bytes, records and seal are published at once. */
#include "store/file/file_store.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "buf.h"
#include "bytes.h"
#include "error.h"
#include "sha256.h"
#include "artifact/inspect.h"
#include "store/file/file_stats.h"

/* The digest of a seal: SHA-256 over the tag and the entry's name, then,
 * when the entry has records, their length (8 bytes, little-endian) and
 * the records, then the bytes; one pass over the bytes. */
PROGCACHE_HOT
static int seal_digest(unsigned char out[PROGCACHE_SHA256_SIZE], const char name[FILE_NAME_LEN],
                       const progcache_buf *records, const unsigned char *data, size_t size)
{
    unsigned char prefix[FILE_SEAL_TAG_SIZE + FILE_NAME_LEN];
    memcpy(prefix, FILE_SEAL_TAG, FILE_SEAL_TAG_SIZE); /* with its NUL */
    memcpy(prefix + FILE_SEAL_TAG_SIZE, name, FILE_NAME_LEN);
    if (!records || !records->size)
        return progcache__sha256_two(out, prefix, sizeof prefix, data, size);
    unsigned char len[8];
    progcache__put_le64(len, records->size);
    progcache__sha256 *ctx = progcache__sha256_new();
    if (!ctx)
        return PROGCACHE_ENOMEM;
    int rc = progcache__sha256_update(ctx, prefix, sizeof prefix);
    if (!rc)
        rc = progcache__sha256_update(ctx, len, sizeof len);
    if (!rc)
        rc = progcache__sha256_update(ctx, records->data, records->size);
    if (!rc)
        rc = progcache__sha256_update(ctx, data, size);
    if (rc) {
        progcache__sha256_free(ctx);
        return rc;
    }
    return progcache__sha256_final(ctx, out);
}

/* The first 8 bytes of the name's digest, from its first 16 hex digits. */
PROGCACHE_HOT
static void name_prefix(unsigned char out[8], const char name[FILE_NAME_LEN])
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(progcache__hex_digit(name[2 * i]) << 4 |
                                 progcache__hex_digit(name[2 * i + 1]));
}

/* The 42 bytes of a seal (file_store.h). */
static int seal_make(unsigned char seal[FILE_SEAL_SIZE], const char name[FILE_NAME_LEN],
                     const progcache_buf *records, const unsigned char *data, size_t size)
{
    int rc = seal_digest(seal + 10, name, records, data, size);
    if (rc != PROGCACHE_OK)
        return rc;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    (void)progcache__validate(&info, data, size, 0); /* no names: cannot fail */
    seal[0] = FILE_SEAL_FORMAT;
    seal[1] = (unsigned char)((info.valid ? FILE_SEAL_WHOLE : 0) |
                              (records ? FILE_SEAL_RECORDS : 0));
    name_prefix(seal + 2, name);
    return PROGCACHE_OK;
}

/* Seal in progcache/seals/ (file_sidecar.c), and mark the entry, fd, as
 * sealed: its write bits cleared (FILE_SEALED_MODE_MASK). A seal in
 * another file does not travel with the entry as an xattr does; the mode
 * does, and only the entry's owner can change it, so an entry moved or
 * linked to another key's path, whose new name has no seal, is told from
 * cuda.core's unsealed ones (0600) and never served (issue 29). -1 with
 * errno when either fails: the put fails rather than publish an entry
 * unsealed. */
static int seal_sidecar(file_store *fs, int fd, const char name[FILE_NAME_LEN],
                        const unsigned char *data, size_t size, const progcache_buf *records)
{
    if (!__atomic_load_n(&fs->seal_sidecar, __ATOMIC_RELAXED))
        progcache__file_seal_use_sidecar(fs);
    unsigned char seal[FILE_SEAL_SIZE];
    if (seal_make(seal, name, records, data, size) != PROGCACHE_OK) {
        errno = ENOMEM;
        return -1;
    }
    if (fchmod(fd, progcache__perm_entry_mode(&fs->perm) & ~FILE_SEALED_MODE_MASK) != 0)
        return -1;
    return progcache__file_sidecar_write(fs, name, seal, records);
}

void progcache__file_seal_why(char *why, size_t len, int seal, const char *other)
{
    if (seal == FILE_SEAL_LOST)
        snprintf(why, len,
                 "sealed (no owner write bit) but without a seal of its own in "
                 "progcache/seals/: linked or moved here from another key's path, or its "
                 "seal was removed");
    else
        snprintf(why, len,
                 "sealed for another entry (%s...): copied, linked or moved here from another "
                 "key's path",
                 other);
}

int progcache__file_seal(file_store *fs, int fd, const char name[FILE_NAME_LEN],
                         const unsigned char *data, size_t size, const progcache_entry_meta *meta)
{
    const progcache_buf *records = meta && meta->records.size ? &meta->records : NULL;
    const int sidecar = __atomic_load_n(&fs->seal_sidecar, __ATOMIC_RELAXED);
    /* Records first: the seal is what vouches for them, so a seal that says
     * "records" must never be there without them. A file system that
     * cannot hold them (too little room for them) gets the entry without
     * records. */
    if (records && !sidecar &&
        fsetxattr(fd, FILE_RECORDS_XATTR, records->data, records->size, 0) != 0) {
        if (errno == ENOTSUP || errno == EOPNOTSUPP)
            return seal_sidecar(fs, fd, name, data, size, records);
        records = NULL;
    }
    if (sidecar)
        return seal_sidecar(fs, fd, name, data, size, records);
    unsigned char seal[FILE_SEAL_SIZE];
    if (seal_make(seal, name, records, data, size) != PROGCACHE_OK)
        return 0; /* out of memory: the entry goes unsealed, as before */
    if (fsetxattr(fd, FILE_SEAL_XATTR, seal, sizeof seal, 0) != 0 &&
        (errno == ENOTSUP || errno == EOPNOTSUPP))
        /* The directory said it had xattrs at open and this file has
         * none (another file system mounted below, a server that changed):
         * from now on the sidecar, for this entry too. */
        return seal_sidecar(fs, fd, name, data, size, records);
    return 0;
}

/* Read the records xattr into records (reusing its memory). 0, or -1 when
 * they cannot be read (missing, too large, out of memory). */
static int read_records(int fd, progcache_buf *records)
{
    ssize_t n = fgetxattr(fd, FILE_RECORDS_XATTR, NULL, 0);
    if (n < 0 || (size_t)n > PROGCACHE_RECORDS_MAX ||
        progcache__buf_reserve(records, (size_t)n) != PROGCACHE_OK)
        return -1;
    ssize_t got = fgetxattr(fd, FILE_RECORDS_XATTR, records->data, (size_t)n);
    if (got != n)
        return -1; /* changed between the two reads: a writer is not us */
    progcache__buf_set_size(records, (size_t)n);
    return 0;
}

PROGCACHE_HOT
int progcache__file_seal_check(file_store *fs, int fd, const char name[FILE_NAME_LEN],
                               const unsigned char *data, size_t size, progcache_entry_meta *meta,
                               int *whole, char *other)
{
    /* One byte more than a seal of ours, so that a longer value (a future
     * format) is read, and told apart, rather than failing with ERANGE. */
    unsigned char seal[FILE_SEAL_SIZE + 1], got[PROGCACHE_SHA256_SIZE], prefix[8];
    *whole = 0;
    /* A meta reused across entries (a walk over the directory) must not
     * keep the records of the entry before: an entry without records, or
     * without a seal, has none (progcache ls showed the names of the entry
     * listed before). */
    if (meta)
        meta->records.size = 0;
    progcache_buf own = PROGCACHE_BUF_INIT, *records = NULL;
    int sidecar_records = 0;
    const int sidecar = __atomic_load_n(&fs->seal_sidecar, __ATOMIC_RELAXED);
    ssize_t n;
    if (__builtin_expect(!sidecar, 1)) {
        n = fgetxattr(fd, FILE_SEAL_XATTR, seal, sizeof seal);
    } else {
        /* The records come with the seal, in the same file. */
        records = meta ? &meta->records : &own;
        n = progcache__file_sidecar_read(fs, name, seal, records, &sidecar_records);
        if (!sidecar_records)
            records = NULL;
    }
    /* None, an older format that bound no name (32 or 33 bytes), or one
     * this version does not know: nothing to check the bytes against. A
     * sidecar entry marked as sealed has lost its seal, though: moved or
     * linked from another key's path. Whatever stands at its seal's path
     * then (nothing, a file it may not trust, another file of this user's
     * renamed there, a later format) is not its seal: only one made for
     * this name vouches for it. The fstat only on this rare path
     * (cuda.core's entries, and misses). */
    if (n != FILE_SEAL_SIZE || seal[0] != FILE_SEAL_FORMAT) {
        progcache_buf_free(&own);
        if (meta)
            meta->records.size = 0;
        struct stat st;
        if (sidecar && fstat(fd, &st) == 0 && !(st.st_mode & S_IWUSR))
            return FILE_SEAL_LOST;
        return FILE_SEAL_NONE;
    }
    name_prefix(prefix, name);
    if (memcmp(seal + 2, prefix, sizeof prefix) != 0) {
        progcache_buf_free(&own);
        if (meta)
            meta->records.size = 0;
        if (other)
            progcache__hex(other, seal + 2, 8);
        return FILE_SEAL_OTHER;
    }
    if (sidecar && !(seal[1] & FILE_SEAL_RECORDS) != !records) {
        /* A sidecar whose records and flag disagree: not what a put wrote. */
        progcache_buf_free(&own);
        if (meta)
            meta->records.size = 0;
        return FILE_SEAL_CHANGED;
    }
    if (!sidecar && (seal[1] & FILE_SEAL_RECORDS)) {
        /* Read into the caller's meta, or, when it wants none, a buffer of
         * our own: the digest covers them either way. */
        records = meta ? &meta->records : &own;
        if (read_records(fd, records) != 0) {
            progcache_buf_free(&own);
            if (meta)
                meta->records.size = 0;
            return FILE_SEAL_CHANGED;
        }
    }
    int rc = seal_digest(got, name, records, data, size);
    progcache_buf_free(&own);
    if (rc != PROGCACHE_OK || memcmp(seal + 10, got, sizeof got) != 0) {
        if (meta)
            meta->records.size = 0;
        return FILE_SEAL_CHANGED;
    }
    *whole = (seal[1] & FILE_SEAL_WHOLE) != 0;
    return FILE_SEAL_MATCH;
}
