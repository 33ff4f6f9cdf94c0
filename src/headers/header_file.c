/* Header files: their stat, and reading and hashing one whole, bounded
 * and without blocking (include_resolve.h). Shared by the include scan and
 * the manifest's checks. */
#include "headers/include_resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "fs.h"
#include "sha256.h"

/* Bounds: a header larger than this is refused rather than read. */
#define HEADER_MAX_SIZE ((size_t)256 << 20)

static void stat_fill(progcache__file_stat *st, const struct stat *s)
{
    st->dev = (uint64_t)s->st_dev;
    st->ino = (uint64_t)s->st_ino;
    st->size = (uint64_t)s->st_size;
    st->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
    st->ctime_ns = (int64_t)s->st_ctim.tv_sec * 1000000000 + s->st_ctim.tv_nsec;
}

int progcache__file_stat_of(progcache__file_stat *st, const char *path)
{
    struct stat s;
    if (stat(path, &s) != 0)
        return -1;
    stat_fill(st, &s);
    return 0;
}

int progcache__file_stat_same(const progcache__file_stat *a, const progcache__file_stat *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

int progcache__header_read(const char *path, progcache__file_stat *st, unsigned char sha[32],
                           char **text, size_t *len)
{
    if (text)
        *text = NULL;
    /* Non-blocking: a FIFO where a header should be must not hold the
     * open for ever (it is refused below). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return PROGCACHE_ENOTFOUND;
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot open header \"%s\"", path);
    }
    struct stat s;
    char *buf = NULL;
    int rc = PROGCACHE_OK;
    if (fstat(fd, &s) != 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot stat header \"%s\"", path);
        goto done;
    }
    if (!S_ISREG(s.st_mode)) {
        rc = progcache__error(PROGCACHE_EUNSAFEKEY,
                              "\"%s\" is %s, not a regular file: the cache key cannot cover "
                              "what NVRTC would read from it",
                              path, progcache__fs_type_name(s.st_mode));
        goto done;
    }
    if ((uint64_t)s.st_size > HEADER_MAX_SIZE) {
        rc = progcache__error(PROGCACHE_EIO, "header \"%s\" is %lld bytes, more than the %zu "
                              "a header may have", path, (long long)s.st_size, HEADER_MAX_SIZE);
        goto done;
    }
    size_t size = (size_t)s.st_size;
    buf = progcache__malloc(size + 1);
    if (!buf) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory reading header \"%s\"", path);
        goto done;
    }
    ssize_t got = progcache__fs_read_full(fd, buf, size + 1);
    struct stat after;
    if (got < 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot read header \"%s\"", path);
        goto done;
    }
    /* One byte more than its size was asked for: a file that grew or
     * shrank while being read, or was replaced, is not hashed as a mix. */
    if ((size_t)got != size || fstat(fd, &after) != 0 || after.st_size != s.st_size ||
        after.st_mtim.tv_sec != s.st_mtim.tv_sec || after.st_mtim.tv_nsec != s.st_mtim.tv_nsec) {
        rc = progcache__error(PROGCACHE_EIO, "header \"%s\" changed while it was being read; "
                              "try again once nothing writes to it", path);
        goto done;
    }
    buf[size] = '\0';
    if ((rc = progcache__sha256_oneshot(sha, buf, size)))
        goto done;
    stat_fill(st, &s);
    if (text) {
        *text = buf;
        *len = size;
        buf = NULL;
    }
done:
    progcache__free(buf);
    close(fd);
    return rc;
}

