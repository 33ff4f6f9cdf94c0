/* A digest over files, for extra_digest: progcache_digest_files
 * (docs/KEY.md, "Digest over files"). */
#include "progcache/key.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "key/frame.h"
#include "sha256.h"

/* Version of the progcache_digest_files recipe, hashed first so a future
 * change cannot collide with today's digests. */
#define DIGEST_FILES_RECIPE "1"

/* Read size of progcache_digest_files: big enough that syscalls do not
 * dominate, small enough to allocate without thought. */
#define READ_CHUNK (64 * 1024)


/* Hash one file as field("path", path) then field("bytes", contents). The
 * length goes in before the bytes, so it is taken from fstat and the read
 * must then produce exactly that many bytes: a file that grows or shrinks
 * while being read fails rather than giving a digest of a mix. */
static int hash_file(progcache__sha256 *h, const char *path, unsigned char *chunk)
{
    struct stat st;
    int rc = PROGCACHE_OK;
    /* Non-blocking, so that a FIFO (refused below) cannot hold the open
     * for ever waiting for a writer; a regular file reads as usual. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot open \"%s\" for the digest over files", path);
    if (fstat(fd, &st) != 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot stat \"%s\"", path);
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = progcache__error(PROGCACHE_EIO,
                              "\"%s\" is not a regular file; list the header files themselves",
                              path);
        goto done;
    }
    uint64_t left = (uint64_t)st.st_size;
    if ((rc = progcache__frame_str(h, "path", path)) ||
        (rc = progcache__frame_begin(h, "bytes", left)))
        goto done;
    for (;;) {
        /* Once left reaches 0, one more read must see end of file. */
        size_t want = left ? (left < READ_CHUNK ? (size_t)left : READ_CHUNK) : 1;
        ssize_t got = read(fd, chunk, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                        "cannot read \"%s\"", path);
            goto done;
        }
        if (got == 0 && left == 0)
            break;
        if (got == 0 || left == 0) {
            rc = progcache__error(PROGCACHE_EIO,
                                  "\"%s\" changed size while it was being read; try again "
                                  "once nothing writes to it",
                                  path);
            goto done;
        }
        if ((rc = progcache__sha256_update(h, chunk, (size_t)got)))
            goto done;
        left -= (uint64_t)got;
    }
done:
    close(fd);
    return rc;
}

int progcache_digest_files(unsigned char out[PROGCACHE_KEY_SIZE], const char *const *paths,
                           size_t num_paths)
{
    progcache__sha256 *h = NULL;
    unsigned char *chunk = NULL;
    int rc;

    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_digest_files: out is NULL");
    if (num_paths && !paths)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_digest_files: paths is NULL but num_paths is %zu",
                                num_paths);
    for (size_t i = 0; i < num_paths; i++)
        if (!paths[i] || !paths[i][0])
            return progcache__error(PROGCACHE_EINVAL,
                                    "progcache_digest_files: path %zu of %zu is %s", i,
                                    num_paths, paths[i] ? "empty" : "NULL");
    chunk = progcache__malloc(READ_CHUNK);
    if (!chunk)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory for a %d-byte read buffer",
                                READ_CHUNK);
    h = progcache__sha256_new();
    if (!h) {
        rc = progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
        goto done;
    }
    if ((rc = progcache__frame_str(h, "digest_files", DIGEST_FILES_RECIPE)) ||
        (rc = progcache__frame_count(h, "file_count", num_paths)))
        goto done;
    for (size_t i = 0; i < num_paths; i++)
        if ((rc = hash_file(h, paths[i], chunk)))
            goto done;
    rc = progcache__sha256_final(h, out);
    h = NULL;
done:
    progcache__sha256_free(h);
    progcache__free(chunk);
    return rc;
}
