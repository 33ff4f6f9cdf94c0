/* Internal: the file store's state (the cache directory), shared by the
 * files of store/file/ and by nothing else: the layers above reach a cache
 * directory through the store vtable (progcache/sys/store.h) or the public
 * progcache_file calls (progcache/file.h). */
#ifndef PROGCACHE_STORE_FILE_H
#define PROGCACHE_STORE_FILE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

#include "error.h" /* PROGCACHE_PRINTF, PROGCACHE_COLD */
#include "progcache/file.h"
#include "progcache/settings.h"
#include "progcache/sys/store.h"
#include "store/file/file_layout.h"
#include "store/file/file_perm.h"


/* Accounting shared by every process that opens the directory: a small
 * file mapped with MAP_SHARED and updated with atomic adds, so a put costs
 * no extra system call and open scans nothing. Counters can drift (a crash
 * between rename and add, cuda.core writing alongside us); every eviction
 * pass re-measures the shards it scans and corrects them, and a change of
 * tmp/ (cuda.core's writes go through it) makes the next put run one. */
typedef struct file_state {
    char magic[8];     /* "PCSTATE1" */
    uint32_t version;  /* 3 (docs/FORMAT.md) */
    uint32_t seeded;   /* 1 once a full scan has set the counters */
    /* What tmp/ looked like (inode and change time, mixed; 0: unknown)
     * when a full scan last measured the directory. Since progcache keeps
     * its temp files in progcache/tmp/, a change to tmp/ means another
     * program (cuda.core) has written an entry: the next put measures the
     * directory again (progcache__file_others_wrote). */
    uint64_t tmp_seen;
    /* The shard the next bounded eviction step starts at (mod 256). */
    uint32_t evict_cursor;
    uint32_t pad;
    /* A catch-up spread over puts (file_catch_up.c; issue 32), all under
     * the lock: 1 while one is under way, tmp/'s fingerprint when it
     * began, the shard it has reached, and what it has found so far (for
     * other_writer_bytes and shards_rescanned when it ends). Words that
     * were reserved (zero) in the same version 3: a state file an older
     * progcache made has no catch-up under way. */
    uint64_t round_active;
    uint64_t round_tmp;
    uint64_t round_shard;
    uint64_t round_unseen;
    uint64_t round_measured;
    /* Per shard, 4 bits counting every change progcache makes to its
     * counters (progcache__file_account), mod 16 (a carry into the next
     * shard's only makes that one look changed): a measurement in slices
     * goes on only while its shard's have not moved, which sums alone
     * cannot tell (a remove and a put of one size cancel out). */
    uint64_t shard_changes[16];
    uint64_t reserved[7];
    struct {
        int64_t bytes;
        int64_t count;
    } shard[FILE_SHARDS];
    /* Per shard, its directory's inode and change time, mixed, when a
     * scan last measured it (0: unknown or too recent to trust). A change
     * of tmp/ (another program wrote) rescans only the shards whose
     * directory changed since: work in proportion to what was written
     * (progcache__file_catch_up). */
    uint64_t shard_seen[FILE_SHARDS];
} file_state;

/* progcache_file (progcache/file.h) is this struct: a cache directory is a
 * store whose vtable is base. */
