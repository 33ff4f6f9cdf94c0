/*
 * progcache/admin.h - looking after a cache directory: what is in it
 * (artifact kinds, architectures, kernel names), checking it, trimming it,
 * and moving it between machines. The `progcache` command is built on
 * these functions and nothing else.
 *
 * They work on a file store (progcache/sys/store.h), the cache directory
 * itself: open one with progcache_store_file_new(), read-only
 * (PROGCACHE_FILE_READONLY) for functions that only look. Every function
 * here returns PROGCACHE_EINVAL for a store that is not a file store.
 * Everything is safe while other processes use the cache: entries are
 * only ever added by the atomic put path and removed only if they are
 * still the file that was examined.
 */
#ifndef PROGCACHE_ADMIN_H
#define PROGCACHE_ADMIN_H

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
 * @param progress optional.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (read-only store); PROGCACHE_EIO
 *         (an entry could not be removed: the message names it; the
 *         others were); progress's non-zero value if it stopped.
 */
PROGCACHE_API int progcache_file_clear(progcache_prune_result *out, progcache_file *file,
                                       progcache_progress_fn progress, void *ctx);

/* ===========================================================================
 * export / import
 * ======================================================================== */

typedef struct progcache_archive_options {
    unsigned int version; /* PROGCACHE_ARCHIVE_OPTIONS_VERSION */
    /* Optional: called for each entry written to (export) or read from
     * (import) the archive, with entry->artifact filled in (so a caller
     * can name entries that are not valid artifacts) and entry->data. */
    progcache_entry_fn on_entry;
    void *ctx; /* passed to on_entry and on_progress */
    /* Version 2. Optional: progress. Export: "exporting", one step per
     * entry, of the directory's entry count. Import: "checking", the
     * archive's bytes (of its size; 0 for a stream), then "importing",
     * one step per entry. */
    progcache_progress_fn on_progress;
    /* Version 3: signed bundles (docs/FORMAT.md, "Signed bundles").
     * Export: with sign_key, an Ed25519 private key in PEM (as
     * `openssl genpkey -algorithm ed25519` writes it; not encrypted),
     * sign_key_len bytes of it, the archive ends with a manifest of every
     * entry and a detached signature over it. */
    const void *sign_key;
    size_t sign_key_len;
    /* Export with sign_key: the NVRTC version the manifest records
     * ("13.0"); NULL: "unknown" (the store does not load NVRTC). */
    const char *nvrtc_version;
    /* Import and progcache_archive_verify: with verify_key, an Ed25519
     * public key in PEM (`openssl pkey -pubout`), verify_key_len bytes of
     * it, the archive is refused, before anything is written, unless it is
     * signed by that key and unchanged since: see progcache_archive_verify. */
    const void *verify_key;
    size_t verify_key_len;
} progcache_archive_options;

#define PROGCACHE_ARCHIVE_OPTIONS_VERSION 3
#define PROGCACHE_ARCHIVE_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_archive_options, PROGCACHE_ARCHIVE_OPTIONS_VERSION)
PROGCACHE_API void progcache_archive_options_init(progcache_archive_options *opts);

typedef struct progcache_archive_result {
    unsigned int version; /* PROGCACHE_ARCHIVE_RESULT_VERSION */
    uint64_t entries; /* entries exported or imported */
    uint64_t bytes;   /* their bytes */
    uint64_t invalid; /* of those, not valid artifacts (still copied) */
    /* Version 2. After a verified import or progcache_archive_verify: 1,
     * the signer (lowercase hex SHA-256 of the 32-byte Ed25519 public key)
     * and the NVRTC version the signed manifest records ("unknown" when
     * the exporter did not know it). Else 0 and "". */
    int verified;
    char signer[65];
    char nvrtc_version[32];
} progcache_archive_result;

#define PROGCACHE_ARCHIVE_RESULT_VERSION 2
#define PROGCACHE_ARCHIVE_RESULT_INIT \
    PROGCACHE__INIT(progcache_archive_result, PROGCACHE_ARCHIVE_RESULT_VERSION)

