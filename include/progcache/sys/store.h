/*
 * progcache/sys/store.h - storage backends ("stores") behind a cache.
 *
 * A store maps arbitrary key bytes to artifact bytes. progcache ships a file
 * store (the cuda.core-compatible directory) and an in-process memory store;
 * a cache (progcache/cache.h) stacks them into tiers. This header is for
 * using a store on its own and for writing a new backend; like libgit2's
 * sys/ headers it may change between minor versions, unlike cache.h.
 */
#ifndef PROGCACHE_SYS_STORE_H
#define PROGCACHE_SYS_STORE_H

#include "../common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct progcache_store progcache_store;

/*
 * The backend vtable. Every function returns PROGCACHE_OK or a negative
 * code and sets the thread's last error on failure; get returns
 * PROGCACHE_ENOTFOUND on a miss without setting a message. All functions
 * must be safe to call from several threads at once on one store.
 * free is mandatory; it releases everything the store owns.
 */
struct progcache_store {
    unsigned int version; /* PROGCACHE_STORE_VERSION */
    const char *name;     /* "file", "memory", ...: for messages and stats */
    int (*get)(progcache_buf *out, progcache_store *store, const void *key, size_t key_len);
    int (*put)(progcache_store *store, const void *key, size_t key_len, const void *data,
               size_t size);
    int (*remove)(progcache_store *store, const void *key, size_t key_len);
    int (*clear)(progcache_store *store);
    int (*count)(uint64_t *out, progcache_store *store);
    int (*total_size)(uint64_t *out, progcache_store *store);
    void (*free)(progcache_store *store);
};

#define PROGCACHE_STORE_VERSION 1

/*
 * Calling a store: these check their arguments (NULL store or key,
 * key_len 0, NULL data with size > 0 give PROGCACHE_EINVAL) and call
 * through the vtable.
 *
 * progcache_store_get() : copy the value of key into out (reusing out's
 *   memory). PROGCACHE_ENOTFOUND on a miss.
 * progcache_store_put() : store (replace) the value of key. When put
 *   returns PROGCACHE_OK the value is readable by every process using the
 *   store (and, for the file store, on disk).
 * progcache_store_remove() : delete key. PROGCACHE_ENOTFOUND if absent
 *   (for the file store also when something other than a regular file is
 *   at the key's path: that is left alone).
 * progcache_store_clear() : delete every entry (for the file store: the
 *   regular files named as entries, and stale temp files; nothing else).
 * progcache_store_count() / progcache_store_total_size() : entries and
 *   bytes stored now (the file store reads these from its accounting, not
 *   a scan; they may lag other processes' writes by a moment).
 */
PROGCACHE_API int progcache_store_get(progcache_buf *out, progcache_store *store,
                                      const void *key, size_t key_len);
PROGCACHE_API int progcache_store_put(progcache_store *store, const void *key, size_t key_len,
                                      const void *data, size_t size);
PROGCACHE_API int progcache_store_remove(progcache_store *store, const void *key,
                                         size_t key_len);
PROGCACHE_API int progcache_store_clear(progcache_store *store);
PROGCACHE_API int progcache_store_count(uint64_t *out, progcache_store *store);
PROGCACHE_API int progcache_store_total_size(uint64_t *out, progcache_store *store);

/* progcache_store_free() : release a store. NULL-safe. */
PROGCACHE_API void progcache_store_free(progcache_store *store);

/* ---------------------------------------------------------------------------
 * The file store: cuda.core's FileStreamProgramCache layout.
 *
 *   <root>/entries/<h[0:2]>/<h[2:64]>   raw artifact bytes, h = hex SHA-256(key)
 *   <root>/tmp/                          writes in progress (mode 0700)
 *   <root>/progcache/                    progcache's own state; cuda.core
 *                                        ignores it
 * docs/FORMAT.md describes it precisely.
 * ------------------------------------------------------------------------- */

typedef struct progcache_file_options {
    unsigned int version; /* PROGCACHE_FILE_OPTIONS_VERSION */

    /* Size cap in bytes; 0: no cap. When a put takes the total over the cap,
     * the least recently used entries are evicted until the total is at the
     * low-water mark. */
    uint64_t max_size;
    /* Low-water mark in percent of max_size; 0: 90. */
    unsigned int low_water_percent;

    unsigned int flags; /* PROGCACHE_FILE_* below */

    progcache_log_fn log; /* optional */
    void *log_ctx;

    /* Version 2. The largest entry put accepts and get reads, in bytes;
     * 0: PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT (1 GiB). */
    uint64_t max_artifact_size;
} progcache_file_options;

/* Skip fsync of entries and directories: faster puts, but a completed put
 * may be lost (never torn) if the machine loses power. */
#define PROGCACHE_FILE_NO_FSYNC 0x1u
/* Open an existing cache for reading only: no directory is created, and
 * put/remove/clear fail with PROGCACHE_EINVAL. */
#define PROGCACHE_FILE_READONLY 0x2u
/* A cache shared by the members of a group (a cluster's scratch space):
 * trust entries owned by other users when their group is the cache
 * directory's group, and write entries and tmp/ group-readable/writable.
 * Without it only entries owned by this user are trusted: a file someone
 * else placed in the directory is a miss, never loaded (docs/SECURITY.md). */
#define PROGCACHE_FILE_SHARED_GROUP 0x4u
/* Skip the checks of entries on read (see docs/RELIABILITY.md): the
 * SHA-256 that progcache stores with each entry, and, for entries without
 * one (cuda.core's), the structure of artifacts (a CUBIN must be a whole
 * ELF file, ...). Hits get a few microseconds cheaper; damage is then
 * caught only by compile-or-load's own structure check and by the driver
 * refusing to load. */
#define PROGCACHE_FILE_NO_VERIFY 0x8u

#define PROGCACHE_FILE_OPTIONS_VERSION 2
#define PROGCACHE_FILE_OPTIONS_INIT PROGCACHE__OPTIONS_INIT(PROGCACHE_FILE_OPTIONS_VERSION)
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

/* ---------------------------------------------------------------------------
 * The memory store: an in-process LRU with a byte cap.
 * ------------------------------------------------------------------------- */

typedef struct progcache_memory_options {
    unsigned int version; /* PROGCACHE_MEMORY_OPTIONS_VERSION */
    /* Byte cap over all values; 0: 64 MiB. A value larger than the cap is
     * not kept (put succeeds; the next get misses). */
    uint64_t max_size;
} progcache_memory_options;

#define PROGCACHE_MEMORY_OPTIONS_VERSION 1
#define PROGCACHE_MEMORY_OPTIONS_INIT PROGCACHE__OPTIONS_INIT(PROGCACHE_MEMORY_OPTIONS_VERSION)
PROGCACHE_API void progcache_memory_options_init(progcache_memory_options *opts);

/*
 * progcache_store_memory_new() : a new, empty memory store. Thread-safe; a
 * hit costs no system call.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_store_memory_new(progcache_store **out,
                                             const progcache_memory_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_SYS_STORE_H */