typedef struct progcache_file file_store;
struct progcache_file {
    progcache_store base;
    char *root;  /* as given */
    int root_fd; /* the cache directory, held open for *at() calls */
    int lock_fd; /* progcache/lock: flock for seeding and eviction, or -1 */
    uint64_t max_size;
    uint64_t low_water;
    uint64_t max_artifact_size; /* the largest entry put accepts and get reads */
    unsigned int flags;
    progcache_log_fn log;
    void *log_ctx;
    file_state *state;   /* shared mapping, or private memory when the
                          * directory is read-only for us */
    int state_shared;    /* 1 if state is the shared mapping */
    struct progcache__stats *stats; /* progcache/stats (stats_file.h), or NULL */
    pthread_mutex_t evict_mutex; /* one eviction pass per process at a time */
    uid_t euid;     /* entries owned by anyone else (but root) are not trusted ... */
    gid_t root_gid; /* ... unless SHARED_GROUP and of the directory's group */
    /* Who the directory is for and the modes of what is made in it
     * (file_perm.c): set at open. */
    file_perm perm;
    int foreign;          /* another user's cache: nothing is written */
    int group_named;      /* the group came from PROGCACHE_SHARED_GROUP */
    char group_text[64];  /* its text, for messages */
    uint64_t modes_fixed, files_refused; /* at open, before the stats exist */
    char loose[1024];     /* loose directories not ours, for one warning */
    /* The settings in force (file_settings.c): defaults, progcache/config,
     * the environment and the options, resolved at open into max_size,
     * low_water, max_artifact_size and PROGCACHE_FILE_NO_FSYNC above. */
    progcache_settings *settings;
    /* 1 when entries are sealed in progcache/seals/ (file_sidecar.c): the
     * directory has no user extended attributes. Set at open, or by the
     * first put that finds xattrs refused; read with relaxed atomics. */
    int seal_sidecar;
    /* 1 on a network or FUSE file system (progcache__netfs_type), where an
     * inode number may not survive a link (sshfs makes a new one), so
     * progcache__file_remove_if_same cannot compare it. */
    int network_fs;
    /* i29: links (or other non-directories) refused where the cache keeps
     * a directory (file_path.c), counted here until the statistics are
     * open; and which this handle has named (a bit per path's hash). */
    uint64_t links_refused;
    uint64_t links_named;
    int shard_record_told; /* a record's place held something else: said */
    int slice_told;        /* progcache/shards/next could not be used: said */
};

/* An internal flag (outside the public PROGCACHE_FILE_* bits): read
 * PROGCACHE_SHARED_GROUP even with PROGCACHE_FILE_NO_SETTINGS (which
 * otherwise leaves it unread, as every variable). */
#define PROGCACHE__FILE_GROUP_ENV 0x80000000u
/* progcache_store_file_new with internal flags. */
int progcache__file_new_internal(progcache_store **out, const char *path,
                                 const progcache_file_options *opts, unsigned int internal_flags);

/* Who the directory is for (file_perm.c). perm_init: the user and whether
 * the cache is a group's (flag or PROGCACHE_SHARED_GROUP; EINVAL for an
 * unknown group). make_root: mkdir -p of the cache directory with its
 * modes, never inside another user's directory. perm_root: with the
 * directory's fstat, decide the team's group and whether the directory is
 * another user's (then PROGCACHE_FILE_READONLY is set, fs->foreign, one
 * warning); a directory of ours with loose modes is fixed. */
int progcache__file_perm_init(file_store *fs);
int progcache__file_make_root(file_store *fs, const char *path);
int progcache__file_perm_root(file_store *fs, const char *path, struct stat *root_st);
/* A layout directory (rel, for messages) held open as fd with its fstat:
 * fixed when ours and its mode is wrong (1), else named in the open's one
 * warning when its mode is wrong (0). fd -1: only whether its mode is
 * wrong (1) or right (0), nothing changed or named. */
int progcache__file_check_mode(file_store *fs, int fd, const char *rel, struct stat *st);
/* After the statistics are open: count what open fixed or refused, and
 * log the one warning naming loose directories not ours. */
void progcache__file_perm_report(file_store *fs);
/* The error for a write (what: "put", "clear", ...) into a store opened
 * read-only, or into another user's cache (the message says whose). */
int progcache__file_refuse_write(file_store *fs, const char *what);

/* Resolve fs's settings from o (and, unless PROGCACHE_FILE_NO_SETTINGS,
 * the settings file under fs->root_fd and the environment) into
 * fs->settings and the fields they decide. PROGCACHE_EINVAL for a value
 * that cannot be used (the message names it and where it came from). */
int progcache__file_settings_resolve(file_store *fs, const progcache_file_options *o);

