/* Internal: the cache directory (src/dir/), as the rooms above the file
 * tier reach it: this header and no store/file header. The directory's
 * own records beside the entries, which the tier itself never reads: the
 * NVRTC versions' records (dir_nvrtc.c), the explain index
 * (dir_explain.c); the admin functions' check (dir_admin.c). The public
 * functions of progcache/entries.h that look after a directory (foreach,
 * read by name, verify, prune, clear) are defined here too. */
#ifndef PROGCACHE_DIR_H
#define PROGCACHE_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error.h" /* PROGCACHE_PRINTF */
#include "progcache/file.h"
#include "progcache/sys/store.h"

/* ---- NVRTC records -------------------------------------------------------
 * progcache/nvrtc-<uid>, text lines that src/cuda/nvrtc_record.c writes
 * and reads, and that export and import carry as the archive member
 * progcache/nvrtc (docs/FORMAT.md). */

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

/* ---- the explain index ---------------------------------------------------
 * docs/FORMAT.md, "The explain index": per program identity, the inputs of
 * the keys stored for it, so that a miss can say which input differs. The
 * records are text lines that src/program/explain.c writes and reads;
 * dir_explain.c only reads, merges, bounds and publishes them. A clear
 * (the tier's, store/file/file_sweep.c) removes the whole index. */

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

/* ---- places ---------------------------------------------------------------
 * The places of a cache directory's progcache/ that the layers above use
 * (dir_place.c). The file tier owns the layout: it names them
 * (docs/FORMAT.md) and makes them with its rules; the layers above ask for
 * a place, never a path. */
typedef enum progcache__place {
    PROGCACHE__PLACE_FLIGHT,  /* progcache/flight: the compile locks (a file) */
    PROGCACHE__PLACE_FLIGHT_D, /* progcache/flight.d/: lease files on network file systems */
    PROGCACHE__PLACE_PCH      /* progcache/pch-<uid>/: this user's PCHs */
} progcache__place;

/* "progcache/flight", "progcache/pch-1000": the place's path under the
 * cache directory, for messages. Returns out. */
const char *progcache__store_place_path(char *out, size_t len, progcache__place place);

struct stat;
/* 1 when store is a file store over another user's cache directory, which
 * it writes nothing into (file_perm.c); else 0. */
int progcache__store_foreign(progcache_store *store);
/* For the cache over a file store (progcache_store_as_file), a file it
 * keeps in the directory's progcache/ (PROGCACHE__PLACE_FLIGHT): opened
 * with the file store's rules (a regular file, never followed or waited
 * on, made with the cache's mode whatever the umask, refused when another
 * user's: docs/SHARED.md). -1 with errno: EPERM and why (len bytes) when
 * refused; EROFS when the store writes nothing (read-only, or another
 * user's cache). Not a file store: EINVAL. */
int progcache__store_open_own(progcache_store *store, progcache__place place, int flags,
                              struct stat *st, char *why, size_t len);
/* Open a directory of the file store's progcache/ shared by the cache's
 * users (PROGCACHE__PLACE_FLIGHT_D), making it first with the cache's
 * directory mode and group whatever the umask (0700, or 02770 in a team's
 * cache). -1 with errno (EROFS: the store writes nothing; EINVAL: not a
 * file store). */
int progcache__store_open_own_dir(progcache_store *store, progcache__place place);
/* Open a directory of the file store's progcache/ that is this user's
 * alone (PROGCACHE__PLACE_PCH): made, when missing and the store may
 * write, exactly 0700 without the group or setgid bit a team's cache
 * passes on; then checked on its descriptor to be this user's with no
 * access for others. -1 with errno and why (a phrase: "cannot create it:
 * ...", "it belongs to uid 1001 with mode 0750, ..."). */
int progcache__store_open_private_dir(progcache_store *store, progcache__place place, char *why,
                                      size_t len);

/* ---- the admin functions ------------------------------------------------ */

/* PROGCACHE_OK when file is a cache directory, else PROGCACHE_EINVAL
 * naming the function fn. */
int progcache__admin_file(const progcache_file *file, const char *fn);

/* ---- what archives need of a cache directory (dir_import.c) ---------------
 * src/archive/ reads a directory through the store interface (foreach) and
 * progcache_file_foreach; it writes one through these, never through the
 * file tier's headers. */

/* PROGCACHE_OK when file may be written; else the tier's refusal (what:
 * "import"), naming whose cache it is. */
int progcache__dir_writable(progcache_file *file, const char *what);
/* The largest entry file reads and puts (its max_artifact_size). */
uint64_t progcache__dir_max_artifact_size(const progcache_file *file);
/* Store data (with meta's records; meta may be NULL) as the entry at rel
 * ("entries/ab/<62 hex>", shard 0xab) through the tier's put path (temp,
 * fsync, rename): an archive names entries by hash, not by key. */
int progcache__dir_put_entry(progcache_file *file, const char *rel, int shard, const void *data,
                             size_t size, const progcache_entry_meta *meta);
/* An unlinked temporary file on the cache's file system (O_TMPFILE), or
 * -1 with errno (not supported there: the caller takes tmpfile()). */
int progcache__dir_tmpfile(progcache_file *file);
/* A message to the cache's log, as the tier's own. */
void progcache__dir_log(progcache_file *file, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4);

#endif
