/* Where an archive's bytes come from, for import (archive_source.h): a
 * regular file read by position, or a stream copied, as it is checked,
 * into an unlinked temporary file so that it can be read twice. */
#include "archive/archive_source.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "fs.h"
#include "dir/dir.h"

#define SPOOL_CHUNK 65536
/* After the end of a streamed archive, padding (tar pads to 10 KiB
 * records) is read and dropped, so the writer does not see a broken pipe;
 * beyond this the rest is left unread. */
#define DRAIN_MAX ((uint64_t)1 << 20)

static ssize_t read_stream(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = read(fd, buf, len);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        /* The caller's descriptor is non-blocking: wait for data, as a
         * blocking read would. */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void)poll(&p, 1, -1);
    }
}

/* An unlinked file for the stream's copy. */
static int open_spool(archive_source *src, progcache_file *fs)
{
#ifdef O_TMPFILE
    src->spool = !fs ? -1 : progcache__dir_tmpfile(fs);
    if (src->spool >= 0)
        return PROGCACHE_OK;
#endif
    src->spool_file = tmpfile();
    if (!src->spool_file)
        return progcache__error_errno(PROGCACHE_EIO, errno,
                                      "cannot create a temporary file to hold archive %s "
                                      "(a stream is checked whole before it is imported)",
                                      src->name);
    src->spool = fileno(src->spool_file);
    return PROGCACHE_OK;
}

/* Make bytes [0, end) of the archive available: 1 yes, 0 the archive ends
 * before, or an error code (message set). */
int progcache__source_have(archive_source *src, uint64_t end)
{
    if (!src->stream)
        return end <= src->size;
    while (src->size < end && !src->eof) {
        ssize_t n = read_stream(src->fd, src->chunk, SPOOL_CHUNK);
        if (n < 0)
            return progcache__error_errno(PROGCACHE_EIO, errno, "cannot read archive %s",
                                          src->name);
        if (n == 0) {
            src->eof = 1;
            break;
        }
        if (progcache__fs_write_full(src->spool, src->chunk, (size_t)n) != 0)
            return progcache__error_errno(PROGCACHE_EIO, errno,
                                          "cannot copy archive %s to a temporary file",
                                          src->name);
        src->size += (uint64_t)n;
    }
    return src->size >= end;
}

/* Read len bytes at offset, which progcache__source_have has made available. */
int progcache__source_read(archive_source *src, void *buf, size_t len, uint64_t offset)
{
    int fd = src->stream ? src->spool : src->fd;
    uint64_t at = src->base + offset;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(at + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return progcache__error_errno(PROGCACHE_EIO, n < 0 ? errno : EIO,
                                          "cannot read archive %s", src->name);
        done += (size_t)n;
    }
    return PROGCACHE_OK;
}

/* The padding after a streamed archive's end: what has already arrived
 * (tar writes whole records), up to DRAIN_MAX; never waited for, since a
 * writer may keep the stream open. */
void progcache__source_drain(archive_source *src)
{
    uint64_t drained = 0;
    while (src->stream && !src->eof && drained < DRAIN_MAX) {
        struct pollfd p = {.fd = src->fd, .events = POLLIN};
        if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
            break;
        ssize_t n = read(src->fd, src->chunk, SPOOL_CHUNK);
        if (n <= 0)
            break;
        drained += (uint64_t)n;
    }
}

/* spool: read even a regular file as a stream, into a copy only this
 * process holds (a verified import imports the bytes it verified). */
int progcache__source_open(archive_source *src, progcache_file *fs, int fd, const char *name,
                           int spool)
{
    struct stat st;
    memset(src, 0, sizeof *src);
    src->fd = fd;
    src->name = name;
    src->spool = -1;
    if (fstat(fd, &st) != 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot read archive %s", name);
    if (S_ISDIR(st.st_mode))
        return progcache__error(PROGCACHE_EINVAL,
                                "archive %s is a directory; give the archive file", name);
    if (S_ISREG(st.st_mode) && !spool) {
        off_t at = lseek(fd, 0, SEEK_CUR);
        src->base = at > 0 && at <= st.st_size ? (uint64_t)at : 0;
        src->size = (uint64_t)st.st_size - src->base;
        return PROGCACHE_OK;
    }
    src->stream = 1;
    if (!(src->chunk = progcache__malloc(SPOOL_CHUNK)))
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading archive %s", name);
    return open_spool(src, fs);
}

void progcache__source_close(archive_source *src)
{
    if (src->spool_file)
        fclose(src->spool_file);
    else if (src->spool >= 0)
        close(src->spool);
    progcache__free(src->chunk);
}