/* Whether the directory open as root_fd (path, for messages) is a cache,
 * or empty: its top level holds nothing but entries/, tmp/ and
 * progcache/. PROGCACHE_OK, PROGCACHE_EINVAL naming the first name that
 * does not belong, or PROGCACHE_EIO. Moves root_fd's directory offset. */
int progcache__file_check_dir(int root_fd, const char *path);

/* The seal of an entry: the extended attribute FILE_SEAL_XATTR, written on
 * the temp file before the rename so content and seal are published
 * together (docs/FORMAT.md, "The seal"); without user xattrs, the same
 * bytes in a sidecar file (file_sidecar.c). Format 2, FILE_SEAL_SIZE bytes:
 *   [0]      FILE_SEAL_FORMAT (2)
 *   [1]      flags: FILE_SEAL_WHOLE when the writer found the bytes to be a
 *            whole artifact (src/artifact/inspect.c)
 *   [2..9]   the first 8 bytes of the entry's name (its SHA-256 of the
 *            key), so a mismatch can be told apart from damage
 *   [10..41] SHA-256(FILE_SEAL_TAG, the entry's 64-digit name, the bytes)
 * The name inside the digest binds the bytes to the entry they were stored
 * as: a copy, hard link or rename to another entry's path no longer
 * matches. Seals of earlier progcache versions (32 bytes: the SHA-256 of
 * the bytes; 33: plus the flags) bound no name and are read as no seal, as
 * is any format this version does not know. cuda.core neither writes nor
 * needs a seal. */
#define FILE_SEAL_XATTR "user.progcache.sha256"
/* The write bits an entry sealed in a sidecar loses (docs/FORMAT.md, "The
 * seal without extended attributes"): the mark that it has a seal, which
 * only its owner can take away and which stays with the file through a
 * rename or a hard link, as an xattr would. */
#define FILE_SEALED_MODE_MASK ((mode_t)0222)
#define FILE_SEAL_FORMAT 2
#define FILE_SEAL_SIZE 42
#define FILE_SEAL_WHOLE 0x01u
/* The entry has records (progcache_entry_meta), in the extended attribute
 * FILE_RECORDS_XATTR, and the digest covers them: SHA-256(tag, name, the
 * records' length as 8 bytes little-endian, the records, the bytes). */
#define FILE_SEAL_RECORDS 0x02u
#define FILE_RECORDS_XATTR "user.progcache.records"
/* The digest's domain-separation tag: 16 ASCII characters and a NUL. */
#define FILE_SEAL_TAG "progcache.seal.2"
#define FILE_SEAL_TAG_SIZE 17


/* Seal the bytes just written to fd (the temp file of a put, not yet
 * renamed) as the entry named name, with meta's records if any: the xattr
 * on fd, or, on a directory without user xattrs, the sidecar (published
 * before the caller renames the entry into place). The xattr is best
 * effort (no room for the records: an entry without them); 0, or -1 with
 * errno when the sidecar could not be written (the put then fails). */
int progcache__file_seal(file_store *fs, int fd, const char name[FILE_NAME_LEN],
                         const unsigned char *data, size_t size, const progcache_entry_meta *meta);

/* The sidecar seal (file_sidecar.c; docs/FORMAT.md, "The seal without
 * extended attributes"): progcache/seals/<2 hex>/<62 hex> holds the 42
 * bytes of the seal, then the records it covers, if any.
 * detect: at open, whether the directory lacks user xattrs (then sets
 * seal_sidecar and says so, once per process); returns 1 when it does.
 * use_sidecar: switch fs to the sidecar (and say so, once per process).
 * write: publish a seal (temp file in progcache/seals/, fsync unless
 * NO_FSYNC, rename into its shard); 0 or -1 with errno.
 * read: read the seal of the entry name into seal and its records (if any,
 * *has_records = 1) into records; returns the seal's length (FILE_SEAL_SIZE)
 * or -1 when there is none this process may trust.
 * forget: remove the seal of an entry that was removed (a no-op with
 * xattrs). is_seal_tmp_name: "seal-<16 hex>", a temp seal. */
