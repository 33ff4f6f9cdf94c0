/* Whether a PCH file's bytes are the ones its manifest was made for.
 *
 * A PCH is 10-180 MB: hashing it before every use would cost a fresh
 * process tens of milliseconds (a CUB prefix's 178 MB: about 30 ms with
 * the fast checksum it used to have, 85 ms with SHA-256 on a CPU with SHA
 * instructions), more than anything else the tier does on its side. So
 * the full check runs only when the file's identity has changed since the
 * last process that checked it in full (or made it) said so:
 *
 *   <key>.stamp    progcache-pch-stamp 1
 *                  pch <the PCH file's name>
 *                  sha256 <the SHA-256 its manifest records>
 *                  file <dev> <ino> <size> <mtime_ns> <ctime_ns>
 *                  digest <SHA-256 of the lines above>
 *
 * The identity is taken with fstat on the descriptor that is then handed
 * to NVRTC, so what was compared is what is used. Bytes cannot change
 * without the change time moving: a write, a truncation, a copy or a
 * restore over the file (cp --preserve, rsync -t, tar keep the
 * modification time, never the change time), a file renamed into its
 * place (another inode) all give another identity, and the next use
 * checks the file in full. What a stamp trusts is the directory's
 * owner-only mode (docs/SECURITY.md): only this user (or root) can write
 * a stamp, as only they can write the PCH; a stamp of another owner,
 * another type, writable by others, malformed, or naming another file or
 * digest is no stamp. Media bit rot below the file system passes
 * unnoticed, as it does for the entries' seals until their next full read.
 *
 * The use's touch (the least recently used PCH is evicted first) goes to
 * the stamp, not to the PCH: setting a file's times moves its change time,
 * and a touched PCH would need the full check at every use. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fs.h"
#include "pch/pch_tier.h"
#include "sha256.h"

#define STAMP_MAGIC "progcache-pch-stamp 1\n"
#define STAMP_MAX 1024

unsigned long progcache__pch_full_checks;

static int64_t ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

void progcache__pch_ident_of(pch_ident *out, const struct stat *st)
{
    memset(out, 0, sizeof *out);
    out->dev = (uint64_t)st->st_dev;
    out->ino = (uint64_t)st->st_ino;
    out->size = (uint64_t)st->st_size;
    out->mtime_ns = ns(st->st_mtim);
    out->ctime_ns = ns(st->st_ctim);
}

int progcache__pch_ident_same(const pch_ident *a, const pch_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* ---- the full check ------------------------------------------------------------ */

int progcache__pch_digest(int fd, uint64_t size, unsigned char out[32])
{
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = progcache__malloc(CHUNK);
    progcache__sha256 *h = progcache__sha256_new();
    int rc = 0, err = 0;
    if (!buf || !h) {
        err = ENOMEM;
        goto done;
    }
    __atomic_add_fetch(&progcache__pch_full_checks, 1, __ATOMIC_RELAXED);
    for (uint64_t off = 0; off < size;) {
        size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO; /* shorter than recorded */
            goto done;
        }
        if (progcache__sha256_update(h, buf, (size_t)n)) {
            err = ENOMEM;
            goto done;
        }
        off += (uint64_t)n;
    }
    rc = progcache__sha256_final(h, out);
    h = NULL;
    if (rc)
        err = EIO;
done:
    progcache__sha256_free(h);
    progcache__free(buf);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

/* ---- the stamp ----------------------------------------------------------------- */

static void stamp_name(char out[PCH_NAME_MAX], const char *pch)
{
    snprintf(out, PCH_NAME_MAX, "%.*s.stamp", PCH_KEY_HEX, pch);
}

static int stamp_text(char *out, size_t cap, const char *pch, const unsigned char sha[32],
                      const pch_ident *id)
{
    char hex[65];
    progcache__hex(hex, sha, 32);
    int n = snprintf(out, cap,
                     STAMP_MAGIC "pch %s\nsha256 %s\nfile %" PRIu64 " %" PRIu64 " %" PRIu64
                                 " %" PRId64 " %" PRId64 "\n",
                     pch, hex, id->dev, id->ino, id->size, id->mtime_ns, id->ctime_ns);
    if (n < 0 || (size_t)n >= cap - 72)
        return -1;
    unsigned char digest[32];
    if (progcache__sha256_oneshot(digest, out, (size_t)n) != PROGCACHE_OK)
        return -1;
    progcache__hex(hex, digest, 32);
    return n + snprintf(out + n, cap - (size_t)n, "digest %s\n", hex);
}

