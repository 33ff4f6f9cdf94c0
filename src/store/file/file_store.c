/* The file store, the cache directory: cuda.core's FileStreamProgramCache
 * layout, entries/<h[0:2]>/<h[2:]> with h = hex SHA-256(key), raw bytes per
 * file (docs/FORMAT.md). This file opens one (refusing a directory that is
 * not a cache), fills the vtable and the typed handle; the read path is
 * file_get.c, the write path file_put.c, the seal file_seal.c, accounting
 * file_account.c, eviction file_evict.c, what may be deleted file_sweep.c
 * and file_names.c, statistics file_stats.c, the walk file_walk.c. The
 * cache directory beyond the tier (its records, places and admin
 * functions) is src/dir/'s, archives src/archive/'s. */
#include "store/file/file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "netfs.h"
#include "options.h"
#include "sha256.h"
#include "store/file/file_stats.h"
#include "store/store_calls.h"

void progcache_file_options_init(progcache_file_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_FILE_OPTIONS_VERSION);
}

void progcache__file_log(file_store *fs, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(fs->log, fs->log_ctx, level, fmt, ap);
    va_end(ap);
}

static int file_clear(progcache_store *store)
{
    return progcache__file_clear((file_store *)store, NULL, NULL, NULL);
}

static int file_count(uint64_t *out, progcache_store *store)
{
    uint64_t bytes;
    return progcache__file_totals((file_store *)store, &bytes, out);
}

static int file_total_size(uint64_t *out, progcache_store *store)
{
    uint64_t count;
    return progcache__file_totals((file_store *)store, out, &count);
}

static void file_free(progcache_store *store)
{
    file_store *fs = (file_store *)store;
    progcache__stats_close(fs->stats);
    progcache__file_state_close(fs);
    if (fs->lock_fd >= 0)
        close(fs->lock_fd);
    if (fs->root_fd >= 0)
        close(fs->root_fd);
    pthread_mutex_destroy(&fs->evict_mutex);
    progcache_settings_free(fs->settings);
    progcache__free(fs->root);
    progcache__free(fs);
}

/* ---- statistics (progcache/stats, file_stats.c) behind the vtable -------- */

/* The statistics file's counter positions are the public progcache_stat
 * values: record passes them through. */