int progcache__file_seal_detect(file_store *fs);
void progcache__file_seal_use_sidecar(file_store *fs) PROGCACHE_COLD;
int progcache__file_sidecar_write(file_store *fs, const char name[FILE_NAME_LEN],
                                  const unsigned char seal[FILE_SEAL_SIZE],
                                  const progcache_buf *records);
int progcache__file_sidecar_read(file_store *fs, const char name[FILE_NAME_LEN],
                                 unsigned char seal[FILE_SEAL_SIZE], progcache_buf *records,
                                 int *has_records);
void progcache__file_sidecar_forget(file_store *fs, const char name[FILE_NAME_LEN]);
int progcache__file_is_seal_tmp_name(const char *name);

/* Whether an entry (or its sidecar seal) with these attributes may be
 * trusted (file_get.c; docs/SECURITY.md). */
int progcache__file_trusted(const file_store *fs, const struct stat *st);

/* What progcache__file_seal_check found. */
enum {
    FILE_SEAL_MATCH = 0,    /* the bytes are the ones sealed as this entry */
    FILE_SEAL_NONE = 1,     /* no seal this version can check: structure-check */
    FILE_SEAL_CHANGED = -1, /* sealed as this entry, but the bytes differ */
    FILE_SEAL_OTHER = -2,   /* sealed as another entry: copied, linked or moved here */
    FILE_SEAL_LOST = -3     /* sidecar seals: marked as sealed (no owner write bit), and
                             * no seal of its own (moved or linked here, seal removed) */
};

/* The reason for a FILE_SEAL_OTHER or FILE_SEAL_LOST result, into why
 * (len bytes); other as progcache__file_seal_check gave it. */
void progcache__file_seal_why(char *why, size_t len, int seal, const char *other);

/* Check data, read from fd, against fd's seal for the entry named name.
 * With sidecar seals, an entry without a seal of its own is
 * FILE_SEAL_LOST when its mode has no owner write bit (every entry that
 * progcache seals in a sidecar is made so: FILE_SEALED_MODE_MASK), and
 * FILE_SEAL_NONE otherwise (cuda.core's, 0600 from tempfile.mkstemp).
 * *whole is set to 1 on a match when the writer found a whole artifact.
 * When other is not NULL and the result is FILE_SEAL_OTHER, it receives
 * the 16 hex digits the other entry's name starts with (17 bytes). With
 * meta, the entry's records are read into meta->records (left empty when
 * the result is not FILE_SEAL_MATCH). */
int progcache__file_seal_check(file_store *fs, int fd, const char name[FILE_NAME_LEN],
                               const unsigned char *data, size_t size, progcache_entry_meta *meta,
                               int *whole, char *other);

/* progcache/tmp/, where progcache writes its temp files (a put's, an
 * eviction's): on the cache's file system, so the rename into entries/
 * stays atomic, and out of tmp/, whose every file cuda.core counts against
 * its size cap. Created when missing; an fd or -1 with errno. */
int progcache__file_open_tmp(file_store *fs);

/* Names the file store creates (store_file_names.c); it removes nothing
 * else. An entry file: 62 lowercase hex digits. A shard directory: 2. A
 * temp file in progcache/tmp/ (or, from older versions, tmp/): entry-<16
 * hex>, evict-<16 hex> (progcache); in tmp/ also entry-
 * and 8 of [a-z0-9_] (cuda.core's tempfile.mkstemp). A temp file in
 * progcache/: state-<16 hex>, stats-<16 hex> or config-<16 hex>. The top level of a cache
 * directory: entries, tmp and progcache. */
int progcache__file_is_entry_name(const char *name);
int progcache__file_is_shard_name(const char *name);
int progcache__file_is_tmp_name(const char *name);
/* The temp names of progcache alone, the only ones in progcache/tmp/. */
int progcache__file_is_own_tmp_name(const char *name);
int progcache__file_is_state_tmp_name(const char *name);
int progcache__file_is_layout_name(const char *name);

