/* Internal: the cache directory (src/dir/), as the rooms above the file
 * tier reach it: this header and no store/file header (tests/layers.txt,
 * "only store/file"). What the directory keeps beside the entries, which
 * the tier itself never reads: the NVRTC versions' records (dir_nvrtc.c)
 * and the explain index (dir_explain.c); the places of progcache/ that
 * the cache and the PCH tier use (dir_place.c); the admin functions'
 * check (dir_admin.c) and what an archive's import writes (dir_import.c).
 * The public functions of progcache/entries.h (foreach, read by name,
 * verify, prune, clear) are defined in this room too. */
#ifndef PROGCACHE_DIR_H
#define PROGCACHE_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error.h" /* PROGCACHE_PRINTF */
#include "progcache/file.h"
#include "progcache/sys/store.h"

/* ---- NVRTC records and the explain index ---------------------------------
 * dir_nvrtc.h: progcache/nvrtc-<uid>, the lines src/cuda/nvrtc_record.c
 * writes and reads and archives carry (progcache__file_nvrtc_read, _add).
 * dir_explain.h: the records src/program/explain.c writes and reads
 * (progcache__file_explain_read, _add); the tier's clear empties it. */
#include "dir/dir_explain.h"
#include "dir/dir_nvrtc.h"

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