_Static_assert((int)PROGCACHE__HITS == (int)PROGCACHE_STAT_HITS &&
                   (int)PROGCACHE__CORRUPT_REMOVED == (int)PROGCACHE_STAT_CORRUPT_REMOVED &&
                   (int)PROGCACHE__REMOTE_REJECTED == (int)PROGCACHE_STAT_REMOTE_REJECTED &&
                   (int)PROGCACHE__LOOKUP_ERRORS == (int)PROGCACHE_STAT_LOOKUP_ERRORS &&
                   (int)PROGCACHE__REMOTE_TIMEOUTS == (int)PROGCACHE_STAT_REMOTE_TIMEOUTS &&
                   (int)PROGCACHE__REMOTE_BAD_TAG == (int)PROGCACHE_STAT_REMOTE_BAD_TAG &&
                   (int)PROGCACHE__REMOTE_TAKEOVERS == (int)PROGCACHE_STAT_REMOTE_TAKEOVERS &&
                   (int)PROGCACHE__PCH_HITS == (int)PROGCACHE_STAT_PCH_HITS &&
                   (int)PROGCACHE__PCH_FALLBACKS == (int)PROGCACHE_STAT_PCH_FALLBACKS &&
                   (int)PROGCACHE__NAMES_LEARNED == (int)PROGCACHE_STAT_NAMES_LEARNED &&
                   (int)PROGCACHE__LOCK_FAILURES == (int)PROGCACHE_STAT_LOCK_FAILURES &&
                   (int)PROGCACHE__OTHER_WRITER_BYTES == (int)PROGCACHE_STAT_OTHER_WRITER_BYTES &&
                   (int)PROGCACHE__REMOTE_OVER_BOUND == (int)PROGCACHE_STAT_REMOTE_OVER_BOUND &&
                   (int)PROGCACHE__REMOTE_DEADLINES == (int)PROGCACHE_STAT_REMOTE_DEADLINES &&
                   (int)PROGCACHE__NVRTC_KEY_LOADS == (int)PROGCACHE_STAT_NVRTC_KEY_LOADS &&
                   (int)PROGCACHE__NVRTC_MISSING == (int)PROGCACHE_STAT_NVRTC_MISSING &&
                   (int)PROGCACHE__FOREIGN_NOT_STORED == (int)PROGCACHE_STAT_FOREIGN_NOT_STORED &&
                   (int)PROGCACHE__FILES_REFUSED == (int)PROGCACHE_STAT_FILES_REFUSED &&
                   (int)PROGCACHE__PCH_DEFERRED == (int)PROGCACHE_STAT_PCH_DEFERRED &&
                   (int)PROGCACHE__PCH_WARM_FAILURES == (int)PROGCACHE_STAT_PCH_WARM_FAILURES &&
                   (int)PROGCACHE__LINKS_REFUSED == (int)PROGCACHE_STAT_LINKS_REFUSED &&
                   (int)PROGCACHE__RECORDS_UNTRUSTED == (int)PROGCACHE_STAT_RECORDS_UNTRUSTED &&
                   (int)PROGCACHE__ENTRIES_UNTRUSTED == (int)PROGCACHE_STAT_ENTRIES_UNTRUSTED &&
                   (int)PROGCACHE__INTERCEPT_COMPILES == (int)PROGCACHE_STAT_INTERCEPT_COMPILES &&
                   (int)PROGCACHE__INTERCEPT_FAILED == (int)PROGCACHE_STAT_INTERCEPT_FAILED &&
                   (int)PROGCACHE__INTERCEPT_STANDIN_REFUSED ==
                       (int)PROGCACHE_STAT_INTERCEPT_STANDIN_REFUSED &&
                   (int)PROGCACHE__SHARDS_RESCANNED == (int)PROGCACHE_STAT_SHARDS_RESCANNED &&
                   (int)PROGCACHE__STATE_SEEDS == (int)PROGCACHE_STAT_STATE_SEEDS &&
                   (int)PROGCACHE__EXPLAIN_MADE == (int)PROGCACHE_STAT_EXPLAIN_MADE &&
                   (int)PROGCACHE__ENTRIES_RESEALED == (int)PROGCACHE_STAT_ENTRIES_RESEALED &&
                   (int)PROGCACHE__NAMES_LEARNED == (int)PROGCACHE_STAT_NAMES_LEARNED,
               "progcache__counter and progcache_stat must agree");

PROGCACHE_HOT
static void file_stats_record(progcache_store *store, progcache_stat stat, uint64_t n)
{
    progcache__stats_add(((file_store *)store)->stats, (progcache__counter)stat, n);
}

static int file_stats_get(progcache_stats *out, progcache_store *store)
{
    progcache__stats_read(out, ((file_store *)store)->stats);
    /* The cap in force for this directory, from its settings (the one
     * recorded in the file is only the most recent process's). */
    out->max_size = ((file_store *)store)->max_size;
    int rc = file_count(&out->entries, store);
    if (!rc)
        rc = file_total_size(&out->total_size, store);
    return rc;
}

static int file_stats_reset(progcache_store *store)
{
    return progcache__stats_zero(((file_store *)store)->stats);
}

static const progcache_store_stats_ops file_stats_ops = {
    PROGCACHE_STORE_STATS_OPS_VERSION, file_stats_record, file_stats_get, file_stats_reset, NULL};

/* ---- the typed handle (progcache/file.h) -------------------------------- */

progcache_file *progcache_store_as_file(progcache_store *store)
{
    return store && store->free == file_free ? (file_store *)store : NULL;
}

progcache_store *progcache_file_store(progcache_file *file) { return file ? &file->base : NULL; }

void progcache_file_close(progcache_file *file)
{
    if (file)
        file_free(&file->base);
}

