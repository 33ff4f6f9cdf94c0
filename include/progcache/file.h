/*
 * progcache/file.h - the cache directory: cuda.core's FileStreamProgramCache
 * layout, with progcache's integrity checks, size cap and statistics.
 *
 *   <root>/entries/<h[0:2]>/<h[2:64]>   raw artifact bytes, h = hex SHA-256(key)
 *   <root>/tmp/                          writes in progress (mode 0700, or
 *                                        02770 in a group-shared cache)
 *   <root>/progcache/                    progcache's own state; cuda.core
 *                                        ignores it
 * docs/FORMAT.md describes it precisely.
 *
 * A cache directory is a store (progcache/store.h): progcache_file_store()
 * gives that view, to read and write it by key or to stack it under other
 * tiers (progcache_open_tiers). Looking after one (listing, verify, prune,
 * export, import) is in progcache/admin.h.
 */
#ifndef PROGCACHE_FILE_H
#define PROGCACHE_FILE_H

#include "common.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A cache directory, opened. */
typedef struct progcache_file progcache_file;

typedef struct progcache_file_options {
    unsigned int version; /* PROGCACHE_FILE_OPTIONS_VERSION */

    /* Size cap in bytes. When a put takes the total over the cap, the
     * least recently used entries are evicted until the total is at the
     * low-water mark. 0: not set, take the directory's setting max_size
     * (progcache/settings.h: its settings file, $PROGCACHE_MAX_SIZE, else
     * PROGCACHE_MAX_SIZE_DEFAULT, 5 GiB); PROGCACHE_SIZE_NONE: no cap. */
    uint64_t max_size;
    /* Low-water mark in percent of max_size, 1-100; 0: the setting
     * low_water_percent (90 by default). */
    unsigned int low_water_percent;

    unsigned int flags; /* PROGCACHE_FILE_* below */

    progcache_log_fn log; /* optional */
    void *log_ctx;

    /* Version 2. The largest entry put accepts and get reads, in bytes;
     * 0: the setting max_artifact_size (PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT,
     * 1 GiB, by default). */
    uint64_t max_artifact_size;
} progcache_file_options;

/* Skip fsync of entries and directories: faster puts, but a completed put
 * may be lost (never torn) if the machine loses power. Without this flag
 * the setting no_fsync decides (false by default). */
#define PROGCACHE_FILE_NO_FSYNC 0x1u
/* Open an existing cache for reading only: no directory is created, and
 * put/remove/clear fail with PROGCACHE_EINVAL. */
#define PROGCACHE_FILE_READONLY 0x2u
/* A cache shared by the members of a group (a cluster's scratch space):
 * trust entries owned by other users when their group is the cache
 * directory's group, and make every directory 02770, entries 0640 and
 * state files 0660, whatever the umask. The environment variable
 * PROGCACHE_SHARED_GROUP (a group's name or number) does the same and
 * checks that the directory is of that group. Without either, the cache is
 * private: directories 0700, files 0600, and only entries owned by this
 * user (or root) are trusted: a file someone else placed in the directory
 * is a miss, never loaded. A directory that belongs to another user is
 * opened but never written (docs/SECURITY.md, docs/SHARED.md). */
#define PROGCACHE_FILE_SHARED_GROUP 0x4u
/* Skip the checks of entries on read (see docs/RELIABILITY.md): the
 * SHA-256 that progcache stores with each entry, and, for entries without
 * one (cuda.core's), the structure of artifacts (a CUBIN must be a whole
 * ELF file, ...). Hits get a few microseconds cheaper; damage is then
 * caught only by compile-or-load's own structure check and by the driver
 * refusing to load. */
#define PROGCACHE_FILE_NO_VERIFY 0x8u
/* The options alone decide: the directory's settings file and the
 * variables that override it (PROGCACHE_MAX_SIZE, ...) are not read, and
 * an option left 0 takes the built-in default (progcache/settings.h). */
#define PROGCACHE_FILE_NO_SETTINGS 0x10u
/* fsync every put, whatever the setting no_fsync says (the way a program
 * overrides a settings file or variable that turned fsync off). Not with
 * PROGCACHE_FILE_NO_FSYNC. */
#define PROGCACHE_FILE_FSYNC 0x20u
/* With PROGCACHE_FILE_READONLY: where the directory has no size counters
 * (no progcache/state: a directory only cuda.core wrote to) and the open
 * counted its entries by a scan, keep that count as progcache/state when
 * the directory is this user's and may be written, so that the next
 * read-only open reads it instead of scanning again. The admin commands
 * (`progcache stats`, `prune`) ask for it; without it a read-only open
 * writes nothing (PROGCACHE_READONLY=1 never sets it). */
#define PROGCACHE_FILE_KEEP_COUNTS 0x40u

