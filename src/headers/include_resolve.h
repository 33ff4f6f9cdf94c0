/* Internal: every file an NVRTC compile can read, found the way NVRTC 13
 * finds it (include_resolve.c; docs/KEY.md, "Headers on disk"). */
#ifndef PROGCACHE_KEY_INCLUDE_RESOLVE_H
#define PROGCACHE_KEY_INCLUDE_RESOLVE_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/key.h"

/* Modified this close (ns) to the scan's start, a file's stat cannot vouch
 * for its bytes: it may change again within the file system's timestamp
 * granularity without its stat changing (ccache's "too new" rule). */
#define PROGCACHE__HEADER_TOO_NEW_NS 2000000000LL

/* What stat says about a file or directory, for telling later whether it
 * changed. */
typedef struct progcache__file_stat {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
} progcache__file_stat;

/* A header file the compile reads. */
typedef struct progcache__header_file {
    char *path; /* as NVRTC opens it (relative to the working directory, or absolute) */
    progcache__file_stat st;
    unsigned char sha256[32];
    /* Modified within PROGCACHE__HEADER_TOO_NEW_NS of the scan: a later
     * check must read it again rather than trust its stat. */
    int too_new;
} progcache__header_file;

/* A directory where a header was looked for and not found (or an include
 * directory searched before the toolkit's): a file appearing in it would
 * change what NVRTC reads, and would change the directory's times. */
typedef struct progcache__header_dir {
    char *path;
    progcache__file_stat st;
} progcache__header_dir;

typedef struct progcache__header_scan {
    progcache__header_file *files; /* in the order they were found */
    size_t num_files;
    progcache__header_dir *dirs;
    size_t num_dirs;
    int toolkit;                   /* the compile includes toolkit headers */
    unsigned char toolkit_id[32];  /* progcache__toolkit_identity, when toolkit */
    int64_t time_ns;               /* when the scan began (CLOCK_REALTIME) */
} progcache__header_scan;

#define PROGCACHE__HEADER_SCAN_INIT {NULL, 0, NULL, 0, 0, {0}, 0}

/* Find, read and hash every header file the compile of o can read: the
 * pre-includes, the source's includes and, recursively, theirs (the
 * headers in memory are scanned where they are included, not hashed
 * here). out is emptied first. PROGCACHE_OK; PROGCACHE_EUNSAFEKEY for an
 * include that cannot be resolved or seen (the message names it and the
 * file it is in); PROGCACHE_EIO; PROGCACHE_ENOMEM. */
int progcache__header_scan_run(progcache__header_scan *out, const progcache_key_nvrtc_options *o);

/* Free what out holds and reset it. NULL-safe. */
void progcache__header_scan_free(progcache__header_scan *out);

/* Stat path into st (following links, as NVRTC's open does). 0, or -1
 * with errno. */
int progcache__file_stat_of(progcache__file_stat *st, const char *path);

/* Whether two stats describe the same, unchanged file. */
int progcache__file_stat_same(const progcache__file_stat *a, const progcache__file_stat *b);

/* Read a header file whole (bounded) and hash it: its SHA-256 and its
 * stat, from the open file. PROGCACHE_OK; PROGCACHE_ENOTFOUND (no message:
 * not there); PROGCACHE_EUNSAFEKEY (not a regular file); PROGCACHE_EIO;
 * PROGCACHE_ENOMEM. With text, the bytes are kept there (caller frees). */
int progcache__header_read(const char *path, progcache__file_stat *st, unsigned char sha[32],
                           char **text, size_t *len);

#endif