/*
 * progcache_file_export() : write every entry of the cache directory to a
 * POSIX ustar archive at path (docs/FORMAT.md), as regular files named
 * entries/<2 hex>/<62 hex>, sorted by name.
 *
 * What is at path decides how it is written; nothing that is not a regular
 * file is ever replaced:
 *  - nothing, or a regular file: the archive is written under a temporary
 *    name next to path and renamed into place when complete, so a failed
 *    export leaves no partial archive (and an existing file as it was);
 *  - a character device (/dev/null, a tape) or a FIFO: written in place,
 *    never created or truncated. A FIFO must already have a reader: the
 *    open does not wait for one (it fails at once, PROGCACHE_EIO);
 *  - a directory, a block device or a socket: refused (PROGCACHE_EINVAL);
 *  - a symbolic link: followed, and the rules above apply to its target
 *    (the link stays a link); a link to nothing is refused
 *    (PROGCACHE_EINVAL).
 * With opts->sign_key the archive is a signed bundle (docs/FORMAT.md,
 * "Signed bundles"); a key that is not a PEM Ed25519 private key is
 * PROGCACHE_EINVAL, before anything is written.
 * A write that fails (a full disk, /dev/full) is PROGCACHE_EIO. SIGPIPE is
 * never raised: writing to a pipe or FIFO whose reader has gone fails
 * with EPIPE.
 * @param out [out, optional] what was exported.
 * @return PROGCACHE_OK; PROGCACHE_EIO (the message names the file);
 *         PROGCACHE_EINVAL; PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_file_export(progcache_archive_result *out, progcache_file *file,
                                        const char *path, const progcache_archive_options *opts);

/*
 * progcache_file_export_fd() : progcache_file_export() to an open file
 * descriptor (standard output, a pipe, a socket, a file the caller
 * opened), from its current position. The caller keeps fd open and
 * closes it; a regular file is fsync'ed. A failed export leaves what was
 * written so far. A non-blocking fd is waited on as a blocking one would.
 * @param name  names the archive in messages ("standard output"); NULL
 *              for "(file descriptor)".
 * @return as progcache_file_export().
 */
PROGCACHE_API int progcache_file_export_fd(progcache_archive_result *out, progcache_file *file,
                                           int fd, const char *name,
                                           const progcache_archive_options *opts);

/*
 * progcache_store_export_fd() : progcache_file_export_fd() for any store
 * that can be listed (progcache_store_foreach): a cache directory, or a
 * tier of your own with a foreach op, so its entries can move into a
 * cache directory (progcache_file_import) or another machine. Entries
 * whose records the tier vouches for carry them, as from a cache
 * directory; the order is the tier's. An entry the tier could not read
 * (entry->error, no data) is left out of the archive and handed to
 * opts->on_entry, which can say so.
 * @return as progcache_file_export_fd(); PROGCACHE_EINVAL also for a
 *         store that cannot be listed.
 */
PROGCACHE_API int progcache_store_export_fd(progcache_archive_result *out,
                                            progcache_store *store, int fd, const char *name,
                                            const progcache_archive_options *opts);

/*
 * progcache_store_export() : progcache_file_export() (an archive at path,
 * by the same rules) for any store that can be listed, as
 * progcache_store_export_fd: `progcache export --remote URL ARCHIVE`.
 * @return as progcache_file_export(); PROGCACHE_EINVAL also for a store
 *         that cannot be listed.
 */
PROGCACHE_API int progcache_store_export(progcache_archive_result *out, progcache_store *store,
                                         const char *path, const progcache_archive_options *opts);