#define PROGCACHE_FILE_OPTIONS_VERSION 2
#define PROGCACHE_FILE_OPTIONS_INIT \
    PROGCACHE__INIT(progcache_file_options, PROGCACHE_FILE_OPTIONS_VERSION)
PROGCACHE_API void progcache_file_options_init(progcache_file_options *opts);

/*
 * progcache_store_file_new() : open (creating if needed) a cache directory.
 * O(1) in the number of entries: nothing is scanned at open but the top
 * level of the directory (one readdir).
 *
 * The directory must be missing, empty, or a cache: its top level may hold
 * only the directories entries/, tmp/ (cuda.core's layout) and progcache/
 * (progcache's own files). Any other name means the path is somebody's
 * directory (a home, a project), which a cache would sweep and clear, so
 * it is refused, read-only opens included. A cache removes only files it
 * names itself (docs/RELIABILITY.md, "What the cache may delete").
 *
 * The size cap and the other values left 0 in opts come from the
 * directory's settings (progcache/settings.h): its settings file,
 * progcache/config, then the environment. A value there that cannot be
 * used fails the open with PROGCACHE_EINVAL naming the setting and the
 * file's line or the variable; a settings file that cannot be read (not a
 * regular file, no permission) fails it too. progcache_file_settings()
 * says what is in force and where each value came from.
 *
 * When progcache/lock, progcache/state or progcache/stats cannot be used (not
 * a regular file, no permission, the file size limit), the store still
 * opens and works without it (no inter-process eviction lock, counters of
 * this process alone, no statistics), and says so through opts->log.
 *
 * Gets, puts and the admin functions read an entry only up to
 * max_artifact_size bytes: a put of more is refused with PROGCACHE_EINVAL
 * (the message gives both sizes and the option), a get of a larger entry
 * file returns PROGCACHE_ECORRUPT without reading it (the entry is left in
 * place). A write that would cross the process's file size limit (ulimit
 * -f) is not attempted: the put fails with PROGCACHE_EIO naming the limit,
 * and the process never gets SIGXFSZ.
 *
 * @param out  [out] the store; release with progcache_store_free().
 * @param path the cache directory.
 * @param opts NULL for defaults.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (path NULL or empty, bad options,
 *         a directory that is not a cache: the message names it and the
 *         first name that does not belong); PROGCACHE_EIO when the
 *         directory cannot be created or used (path is a file, no
 *         permission, read-only file system, full disk): the message names
 *         the path and the reason; PROGCACHE_ENOMEM.
 * Safe for many threads and many processes on one host at once.
 */
PROGCACHE_API int progcache_store_file_new(progcache_store **out, const char *path,
                                           const progcache_file_options *opts);

/*
 * progcache_file_open() : progcache_store_file_new(), as the typed handle
 * the admin functions (progcache/admin.h) take. CONSTRUCTOR.
 * @param out [out] release with progcache_file_close() (or, once handed
 *            over as a store, with whatever owns the store).
 * @return as progcache_store_file_new().
 */
PROGCACHE_API int progcache_file_open(progcache_file **out, const char *path,
                                      const progcache_file_options *opts);

/* progcache_file_close() : release a cache directory. NULL-safe.
 * DESTRUCTOR. The same as progcache_store_free(progcache_file_store(f)). */
PROGCACHE_API void progcache_file_close(progcache_file *file);

/* progcache_file_store() : the cache directory as a store: the same
 * object, borrowed (freeing either frees both). NULL for NULL. */
PROGCACHE_API progcache_store *progcache_file_store(progcache_file *file);

/* progcache_store_as_file() : the cache directory behind store, or NULL
 * when store is another kind of store (or NULL). Borrowed. */
PROGCACHE_API progcache_file *progcache_store_as_file(progcache_store *store);

/* progcache_file_path() : the directory as opened. Borrowed, lives as long
 * as the handle. NULL for NULL. */
PROGCACHE_API const char *progcache_file_path(const progcache_file *file);

/* progcache_file_seal_mechanism() : where this directory's entries are
 * sealed: "xattr" (an extended attribute on each entry) or "sidecar" (a
 * file per entry under progcache/seals/, where the file system has no user
 * extended attributes: NFS before 4.2, sshfs, some FUSE and SMB mounts;
 * docs/FORMAT.md). NULL for NULL. (i20nfs) */
PROGCACHE_API const char *progcache_file_seal_mechanism(const progcache_file *file);

/* progcache_file_flight_mechanism() : how processes that miss the same key
 * wait for one compile in this directory: "range" (byte-range locks on
 * progcache/flight) or "lease" (lease files in progcache/flight.d/, on a
 * network file system whose byte-range locks may not reach the other
 * clients, or where PROGCACHE_FLIGHT_LOCK=lease). NULL for NULL. (i20nfs) */
PROGCACHE_API const char *progcache_file_flight_mechanism(const progcache_file *file);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_FILE_H */