const char *progcache_file_path(const progcache_file *file) { return file ? file->root : NULL; }

int progcache_file_open(progcache_file **out, const char *path, const progcache_file_options *opts)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_open: out is NULL");
    progcache_store *store;
    int rc = progcache_store_file_new(&store, path, opts);
    *out = rc ? NULL : (file_store *)store;
    return rc;
}

/* ---- open -------------------------------------------------------------- */

static int open_error(const char *path, const char *what, int errnum)
{
    return progcache__error(progcache__code_from_errno(errnum),
                            "cannot use cache directory %s: %s: %s%s", path, what,
                            strerror(errnum), progcache__file_errno_hint(errnum));
}

/* The struct's size in each version, for progcache__options_load. */
static const size_t file_options_size[] = {
    0, offsetof(progcache_file_options, max_artifact_size), sizeof(progcache_file_options)};

static int check_options(const progcache_file_options *opts)
{
    if (opts->low_water_percent > 100)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_file_options.low_water_percent is %u; it must be "
                                "1-100 (0 for the default, 90)",
                                opts->low_water_percent);
    if (opts->flags & ~(PROGCACHE_FILE_NO_FSYNC | PROGCACHE_FILE_READONLY |
                        PROGCACHE_FILE_SHARED_GROUP | PROGCACHE_FILE_NO_VERIFY |
                        PROGCACHE_FILE_NO_SETTINGS | PROGCACHE_FILE_FSYNC |
                        PROGCACHE_FILE_KEEP_COUNTS))
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_options.flags has unknown bits 0x%x",
                                opts->flags);
    if ((opts->flags & PROGCACHE_FILE_NO_FSYNC) && (opts->flags & PROGCACHE_FILE_FSYNC))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_file_options.flags has both PROGCACHE_FILE_NO_FSYNC and "
                                "PROGCACHE_FILE_FSYNC; give one");
    return PROGCACHE_OK;
}

/* Whether the directory held open as fs->root_fd is a cache, or empty: its
 * top level holds nothing but entries/, tmp/ and progcache/ (cuda.core's
 * layout is entries/ and tmp/; progcache/ is ours). Anything else means
 * the path names somebody's directory (a home, a project), and a cache
 * there would sweep and clear what it finds under those names: refuse.
 *
 * Cheap, as it runs at every open: getdents64 on root_fd itself into a
 * stack buffer (a cache's top level fits in one call; the second returns
 * 0), no DIR and no second descriptor. The read moves root_fd's directory
 * offset, which nothing uses: root_fd serves only *at() calls. */