/* "entries/ab/cdef..." for key, plus the shard index (0..255). */
int progcache__file_rel_path(char out[FILE_REL_PATH_MAX], int *shard, const void *key,
                             size_t key_len);

/* The entry's 64-digit name from its rel path ("entries/ab/cdef..."). */
void progcache__file_name_of_rel(char name[FILE_NAME_LEN], const char *rel);

/* The store's get (file_get.c). With meta: kind, seal state (the bytes
 * matched the seal stored with them, and were a whole artifact: a caller
 * need not check their structure again) and records. */
int progcache__file_get(progcache_buf *out, progcache_entry_meta *meta, file_store *fs,
                        const void *key, size_t key_len);

/* The vtable's members (file_get.c, file_put.c). */
int progcache__file_vget(progcache_buf *out, progcache_store *store, const void *key,
                         size_t key_len);
int progcache__file_vget_meta(progcache_buf *out, progcache_entry_meta *meta,
                              progcache_store *store, const void *key, size_t key_len);
int progcache__file_vput(progcache_store *store, const void *key, size_t key_len,
                         const void *data, size_t size);
int progcache__file_vput_meta(progcache_store *store, const void *key, size_t key_len,
                              const void *data, size_t size, const progcache_entry_meta *meta);
int progcache__file_vremove(progcache_store *store, const void *key, size_t key_len);
/* The vtable's exists (file_get.c) and foreach (file_walk.c). */
int progcache__file_vexists(progcache_store *store, const void *key, size_t key_len);
int progcache__file_vforeach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                             void *ctx);

/* " (the disk is full: ...)": what to do about errnum, or "". */
const char *progcache__file_errno_hint(int errnum);
/* progcache/tmp/'s mode: 0700, or 02770 for a group-shared cache. */
mode_t progcache__file_tmp_mode(const file_store *fs);

/* Open rel, a file of progcache/ (state, lock, flight), as
 * progcache__fs_open_regular does (with O_CREAT: made with the cache's
 * state mode, 0600 or 0660, whatever the umask), give it that mode when it
 * is ours, and refuse it (-1, errno EPERM, why saying whose it is) when
 * progcache__perm_file_ok does not allow it (file_account.c). With
 * FILE_OPEN_ONE_NAME in flags, a file with another name too (a hard link:
 * one written in place must not be reachable from elsewhere) is refused
 * the same way, before its mode is touched. (Not for progcache/state,
 * which has two names for a moment while it is published.) */
#define FILE_OPEN_ONE_NAME 0x40000000
int progcache__file_open_own(file_store *fs, const char *rel, int flags, struct stat *st,
                             char *why, size_t why_len);

/* Accounting (file_account.c). */
int progcache__file_state_open(file_store *fs);
void progcache__file_state_close(file_store *fs);
void progcache__file_account(file_store *fs, int shard, int64_t bytes, int64_t count);
/* The 4 bits of shard_changes for shard. */
unsigned progcache__file_shard_changes(const file_store *fs, int shard);
/* Totals; seeds the counters with one scan the first time ever. A cache
 * opened read-only also catches up with other writers here (its counters
 * are a snapshot of the shared ones, or the shared ones when it may write
 * them). */
int progcache__file_totals(file_store *fs, uint64_t *bytes, uint64_t *count);
/* Re-measure the shards whose directory changed since they were last
 * measured (shard_seen), and record tmp/'s fingerprint taken before: what
 * another program wrote is found in O(shards it wrote to). Counts
 * other_writer_rescans and other_writer_bytes when count_stats. The
 * caller holds evict_mutex (and the lock when locked). */
void progcache__file_catch_up(file_store *fs, int locked, int count_stats);
/* The same spread over puts (file_catch_up.c): at most
 * progcache__file_catch_names names listed and progcache__file_catch_stats
 * stat'ed by one call, the progress kept in the state and in
 * progcache/shards/next for the next put, in any process, to go on with;
 * whole, as above, where that cannot be kept (no shared state, a network
 * file system, an open that may not write records). The caller holds
 * evict_mutex and the lock. Variables so that a test can make slices
 * small. */
