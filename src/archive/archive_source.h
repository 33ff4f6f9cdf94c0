/* Internal: where an archive's bytes come from, for import (archive_source.c;
 * archive_import.c reads through it). A regular file is read by position
 * (pread); a stream (a pipe, standard input, a FIFO, a device, or any file
 * when spool is asked) is copied as it is read into an unlinked temporary
 * file, so that it can be read twice: checked whole, then imported. */
#ifndef PROGCACHE_STORE_ARCHIVE_SOURCE_H
#define PROGCACHE_STORE_ARCHIVE_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "progcache/file.h"

typedef struct archive_source {
    int fd;           /* the archive */
    const char *name; /* for messages */
    uint64_t base;    /* where the archive starts in fd (a regular file) */
    uint64_t size;    /* bytes available: a regular file's, or spooled so far */
    int stream;       /* fd is read once, front to back, into spool */
    int spool;        /* the stream's copy, or -1 */
    FILE *spool_file; /* tmpfile() that owns spool, or NULL */
    int eof;          /* the stream has ended */
    unsigned char *chunk;
} archive_source;

/* Open fd (name for messages) as an archive; fs (or NULL) is where the
 * spool is made if the kernel allows. spool: read even a regular file as a
 * stream. PROGCACHE_OK or an error code (message set); close it either
 * way. */
int progcache__source_open(archive_source *src, progcache_file *fs, int fd, const char *name,
                           int spool);

/* Make bytes [0, end) available: 1 yes, 0 the archive ends before, or an
 * error code (message set). */
int progcache__source_have(archive_source *src, uint64_t end);

/* Read len bytes at offset, which progcache__source_have has made
 * available. PROGCACHE_OK or PROGCACHE_EIO. */
int progcache__source_read(archive_source *src, void *buf, size_t len, uint64_t offset);

/* Read and drop what has already arrived after a stream's end. */
void progcache__source_drain(archive_source *src);

/* Free what progcache__source_open made (NULL-safe fields). */
void progcache__source_close(archive_source *src);

#endif
