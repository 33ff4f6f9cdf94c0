/*
 * progcache/entries.h - the entries of a cache directory: listing them,
 * reading one by name, verifying, pruning and clearing the directory. The
 * `progcache` command's ls, verify, prune and clear are built on these.
 * progcache/admin.h includes this header (and adds archives: export,
 * import), so a program that includes admin.h has every function here.
 *
 * They work on a cache directory (progcache/file.h): open one with
 * progcache_file_open(), read-only (PROGCACHE_FILE_READONLY) for
 * functions that only look. Every function here returns PROGCACHE_EINVAL
 * for a NULL cache directory. Everything is safe while other processes
 * use the cache: entries are only ever added by the atomic put path and
 * removed only if they are still the file that was examined.
 */
#ifndef PROGCACHE_ENTRIES_H
#define PROGCACHE_ENTRIES_H

#include "artifact.h"
#include "common.h"
#include "file.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===========================================================================
 * The entries of a cache directory
 * ======================================================================== */

/* progcache_entry, progcache_entry_fn, progcache_progress_fn and the
 * PROGCACHE_ENTRIES_* flags: progcache/store.h (every store that can be
 * listed hands its entries over as they are). */

/*
 * progcache_file_foreach() : call fn for every entry of the cache
 * directory, in order of name (shard by shard, sorted within a shard).
 * Entries that vanish meanwhile (evicted, removed) are skipped; files that
 * are not entries (wrong name, not a regular file, symbolic links) are
 * never reported or followed. Reading an entry does not count as a use
 * (its atime is left alone where the mount allows).
 * @param store a file store (read-only is enough).
 * @param flags PROGCACHE_ENTRIES_*.
 * @return PROGCACHE_OK; fn's non-zero value if it stopped the walk;
 *         PROGCACHE_EINVAL; PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_file_foreach(progcache_file *file, unsigned int flags,
                                         progcache_entry_fn fn, void *ctx);

/*
 * progcache_file_read_entry() : read one entry by its file name (64 hex
 * digits, as progcache_entry.name) into out.
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND (no such entry, or not a
 *         regular file); PROGCACHE_EINVAL (name is not 64 hex digits);
 *         PROGCACHE_ECORRUPT (larger than the store's max_artifact_size:
 *         not read); PROGCACHE_EIO; PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_file_read_entry(progcache_buf *out, progcache_file *file,
                                            const char *name);

/* ===========================================================================
 * verify
 * ======================================================================== */

/* Remove each bad entry (if it is still the file that was checked). */
#define PROGCACHE_VERIFY_FIX 0x1u
/* Also remove the entries of no known kind (see progcache_file_verify),
 * which are otherwise reported and kept; implies PROGCACHE_VERIFY_FIX. */
#define PROGCACHE_VERIFY_FIX_UNKNOWN 0x2u
/* Seal the entries without a seal that are this user's own and whole
 * artifacts of a known kind (a copy that lost its extended attributes):
 * what the check read is what is sealed, through the file it was read
 * from. Each entry without a seal says what was done in its
 * progcache_entry.unsealed. Not with a cache opened read-only. */
#define PROGCACHE_VERIFY_SEAL 0x4u

/* Called by progcache_file_verify for each file or directory in the cache
 * directory that is not part of a cache, with its path relative to the
 * cache directory ("entries/ab/notes.txt") and what is wrong with it
 * ("not an entry"). Return 0 to go on, anything else to stop. */
typedef int (*progcache_foreign_fn)(void *ctx, const char *path, const char *what);

typedef struct progcache_verify_options {
    unsigned int version; /* PROGCACHE_VERIFY_OPTIONS_VERSION */
    unsigned int flags;   /* PROGCACHE_VERIFY_* */
    /* Optional: called for every entry checked, after the verdict (and the
     * removal, with PROGCACHE_VERIFY_FIX). entry->artifact holds the
     * verdict (NULL when the entry could not be read, or is not a regular
     * file); entry->error is NULL for a good entry and the reason for a
     * bad one. */
    progcache_entry_fn on_entry;
    void *ctx; /* passed to on_entry and on_foreign */
    /* Optional (version 2): called for each thing that is not part of a
     * cache (see progcache_file_verify), after the entries. */
    progcache_foreign_fn on_foreign;
} progcache_verify_options;

#define PROGCACHE_VERIFY_OPTIONS_VERSION 2
#define PROGCACHE_VERIFY_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_verify_options, PROGCACHE_VERIFY_OPTIONS_VERSION)
PROGCACHE_API void progcache_verify_options_init(progcache_verify_options *opts);

typedef struct progcache_verify_result {
    unsigned int version; /* PROGCACHE_VERIFY_RESULT_VERSION */
    uint64_t checked;
    uint64_t bad;     /* entries that failed a check */
    uint64_t removed; /* of those, removed (PROGCACHE_VERIFY_FIX) */
    /* Version 2: files and directories that are not part of a cache, left
     * alone (see progcache_file_verify). */
    uint64_t foreign;
    /* Version 3: entries of no known kind (not counted in bad), and of
     * those, removed (PROGCACHE_VERIFY_FIX_UNKNOWN; also in removed). */
    uint64_t unknown;
    uint64_t unknown_removed;
} progcache_verify_result;

#define PROGCACHE_VERIFY_RESULT_VERSION 3
#define PROGCACHE_VERIFY_RESULT_INIT \
    PROGCACHE__INIT(progcache_verify_result, PROGCACHE_VERIFY_RESULT_VERSION)

