/*
 * progcache/admin.h - looking after a cache directory: what is in it
 * (artifact kinds, architectures, kernel names), checking it, trimming it
 * (those are progcache/entries.h's, which this header includes), and
 * moving it between machines: archives, export and import, signed or not
 * (declared here). The `progcache` command is built on these functions
 * and nothing else.
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
#include "entries.h"
#include "file.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The entries of a cache directory (listing, reading by name, verify,
 * prune, clear): progcache/entries.h, included above. */

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