void progcache__file_catch_up_step(file_store *fs);
extern uint64_t progcache__file_catch_names;
extern uint64_t progcache__file_catch_stats;
/* Whether a shard is to be measured by a catch-up: its directory changed
 * since shard_seen, other than by progcache's own puts (file_others.c);
 * tmp_ctime is tmp/'s change time (progcache__file_tmp_ctime, 0: none). */
int progcache__file_shard_changed(file_store *fs, int shard, int64_t tmp_ctime);
int64_t progcache__file_tmp_ctime(file_store *fs);
/* Measure one shard whole through its record and correct its counters
 * (file_account.c); the bytes found beyond them. */
int64_t progcache__file_measure_shard(file_store *fs, int shard, int locked);
/* A put's own write into a shard (issue 32): begin looks at the shard
 * (held open as shard_fd) and tmp/ before the rename, end after it; when
 * the shard was clean (measured, or recorded by a put, and unchanged
 * since) and tmp/ did not change around the rename, end records the
 * shard's new look in shard_seen, marked as a put's own, so that the next
 * catch-up does not re-measure what progcache itself wrote. */
typedef struct file_own_write {
    uint64_t before; /* shard_seen when begin looked */
    uint64_t tmp;    /* tmp/'s look then */
    int64_t tmp_ctime;
    int ok; /* the shard was clean */
} file_own_write;
void progcache__file_own_write_begin(file_store *fs, int shard, int shard_fd,
                                     file_own_write *w);
void progcache__file_own_write_end(file_store *fs, int shard, int shard_fd,
                                   const file_own_write *w);
/* A shard directory's fingerprint for shard_seen: 0 when missing or
 * changed too recently to be trusted. */
uint64_t progcache__file_shard_fingerprint(file_store *fs, int shard);
/* Shards walked, and entries examined (fstatat), by scans in this process
 * (test hooks: tests assert the work a put did, never its time). */
uint64_t progcache__file_shards_scanned(void);
uint64_t progcache__file_entries_scanned(void);
/* Count work done by a walk other than progcache__file_scan_shard's. */
void progcache__file_scan_count(uint64_t shards, uint64_t entries);
/* Entries one put's eviction step examines before it stops at the end of
 * a shard (file_evict.c); a directory of no more entries than this is
 * evicted by one whole pass (exact LRU). A variable so that a test can
 * make steps small. */
extern uint64_t progcache__file_evict_batch;
/* Entries one step evicts at most, and the milliseconds after which it
 * stops once it has evicted one (the rest in later steps); variables for
 * the tests. And the entries this process evicted (a test hook). */
extern uint64_t progcache__file_evict_max;
extern double progcache__file_evict_ms;
uint64_t progcache__file_entries_evicted(void);
/* What one shard holds on disk, as a scan found it. */
typedef struct file_shard_sum {
    int64_t bytes, count;
} file_shard_sum;
/* What one shard holds, measured through its record in
 * progcache/shards/ (file_shard_record.c): only the names the record does
 * not know are stat'ed, and the record is written again when something
 * changed and this open may write. _full stats every name (no record
 * read or written). Both return 0. And the names stat'ed by them in this
 * process (a test hook). */
#define FILE_SHARD_RECORD_DIR FILE_STATE_DIR "/shards"
int progcache__file_shard_sum(file_store *fs, int shard, file_shard_sum *sum);
int progcache__file_shard_sum_full(file_store *fs, int shard, file_shard_sum *sum);
uint64_t progcache__file_shard_names_statted(void);
/* One slice of the measurement of shard that a catch-up spreads over puts
 * (file_shard_slice.c): names listed and stat'ed are taken from *names
 * and *stats. 1 when the shard's listing is done (*done filled: its
 * truth, the counters and shard_seen when the measurement began, and the
 * fingerprint to record); 0 when the budget ran out first (the progress
 * is in progcache/shards/next); -1 when it cannot be measured in slices
 * (measure it whole). */