int progcache__file_check_dir(int root_fd, const char *path)
{
    union {
        struct dirent64 align;
        char bytes[4096];
    } buf;
    for (;;) {
        ssize_t n = getdents64(root_fd, buf.bytes, sizeof buf.bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return open_error(path, "cannot list it", errno);
        if (n == 0)
            return PROGCACHE_OK;
        for (ssize_t off = 0; off < n;) {
            const struct dirent64 *e = (const struct dirent64 *)(void *)(buf.bytes + off);
            off += e->d_reclen;
            const char *name = e->d_name;
            if (!strcmp(name, ".") || !strcmp(name, ".."))
                continue;
            if (!progcache__file_is_layout_name(name))
                return progcache__error(PROGCACHE_EINVAL,
                                        "%s is not a cache directory: it holds \"%s\", and a "
                                        "cache directory holds only entries/, tmp/ and "
                                        FILE_STATE_DIR "/; choose an empty or new directory "
                                        "for the cache",
                                        path, name);
            struct stat st;
            int is_dir = e->d_type == DT_DIR;
            if (e->d_type == DT_UNKNOWN)
                is_dir = fstatat(root_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                         S_ISDIR(st.st_mode);
            if (!is_dir)
                return progcache__error(PROGCACHE_EINVAL,
                                        "%s is not a cache directory: %s/%s is not a directory; "
                                        "choose an empty or new directory for the cache",
                                        path, path, name);
        }
    }
}

/* One directory of the layout (entries/, tmp/, progcache/): made with the
 * cache's mode, or, found, given it when ours (named in the warning of
 * loose directories when not). */
static int layout_dir(file_store *fs, const char *path, const char *name)
{
    /* Found: one fstatat, as many system calls as the mkdir it replaces,
     * when its mode is right (every open but the first with this
     * version); opened, to fix or name it, only when not. */
    struct stat st;
    if (progcache__file_lstat(fs, name, &st) != 0) {
        int made;
        int fd = progcache__file_dir_make(fs, name, progcache__perm_dir_mode(&fs->perm),
                                          progcache__perm_new_gid(&fs->perm), &made);
        if (fd < 0) {
            char what[40];
            snprintf(what, sizeof what, "cannot create %s/", name);
            return open_error(path, what, errno);
        }
        close(fd);
        return PROGCACHE_OK; /* made with its mode, or by a racing process */
    }
    if (progcache__file_check_mode(fs, -1, name, &st) == 0)
        return PROGCACHE_OK;
    int fd = progcache__file_dir(fs, name);
    int loose = fd >= 0 && fstat(fd, &st) == 0 && progcache__file_check_mode(fs, fd, name, &st);
    if (fd >= 0)
        close(fd);
    /* entries/ was ours and loose (made by an older version, or under
     * umask 000): its shards were made so too; fix them now, once (the
     * next open finds entries/ right and looks no further). */
    if (loose && !strcmp(name, "entries"))
        for (int shard = 0; shard < FILE_SHARDS; shard++) {
            char rel[16];
            snprintf(rel, sizeof rel, "entries/%02x", shard);
            int sfd = progcache__file_dir(fs, rel);
            if (sfd >= 0 && fstat(sfd, &st) == 0)
                (void)progcache__file_check_mode(fs, sfd, rel, &st);
            if (sfd >= 0)
                close(sfd);
        }
    if (loose && !strcmp(name, FILE_STATE_DIR)) /* the same for progcache/shards/ */
        progcache__file_shard_records_fix(fs);
    return PROGCACHE_OK;
}

/* Create the layout (unless read-only) and hold the root open. */
static int open_layout(file_store *fs, const char *path)
{
    int rc = progcache__file_perm_init(fs);
    if (rc)
        return rc;
    if (!(fs->flags & PROGCACHE_FILE_READONLY) && (rc = progcache__file_make_root(fs, path)))
        return rc;
    fs->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->root_fd < 0)
        return open_error(path, "cannot open it", errno);
    struct stat root_st;
    if (fstat(fs->root_fd, &root_st) != 0)
        return open_error(path, "cannot stat it", errno);
    fs->euid = fs->perm.euid;
    if ((rc = progcache__file_perm_root(fs, path, &root_st)))
        return rc;
    rc = progcache__file_check_dir(fs->root_fd, path);
    if (rc || (fs->flags & PROGCACHE_FILE_READONLY))
        return rc;
    (void)progcache__file_check_mode(fs, fs->root_fd, ".", &root_st);
    if ((rc = layout_dir(fs, path, "entries")))
        return rc;
    if ((rc = layout_dir(fs, path, FILE_STATE_DIR)))
        return rc;
    /* progcache's temp files live in progcache/tmp/, not in cuda.core's
     * tmp/ (which cuda.core makes itself, counts against its cap, and
     * whose changes tell us that another program wrote: file_account.c).
     * The cache's mode (0700, or the group's 02770): nobody else can read
     * or replace a file while it is being written. */
    if ((rc = layout_dir(fs, path, FILE_TMP_DIR)))
        return rc;
    /* Writable? A cache that cannot take a put should say so at open, not
     * at the first compile. */
    int tmp_fd = progcache__file_dir(fs, FILE_TMP_DIR);
    if (tmp_fd < 0 && (errno == ELOOP || errno == ENOTDIR))
        return PROGCACHE_OK; /* a link there: refused and named; puts fail */
    int writable = tmp_fd >= 0 && faccessat(tmp_fd, ".", W_OK, AT_EACCESS) == 0;
    int saved = errno;
    if (tmp_fd >= 0)
        close(tmp_fd);
    if (!writable)
        return open_error(path, FILE_TMP_DIR "/ is not writable", saved);
    return PROGCACHE_OK;
}

static int file_new(progcache_store **out, const char *path, const progcache_file_options *opts,
                    unsigned int internal_flags)
{
    progcache_file_options o;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_file_new: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_file_new: the cache directory "
                                                  "path is empty");
    progcache_file_options_init(&o);
    int rc = progcache__options_load(&o, opts, file_options_size, PROGCACHE_FILE_OPTIONS_VERSION,
                                     "progcache_store_file_new", "progcache_file_options");
    if (!rc)
        rc = check_options(&o);
    if (rc)
        return rc;
    o.flags |= internal_flags;
    opts = &o;

    file_store *fs = progcache__calloc(1, sizeof *fs);
    if (!fs)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory opening cache %s", path);
    fs->root_fd = -1;
    fs->lock_fd = -1;
    pthread_mutex_init(&fs->evict_mutex, NULL);
    fs->base.version = PROGCACHE_STORE_VERSION;
    fs->base.name = "file";
    fs->base.get = progcache__file_vget;
    fs->base.put = progcache__file_vput;
    fs->base.remove = progcache__file_vremove;
    fs->base.clear = file_clear;
    fs->base.count = file_count;
    fs->base.total_size = file_total_size;
    fs->base.free = file_free;
    fs->base.flags = PROGCACHE_STORE_PERSISTENT;
    fs->base.get_meta = progcache__file_vget_meta;
    fs->base.put_meta = progcache__file_vput_meta;
    fs->base.stats = &file_stats_ops;
    fs->base.exists = progcache__file_vexists;
    fs->base.foreach = progcache__file_vforeach;
    fs->flags = opts->flags;
    fs->log = opts->log;
    fs->log_ctx = opts->log_ctx;
    fs->root = progcache__strdup(path);
    if (!fs->root) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory opening cache %s", path);
        goto fail;
    }
    rc = open_layout(fs, path);
    if (rc)
        goto fail;
    /* Where the seals go: xattrs, or progcache/seals/ without them. */
    (void)progcache__file_seal_detect(fs);
    fs->network_fs = progcache__netfs_type(fs->root_fd, NULL);
    /* The size cap and the other settings: the directory's settings file,
     * the environment, then opts (progcache/settings.h). */
    rc = progcache__file_settings_resolve(fs, opts);
    if (rc)
        goto fail;
    rc = progcache__file_state_open(fs);
    if (rc)
        goto fail;
    /* Statistics are worth less than a working cache: without them the
     * store works and counts nothing. */
    int stats_mode = fs->foreign                                 ? PROGCACHE__STATS_PRIVATE
                     : (fs->flags & PROGCACHE_FILE_READONLY) ? PROGCACHE__STATS_READ
                                                             : PROGCACHE__STATS_SHARED;
    if (progcache__stats_open(&fs->stats, fs->root_fd, fs->root, stats_mode, &fs->perm) !=
        PROGCACHE_OK)
        progcache__file_log(fs, PROGCACHE_LOG_WARN, "no statistics for %s: %s", fs->root,
                            progcache_error_last());
    progcache__stats_set_max_size(fs->stats, fs->max_size);
    progcache__file_perm_report(fs);
    progcache__file_refused_report(fs);
    if (!(fs->flags & PROGCACHE_FILE_READONLY))
        progcache__file_sweep_tmp(fs, 0);
    *out = &fs->base;
    return PROGCACHE_OK;
fail:
    file_free(&fs->base);
    return rc;
}

int progcache_store_file_new(progcache_store **out, const char *path,
                             const progcache_file_options *opts)
{
    return file_new(out, path, opts, 0);
}

int progcache__file_new_internal(progcache_store **out, const char *path,
                                 const progcache_file_options *opts, unsigned int internal_flags)
{
    return file_new(out, path, opts, internal_flags);
}
