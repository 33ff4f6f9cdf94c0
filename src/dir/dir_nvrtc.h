/* Internal to src/dir/ (the rooms above include dir/dir.h): the records
 * of NVRTC versions a cache directory keeps (dir_nvrtc.c): progcache/nvrtc-<uid>, text lines that
 * src/cuda/nvrtc_record.c writes and reads, and that export and import
 * carry as the archive member progcache/nvrtc (docs/FORMAT.md). */
#ifndef PROGCACHE_DIR_NVRTC_H
#define PROGCACHE_DIR_NVRTC_H

#include <stddef.h>

#include "buf.h"
#include "progcache/file.h"

/* The largest record read or written. */
#define PROGCACHE__NVRTC_RECORD_MAX ((size_t)64 << 10)
/* The archive member that carries the exporter's records. */
#define PROGCACHE__NVRTC_MEMBER "progcache/nvrtc"
/* The most lines a record keeps (the newest). */
#define PROGCACHE__NVRTC_RECORD_LINES 16

/* The trusted records' lines into out (replacing its contents): this
 * user's file, then root's (an administrator's import serves every user),
 * each only when it is a regular file of that owner that nobody else can
 * write (no group or other write bit, whatever the cache's group).
 * Missing or untrusted files add nothing (the untrusted are counted,
 * records_untrusted, and said once). PROGCACHE_OK, or PROGCACHE_ENOMEM. */
int progcache__file_nvrtc_read(progcache_file *file, progcache_buf *out);

/* Put lines (whole "\n"-terminated lines; the first of each path and
 * identity wins) in front of this user's record, keeping at most max_lines
 * lines, each line once. Written whole or not at all (temp file, rename).
 * PROGCACHE_OK, PROGCACHE_EINVAL (not lines), PROGCACHE_EIO. */
int progcache__file_nvrtc_add(progcache_file *file, const char *lines, size_t len,
                              size_t max_lines);

#endif