typedef struct file_slice_done {
    file_shard_sum sum;
    int64_t bytes_before, count_before;
    uint64_t seen, seen_was;
} file_slice_done;
int progcache__file_shard_slice(file_store *fs, int shard, uint64_t *names, uint64_t *stats,
                                file_slice_done *done);
/* progcache/ was found ours and loose at open: progcache/shards/ and the
 * records in it (ours) are given their modes, counted in modes_fixed. */
void progcache__file_shard_records_fix(file_store *fs);
/* A temp file of progcache/shards/: "shard-<16 hex>" (file_names.c). */
int progcache__file_is_shard_record_tmp_name(const char *name);
/* Set one shard's counters to truth: under the cross-process lock as a
 * delta against the values read before the scan, so that puts landing
 * meanwhile are kept; without it (locked 0), by storing truth, which any
 * number of processes measuring at once may do (a delta applied by two
 * would count twice). Returns the bytes truth holds beyond the counter. */
int64_t progcache__file_remeasure_shard(file_store *fs, int shard, const file_shard_sum *truth,
                                        int64_t bytes_before, int64_t count_before, int locked);
/* Seeding, eviction and prune exclude each other: evict_mutex in this
 * process, flock on progcache/lock across processes (when it could be
 * opened). Returns 1 when the cross-process lock is held, 0 when the
 * mutex alone is (no lock file, or a file system that refuses locks:
 * progcache__file_lock_failed has said so); the caller then takes the
 * lock-free path (FILE_UNLOCKED passes). */
int progcache__file_lock(file_store *fs);
void progcache__file_unlock(file_store *fs);
/* A lock call on progcache/lock failed with errnum for a reason other
 * than another holder (progcache__fs_lock_unsupported): counted
 * (lock_failures), and said once per process. */
void progcache__file_lock_failed(file_store *fs, int errnum);
/* Whether another program has written into tmp/ (hence, the way
 * cuda.core writes, into entries/) since the last full measurement. One
 * fstatat. */
int progcache__file_others_wrote(file_store *fs);
/* tmp/'s fingerprint now, for the state's tmp_seen: 0 when it changed too
 * recently to be trusted (a change within the file system's timestamp
 * granularity would not show). */
uint64_t progcache__file_tmp_fingerprint(file_store *fs);
/* Evict least recently used entries down to the low-water mark when the
 * total is over the cap. A no-op when another thread or process is already
 * evicting. */
int progcache__file_evict_if_needed(file_store *fs);
/* Delete what crashed writers left: regular files owned by this user,
 * older than an hour, named as progcache or cuda.core name temp files, in
 * tmp/ and progcache/tmp/ and, with state_dir_too, progcache/ (never
 * anything else, never a directory). Open sweeps the temp folders only:
 * the temp files of progcache/ appear
 * only when a process dies while creating state or stats, rare enough for
 * eviction, prune and clear to collect, and open stays one readdir
 * cheaper. */
void progcache__file_sweep_tmp(file_store *fs, int state_dir_too);
/* Delete every entry (a regular file with an entry's name) of one shard;
 * PROGCACHE_OK or the first error. */
int progcache__file_clear_shard(file_store *fs, int shard);
/* The tier's clear, and progcache_file_clear's (src/dir/): every entry,
 * shard by shard (progress hears "removing"; its non-zero value stops
 * and is returned), what crashed writers left, and the explain index.
 * The write refused for a read-only or another user's cache. totals (may
 * be NULL): what the directory held before and after, once it ran. */
typedef struct file_clear_totals {
    int ran;
    uint64_t bytes_before, count_before, bytes, count;
} file_clear_totals;
int progcache__file_clear(file_store *fs, progcache_progress_fn progress, void *ctx,
                          file_clear_totals *totals);

