/* Internal to src/dir/ (the rooms above include dir/dir.h): the explain
 * index a cache directory keeps (dir_explain.c;
 * docs/FORMAT.md, "The explain index"): per program identity, the inputs of
 * the keys stored for it, so that a miss can say which input differs. The
 * records are text lines that src/program/explain.c writes and reads; this
 * file only reads, merges, bounds and publishes them. */
#ifndef PROGCACHE_DIR_EXPLAIN_H
#define PROGCACHE_DIR_EXPLAIN_H

#include <stddef.h>

#include "buf.h"
#include "progcache/file.h"

/* The most records one index file keeps (the newest), the longest record,
 * and so the largest file read or written. */
#define PROGCACHE__EXPLAIN_KEEP 8
#define PROGCACHE__EXPLAIN_LINE_MAX ((size_t)8 << 10)
#define PROGCACHE__EXPLAIN_FILE_MAX (PROGCACHE__EXPLAIN_KEEP * PROGCACHE__EXPLAIN_LINE_MAX)
/* The most index files a shard keeps (the newest by time written): the
 * index holds at most 256 times as many, two per program stored. */
#define PROGCACHE__EXPLAIN_SHARD_FILES 64

/* The whole lines of the index file of id (32 bytes) into out (replacing
 * its contents), when it is trusted as an entry is (a regular file this
 * user, root or, in a team's cache, the team wrote, that nobody else can
 * write) and not larger than PROGCACHE__EXPLAIN_FILE_MAX. A missing file
 * adds nothing; a link on the way, or a file that is not trusted, too
 * large or not a regular file adds nothing and is counted
 * (explain_refused). PROGCACHE_OK, or PROGCACHE_ENOMEM. */
int progcache__file_explain_read(progcache_file *file, const unsigned char id[32],
                                 progcache_buf *out);

/* Put line (one "\n"-terminated line of at most PROGCACHE__EXPLAIN_LINE_MAX
 * bytes) first in the index file of id, dropping the lines whose first
 * field is line's and keeping at most PROGCACHE__EXPLAIN_KEEP. Written
 * whole or not at all (temp file, rename over). Counted (explain_records).
 * A new file makes the oldest of its shard go beyond
 * PROGCACHE__EXPLAIN_SHARD_FILES.
 * PROGCACHE_OK, PROGCACHE_EINVAL (not one line, too long), PROGCACHE_EIO
 * (read-only or another user's cache included). */
int progcache__file_explain_add(progcache_file *file, const unsigned char id[32],
                                const char *line, size_t len);

#endif