/*
 * progcache_file_import() : add the entries of a ustar archive to the
 * cache directory.
 *
 * The whole archive is checked before anything is written: every member
 * must be a regular file named entries/<2 hex>/<62 hex> (lowercase, an
 * optional leading "./") or one of the directories entries/ and
 * entries/<2 hex>/; links, devices, absolute or ".." names and anything
 * else make the archive refused, with the member named. Entries then go in
 * through the store's atomic put path (temp file, fsync, rename), never by
 * writing into the directory directly, replacing entries of the same
 * name. Archives written by progcache_file_export and by
 * `tar -cf x.tar entries` in a cache directory (GNU, pax or ustar format)
 * are accepted. The two members of a signed bundle (progcache-bundle/...)
 * are skipped, unless opts->verify_key is given: then the archive is
 * verified first as progcache_archive_verify() does, and a stream or a
 * regular file alike is copied to an unlinked temporary file as it is
 * checked, so the bytes imported are the bytes verified.
 *
 * Reading is bounded: a member larger than the store's max_artifact_size
 * (progcache_file_options) is refused from its header, before its bytes
 * are read, and only one member is held in memory at a time. path may be
 * a regular file or a stream (a FIFO, a character device); a FIFO is read
 * as a pipe is, so the open waits for its writer. A stream is copied to
 * an unlinked temporary file as it is checked (in the cache directory, or
 * the temporary directory where the kernel lacks O_TMPFILE), since it is
 * read twice.
 * @param out [out, optional] what was imported.
 * @return PROGCACHE_OK; PROGCACHE_ECORRUPT (not a tar archive, damaged,
 *         a member that is not a cache entry or is too large: nothing was
 *         imported); PROGCACHE_EIO (the archive cannot be read, or a put
 *         failed: the entries before it are in); PROGCACHE_EINVAL
 *         (read-only store, path is a directory); PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_file_import(progcache_archive_result *out, progcache_file *file,
                                        const char *path, const progcache_archive_options *opts);

/*
 * progcache_file_import_fd() : progcache_file_import() from an open file
 * descriptor (standard input, a pipe, a socket, a file the caller
 * opened). A regular file is read by position from its current offset,
 * anything else as a stream; the caller keeps fd open and closes it. At
 * the end of a stream up to 1 MiB of padding after the archive is read
 * and dropped, so a writer such as tar does not see a broken pipe.
 * @param name  names the archive in messages ("standard input"); NULL for
 *              "(file descriptor)".
 * @return as progcache_file_import().
 */
PROGCACHE_API int progcache_file_import_fd(progcache_archive_result *out, progcache_file *file,
                                           int fd, const char *name,
                                           const progcache_archive_options *opts);

/*
 * progcache_archive_verify() : check a signed bundle without importing it,
 * as progcache_file_import() with opts->verify_key does before it writes
 * anything (a service checking a bundle it downloaded, a CI step).
 *
 * The archive must be one progcache_file_export() wrote with a sign_key:
 * its last two members are the reserved progcache-bundle/manifest and
 * progcache-bundle/signature; the signature must be verify_key's over the
 * manifest, and the manifest's SHA-256 of the archive must match every
 * byte before it, so a changed byte, an added, removed or renamed member
 * anywhere refuses it. Every member is checked as import checks it
 * (bounded by max_artifact_size; a stream is copied to an unlinked
 * temporary file).
 * @param out  [out, optional] version 2: verified, signer, nvrtc_version;
 *             entries and bytes count the entries.
 * @param path the archive (a regular file or a stream).
 * @param max_artifact_size the largest entry accepted; 0: 1 GiB.
 * @param opts verify_key is required; on_progress is called ("checking").
 * @return PROGCACHE_OK; PROGCACHE_ECORRUPT (unsigned, signed by another
 *         key, changed, not a cache archive: the message says which);
 *         PROGCACHE_EINVAL (no verify_key, or not a PEM Ed25519 public
 *         key); PROGCACHE_EIO; PROGCACHE_ENOMEM. Thread-safe.
 */
PROGCACHE_API int progcache_archive_verify(progcache_archive_result *out, const char *path,
                                           uint64_t max_artifact_size,
                                           const progcache_archive_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_ADMIN_H */