/* Remove entries/<shard>/<name> only if it is still the file described by
 * seen (same inode, size and mtime; and atime when check_atime): it is
 * renamed aside first, checked, and linked back if another process replaced
 * (or, with check_atime, read) it meanwhile. Returns 1 if it was removed. */
int progcache__file_remove_if_same(file_store *fs, int shard, const char *name,
                                   const struct stat *seen, int check_atime);

/* Walk the entries of one shard directory: regular files with an entry's
 * name (symbolic links, other types and other names are skipped). fn
 * returns 0 to go on, non-zero to stop (which is returned). A missing
 * shard is empty. */
typedef int (*file_entry_fn)(void *ctx, int shard, const char *name, const struct stat *st);
int progcache__file_scan_shard(file_store *fs, int shard, file_entry_fn fn, void *ctx);

/* Store data (with meta's records, meta may be NULL) as the entry at rel
 * ("entries/ab/<62 hex>", shard 0xab) through the same temp -> fsync ->
 * rename path as a put (import uses it: an archive names entries by hash,
 * not by key). */
int progcache__file_put_rel(file_store *fs, const char *rel, int shard, const void *data,
                            size_t size, const progcache_entry_meta *meta);

/* Remove least recently used entries (oldest atime first) until the total
 * is at most max_bytes (UINT64_MAX: no size bound), and every entry last
 * used before atime_cutoff (seconds since 1970; 0: no age bound), with the
 * same move-aside-and-check as eviction, counting them as evictions. Waits
 * for the lock a running eviction holds. *removed and *removed_bytes say
 * what went. progress (optional, progcache/admin.h) hears "scanning" and
 * "removing"; its non-zero value stops the pass and is returned. */
int progcache__file_prune(file_store *fs, uint64_t max_bytes, int64_t atime_cutoff,
                          uint64_t *removed, uint64_t *removed_bytes,
                          progcache_progress_fn progress, void *ctx);

/* The one way the file store reaches a directory inside the cache, or a
 * file by a path of more than one component (file_path.c; docs/SECURITY.md,
 * "No symbolic links are followed"). rel is relative to the root
 * ("entries/ab", "progcache/seals/ab"); nothing on it is followed, and a
 * link or other non-directory where a directory belongs is refused:
 * counted (links_refused), named once per handle and link, -1 with errno ELOOP or
 * ENOTDIR.
 * dir: open the directory rel. dir_make: the same, making what is missing
 * (unless the store is read-only: EROFS), one component at a time, the
 * last with mode and gid, those before it with the cache's directory mode;
 * *made is 1 when something had to be made. parent: open the directory
 * holding rel's last component (*last points at it in rel), for an *at()
 * call that names one component. unlink and lstat: unlinkat and fstatat
 * (AT_SYMLINK_NOFOLLOW) through parent.
 * refused: after an open of rel beneath the root failed with errnum (a
 * one-call openat2 on a hot path), whether a link or non-directory stands
 * where rel needs a directory (every component but the last, and the last
 * too with last_is_dir): then it is counted and named, and 1 returned.
 * refused_report: count what open refused before the statistics existed. */
int progcache__file_dir(file_store *fs, const char *rel);
int progcache__file_dir_make(file_store *fs, const char *rel, mode_t mode, gid_t gid, int *made);
/* The same, with readonly saying whether to refuse to make it: a
 * read-only open keeping its count (file_account.c) makes progcache/. */
int progcache__file_dir_make_ro(file_store *fs, const char *rel, mode_t mode, gid_t gid,
                                int *made, int readonly);
int progcache__file_parent(file_store *fs, const char *rel, const char **last);
int progcache__file_unlink(file_store *fs, const char *rel, int flags);
int progcache__file_lstat(file_store *fs, const char *rel, struct stat *st);
int progcache__file_refused(file_store *fs, const char *rel, int errnum, int last_is_dir);
void progcache__file_refused_report(file_store *fs);

void progcache__file_log(file_store *fs, int level, const char *fmt, ...) PROGCACHE_PRINTF(3, 4)
    PROGCACHE_COLD;

#endif