int progcache__pch_stamp_read(int dir_fd, const char *pch, const unsigned char sha[32],
                              pch_ident *out)
{
    char name[PCH_NAME_MAX], text[STAMP_MAX + 1];
    stamp_name(name, pch);
    struct stat st;
    int fd = progcache__fs_open_regular(dir_fd, name, O_RDONLY, 0, &st);
    if (fd < 0)
        return 0;
    ssize_t n = -1;
    /* This user's, writable by nobody else, small: else it is no stamp. */
    if (st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
        st.st_size <= STAMP_MAX)
        n = progcache__fs_read_full(fd, text, STAMP_MAX);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    /* Parse what the text says, then write what that would be: a stamp
     * is trusted only when it is byte for byte the one this code writes
     * for this file, this digest and that identity. */
    char got_pch[PCH_NAME_MAX + 1];
    pch_ident id;
    memset(&id, 0, sizeof id);
    const char *file = strstr(text, "\nfile ");
    if (!file || sscanf(text, STAMP_MAGIC "pch %96s", got_pch) != 1 ||
        strcmp(got_pch, pch) != 0 ||
        sscanf(file + 6, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64 " %" SCNd64, &id.dev,
               &id.ino, &id.size, &id.mtime_ns, &id.ctime_ns) != 5)
        return 0;
    char want[STAMP_MAX + 1];
    int len = stamp_text(want, sizeof want, pch, sha, &id);
    if (len != (int)n || memcmp(want, text, (size_t)n) != 0)
        return 0;
    *out = id;
    return 1;
}

void progcache__pch_stamp_write(int dir_fd, const char *pch, const unsigned char sha[32],
                                const pch_ident *id)
{
    char name[PCH_NAME_MAX], text[STAMP_MAX + 1];
    stamp_name(name, pch);
    int n = stamp_text(text, sizeof text, pch, sha, id);
    /* Best effort: without it the next use checks the file in full. */
    if (n > 0)
        (void)progcache__fs_publish(dir_fd, name, "tmp-", text, (size_t)n,
                                    PROGCACHE__PUBLISH_REPLACE);
}

void progcache__pch_stamp_remove(int dir_fd, const char *pch)
{
    char name[PCH_NAME_MAX], head[PCH_NAME_MAX + 40], want[PCH_NAME_MAX + 40];
    stamp_name(name, pch);
    struct stat st;
    int fd = progcache__fs_open_regular(dir_fd, name, O_RDONLY, 0, &st);
    if (fd < 0)
        return;
    int n = snprintf(want, sizeof want, STAMP_MAGIC "pch %s\n", pch);
    ssize_t got = progcache__fs_read_full(fd, head, (size_t)n);
    close(fd);
    /* Only pch's: a stamp of a PCH published since for the key stays. */
    if (got == n && !memcmp(head, want, (size_t)n))
        (void)unlinkat(dir_fd, name, 0);
}

void progcache__pch_touch(int dir_fd, const char *pch, int fd)
{
    char name[PCH_NAME_MAX];
    stamp_name(name, pch);
    const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    if (utimensat(dir_fd, name, now, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
        /* No stamp: the PCH's own access time, as before stamps. */
        const struct timespec atime[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
        (void)futimens(fd, atime);
    }
}

int progcache__pch_verify(int dir_fd, int fd, const char *pch, uint64_t size,
                          const unsigned char sha[32], int *full)
{
    struct stat before, after;
    *full = 0;
    if (fstat(fd, &before) != 0)
        return -1;
    if ((uint64_t)before.st_size != size)
        return 1;
    pch_ident now, stamped;
    progcache__pch_ident_of(&now, &before);
    if (progcache__pch_stamp_read(dir_fd, pch, sha, &stamped) &&
        progcache__pch_ident_same(&now, &stamped))
        return 0;
    *full = 1;
    unsigned char got[32];
    if (progcache__pch_digest(fd, size, got) != 0)
        return errno == ENOMEM ? -1 : 1;
    if (memcmp(got, sha, sizeof got) != 0)
        return 1;
    /* Stamped only when nothing moved while it was read. */
    pch_ident then;
    if (fstat(fd, &after) == 0 && (progcache__pch_ident_of(&then, &after),
                                   progcache__pch_ident_same(&now, &then)))
        progcache__pch_stamp_write(dir_fd, pch, sha, &now);
    return 0;
}