/*
 * progcache_file_verify() : check every entry of the cache directory, and
 * report what in it is not part of a cache.
 *
 * An entry is bad when it is provably damaged:
 *  - it is of a known kind (CUBIN, PTX, LTO-IR, fatbin) and not a valid
 *    one (progcache_artifact_inspect: truncated, malformed);
 *  - its bytes do not match the seal progcache recorded when it stored
 *    them (an extended attribute; entries cuda.core wrote have none, and
 *    older seals, which did not bind the entry's name, are not checked:
 *    docs/FORMAT.md), or
 *    the seal is another entry's: the file was copied, linked or moved
 *    here from another key's path;
 *  - it is larger than the store's max_artifact_size (not read, and never
 *    removed: a process allowing more may use it);
 *  - something other than a regular file is at its path (a FIFO, socket,
 *    device node, symbolic link or directory; a get treats it as a miss).
 * An entry of no known kind whose bytes nothing shows to be damaged (no
 * seal, or a seal that matches) is not bad: `progcache put` and cuda.core
 * store any bytes. It is counted in out->unknown, passed to on_entry with
 * error NULL and an artifact of kind PROGCACHE_KIND_UNKNOWN, and kept
 * unless PROGCACHE_VERIFY_FIX_UNKNOWN asks for exactly its removal.
 * With PROGCACHE_VERIFY_FIX a bad entry is removed, but only if it is
 * still the file that was checked (same inode, size and mtime: an entry
 * another process replaced meanwhile stays), and counted as
 * corrupt_removed in the statistics; a directory at an entry's path is
 * never removed (its contents are not the cache's to judge) and neither is
 * an entry too large to read.
 *
 * Not part of a cache, reported through on_foreign and counted in
 * out->foreign, and never removed, even with PROGCACHE_VERIFY_FIX: at the
 * top level anything but the directories entries/, tmp/ and progcache/;
 * in entries/ anything but shard directories (2 lowercase hex digits); in
 * a shard anything not named as an entry (62 lowercase hex digits); in
 * tmp/ anything but regular files named as progcache's and cuda.core's
 * temp files. progcache/ holds progcache's own files and is not looked
 * into.
 * @param out   [out] counts; set out->version first (a version 1 struct
 *              gets no foreign count).
 * @param store a file store; writable for PROGCACHE_VERIFY_FIX.
 * @param opts  NULL for defaults (check only).
 * @return PROGCACHE_OK (whatever was found: see out); the on_entry or
 *         on_foreign callback's non-zero value if it stopped the walk;
 *         PROGCACHE_EINVAL (bad arguments, FIX on a read-only store);
 *         PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_file_verify(progcache_verify_result *out, progcache_file *file,
                                        const progcache_verify_options *opts);

/* ===========================================================================
 * prune
 * ======================================================================== */

typedef struct progcache_prune_options {
    unsigned int version; /* PROGCACHE_PRUNE_OPTIONS_VERSION */
    /* Remove least recently used entries until the directory holds at most
     * this many bytes. 0: no size bound (to empty a cache, use
     * progcache_store_clear). */
    uint64_t max_size;
    /* Remove every entry not used for this many seconds (by its atime,
     * which progcache refreshes on each hit). 0: no age bound. */
    uint64_t older_than;
    /* Version 2. Optional: progress, "scanning" the 256 shard directories,
     * then "removing" the entries to remove. */
    progcache_progress_fn on_progress;
    void *ctx; /* passed to on_progress */
} progcache_prune_options;

#define PROGCACHE_PRUNE_OPTIONS_VERSION 2
#define PROGCACHE_PRUNE_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_prune_options, PROGCACHE_PRUNE_OPTIONS_VERSION)
PROGCACHE_API void progcache_prune_options_init(progcache_prune_options *opts);

typedef struct progcache_prune_result {
    unsigned int version; /* PROGCACHE_PRUNE_RESULT_VERSION */
    uint64_t removed;       /* entries removed */
    uint64_t removed_bytes;
    uint64_t entries;    /* entries left */
    uint64_t total_size; /* bytes left */
} progcache_prune_result;

#define PROGCACHE_PRUNE_RESULT_VERSION 1
#define PROGCACHE_PRUNE_RESULT_INIT \
    PROGCACHE__INIT(progcache_prune_result, PROGCACHE_PRUNE_RESULT_VERSION)

/*
 * progcache_file_prune() : trim the cache directory by size and/or age,
 * least recently used entries first, with the machinery of size-cap
 * eviction (one pass, under the eviction lock; an entry read or replaced
 * after the scan stays). Removed entries count as evictions.
 * @param out   [out, optional] what was removed and what is left.
 * @param store a writable file store.
 * @param opts  at least one bound.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (no bound given, read-only
 *         store, bad version); PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_file_prune(progcache_prune_result *out, progcache_file *file,
                                       const progcache_prune_options *opts);

/*
 * progcache_file_clear() : remove every entry of the cache directory, as
 * progcache_store_clear() does, reporting progress ("removing", one step
 * per shard directory of 256). Files that are not entries are left alone.
 * @param out      [out, optional] removed: the entries removed (from the
 *                 directory's accounting: entries other processes add or
 *                 remove meanwhile may be counted or not); entries and
 *                 total_size: what is left.
 * @param progress optional; called between shards, never while the
 *                 directory's eviction lock is held (each shard is cleared
 *                 and measured under it), so it may call into the cache.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (read-only store); PROGCACHE_EIO
 *         (an entry could not be removed: the message names it; the
 *         others were); progress's non-zero value if it stopped.
 */
PROGCACHE_API int progcache_file_clear(progcache_prune_result *out, progcache_file *file,
                                       progcache_progress_fn progress, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_ENTRIES_H */
