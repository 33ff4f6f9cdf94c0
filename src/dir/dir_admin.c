/* Looking after a cache directory: listing entries, reading one by name,
 * verify, prune and clear (progcache/entries.h), over the file tier's walk
 * (store/file/file_walk.c), eviction and clear.
 *
 * Everything here runs while other processes use the cache. Entries are
 * read through the same symlink-refusing opens as a get, an entry that
 * vanishes between listing and reading is skipped, and nothing is removed
 * unless it is still the file that was examined (rename aside, compare,
 * link back: progcache__file_remove_if_same). */
#include "dir/dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "options.h"
#include "dir/dir_reseal.h"
#include "progcache/entries.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"
#include "store/file/file_walk.h"
#include "artifact/inspect.h"
#include "artifact/manifest_kind.h"

int progcache__admin_file(const progcache_file *file, const char *fn)
{
    if (!file)
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: the cache directory is NULL; open one with "
                                "progcache_file_open (or progcache_store_as_file on a store)",
                                fn);
    return PROGCACHE_OK;
}

/* ---- foreach, read by name and clear ---------------------------------------- */

int progcache_file_foreach(progcache_file *file, unsigned int flags, progcache_entry_fn fn,
                           void *ctx)
{
    int rc = progcache__admin_file(file, "progcache_file_foreach");
    return rc ? rc : progcache__file_foreach(file, flags, fn, ctx);
}

int progcache_file_read_entry(progcache_buf *out, progcache_file *file, const char *name)
{
    int rc = progcache__admin_file(file, "progcache_file_read_entry");
    return rc ? rc : progcache__file_read_name(out, file, name);
}

int progcache_file_clear(progcache_prune_result *out, progcache_file *file,
                         progcache_progress_fn progress, void *ctx)
{
    int rc = progcache__admin_file(file, "progcache_file_clear");
    if (rc)
        return rc;
    if (out && (rc = progcache__version_check(out, PROGCACHE_PRUNE_RESULT_VERSION,
                                              "progcache_file_clear", "out",
                                              "progcache_prune_result")))
        return rc;
    file_clear_totals t = {0, 0, 0, 0, 0};
    rc = progcache__file_clear(file, progress, ctx, &t);
    if (out && t.ran) {
        unsigned int version = out->version;
        memset(out, 0, sizeof *out);
        out->version = version;
        out->removed = t.count_before > t.count ? t.count_before - t.count : 0;
        out->removed_bytes = t.bytes_before > t.bytes ? t.bytes_before - t.bytes : 0;
        out->entries = t.count;
        out->total_size = t.bytes;
    }
    return rc;
}

/* ---- verify --------------------------------------------------------------- */

void progcache_verify_options_init(progcache_verify_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_VERIFY_OPTIONS_VERSION);
}

/* The struct's size in each version, for progcache__options_load and for
 * writing back no more of a result than the caller's version has. */
static const size_t verify_options_size[] = {
    0, offsetof(progcache_verify_options, on_foreign), sizeof(progcache_verify_options)};
static const size_t verify_result_size[] = {0, offsetof(progcache_verify_result, foreign),
                                            offsetof(progcache_verify_result, unknown),
                                            sizeof(progcache_verify_result)};

typedef struct verify_ctx {
    file_store *fs;
    const progcache_verify_options *opts;
    progcache_verify_result *out;
    char why[256];
} verify_ctx;

static int verify_visit(void *ctx, file_walk_item *item)
{
    verify_ctx *v = ctx;
    progcache_entry *e = item->entry;
    const progcache_artifact_info *a = e->artifact;
    int whole, seal = FILE_SEAL_NONE, keep = 0;
    char other[17];
    v->out->checked++;
    if (e->data)
        seal = progcache__file_seal_check(v->fs, item->fd, e->name, e->data, (size_t)e->size, NULL,
                                          &whole, other);
    if (e->error) {
        snprintf(v->why, sizeof v->why, "%s", e->error);
        /* Too large to read here is not damage: another process may allow
         * it (max_artifact_size). Reported, never removed. */
        keep = e->size > v->fs->max_artifact_size;
    } else if (seal == FILE_SEAL_OTHER || seal == FILE_SEAL_LOST) {
        progcache__file_seal_why(v->why, sizeof v->why, seal, other);
    } else if (a->kind != PROGCACHE_KIND_UNKNOWN && !a->valid) {
        snprintf(v->why, sizeof v->why, "%s", a->reason); /* a known format, malformed */
    } else if (seal == FILE_SEAL_CHANGED) {
        snprintf(v->why, sizeof v->why,
                 "the bytes differ from the SHA-256 recorded when it was stored (changed on "
                 "disk)");
    } else if (a->kind == PROGCACHE_KIND_UNKNOWN) {
        /* Of no kind we know, and nothing says its bytes changed: another
         * program's (progcache put and cuda.core store any bytes). Not
         * damage: kept, unless the caller asks for exactly this. */
        v->why[0] = '\0';
        v->out->unknown++;
        if ((v->opts->flags & PROGCACHE_VERIFY_FIX_UNKNOWN) &&
            progcache__file_remove_if_same(v->fs, item->shard, item->file_name, item->st, 0)) {
            e->removed = 1;
            v->out->removed++;
            v->out->unknown_removed++;
        }
    } else {
        v->why[0] = '\0';
    }
    if (!v->why[0] && seal == FILE_SEAL_NONE) /* i35: unsealed: named, or --seal */
        progcache__file_verify_unsealed(v->fs, item, v->opts->flags);
    if (v->why[0]) {
        e->error = v->why;
        v->out->bad++;
        if (v->opts->flags & PROGCACHE_VERIFY_FIX && !keep &&
            progcache__file_remove_if_same(v->fs, item->shard, item->file_name, item->st, 0)) {
            e->removed = 1;
            v->out->removed++;
            progcache__stats_add(v->fs->stats, PROGCACHE__CORRUPT_REMOVED, 1);
        }
    }
    return v->opts->on_entry ? v->opts->on_entry(v->opts->ctx, e) : 0;
}

/* A file or directory that is not part of the cache: counted and reported,
 * never removed. */
static int foreign(verify_ctx *v, const char *rel, const char *name, const char *what)
{
    char path[FILE_REL_PATH_MAX + 256 + 2];
    snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", name);
    v->out->foreign++;
    return v->opts->on_foreign ? v->opts->on_foreign(v->opts->ctx, path, what) : 0;
}

/* Something other than a regular file at an entry's path: a bad entry
 * (a get treats it as a miss). --fix removes it unless it is a directory,
 * whose contents are not ours to judge; unlink never follows a symbolic
 * link, and the removal is of the very thing examined
 * (progcache__file_remove_if_same). */
static int not_regular_entry(verify_ctx *v, int shard, const char *name, const struct stat *st)
{
    progcache_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%02x%s", shard, name);
    e.size = (uint64_t)st->st_size;
    e.atime_ns = (int64_t)st->st_atim.tv_sec * 1000000000 + st->st_atim.tv_nsec;
    e.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    e.inode = (uint64_t)st->st_ino;
    if (S_ISDIR(st->st_mode))
        snprintf(v->why, sizeof v->why, "a directory where an entry belongs; remove it by hand");
    else
        snprintf(v->why, sizeof v->why, "%s where an entry belongs, not a regular file",
                 progcache__fs_type_name(st->st_mode));
    e.error = v->why;
    v->out->checked++;
    v->out->bad++;
    if ((v->opts->flags & PROGCACHE_VERIFY_FIX) && !S_ISDIR(st->st_mode) &&
        progcache__file_remove_if_same(v->fs, shard, name, st, 0)) {
        e.removed = 1;
        v->out->removed++;
        progcache__stats_add(v->fs->stats, PROGCACHE__CORRUPT_REMOVED, 1);
    }
    return v->opts->on_entry ? v->opts->on_entry(v->opts->ctx, &e) : 0;
}

/* One readdir of rel (relative to the cache directory); fn sees each name
 * but "." and "..", with its lstat. A missing directory is empty. */
typedef int (*name_fn)(verify_ctx *v, int dirfd, const char *rel, const char *name,
                       const struct stat *st);

typedef struct {
    verify_ctx *v;
    const char *rel;
    name_fn fn;
} each_ctx;

static int each_visit(void *ctx, int dirfd, const char *name, unsigned char type)
{
    each_ctx *ec = ctx;
    struct stat st;
    (void)type;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    return ec->fn(ec->v, dirfd, ec->rel, name, &st);
}

static int each_name(verify_ctx *v, const char *rel, name_fn fn)
{
    int dirfd = *rel ? progcache__file_dir(v->fs, rel)
                     : openat(v->fs->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return 0;
    each_ctx ec = {v, rel, fn};
    return progcache__fs_each_name(dirfd, each_visit, &ec);
}

static int check_top(verify_ctx *v, int dirfd, const char *rel, const char *name,
                     const struct stat *st)
{
    (void)dirfd;
    if (!progcache__file_is_layout_name(name))
        return foreign(v, rel, name, "not part of a cache");
    return S_ISDIR(st->st_mode) ? 0 : foreign(v, rel, name, "not a directory");
}

static int check_entries_dir(verify_ctx *v, int dirfd, const char *rel, const char *name,
                             const struct stat *st)
{
    (void)dirfd;
    if (!progcache__file_is_shard_name(name))
        return foreign(v, rel, name, "not an entry");
    return S_ISDIR(st->st_mode) ? 0 : foreign(v, rel, name, "not a shard directory");
}

static int check_shard(verify_ctx *v, int dirfd, const char *rel, const char *name,
                       const struct stat *st)
{
    (void)dirfd;
    if (!progcache__file_is_entry_name(name))
        return foreign(v, rel, name, "not an entry");
    if (S_ISREG(st->st_mode))
        return 0; /* an entry: checked by the walk */
    return not_regular_entry(v, (int)strtol(rel + 8, NULL, 16), name, st);
}

static int check_tmp(verify_ctx *v, int dirfd, const char *rel, const char *name,
                     const struct stat *st)
{
    (void)dirfd;
    if (!progcache__file_is_tmp_name(name))
        return foreign(v, rel, name, "not a temp file of progcache or cuda.core");
    return S_ISREG(st->st_mode) ? 0 : foreign(v, rel, name, "not a regular file");
}

/* After the entries: everything else in the directory that a cache would
 * not have made. progcache/ holds progcache's own files and is not
 * looked into. */
static int verify_others(verify_ctx *v)
{
    int rc = each_name(v, "", check_top);
    if (!rc)
        rc = each_name(v, "entries", check_entries_dir);
    for (int shard = 0; shard < FILE_SHARDS && !rc; shard++) {
        char rel[16];
        snprintf(rel, sizeof rel, "entries/%02x", shard);
        rc = each_name(v, rel, check_shard);
    }
    if (!rc)
        rc = each_name(v, "tmp", check_tmp);
    return rc;
}

int progcache_file_verify(progcache_verify_result *out, progcache_file *file,
                          const progcache_verify_options *opts)
{
    progcache_verify_options o;
    file_store *fs = file;
    int rc = progcache__admin_file(file, "progcache_file_verify");
    if (rc)
        return rc;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_verify: out is NULL");
    if ((rc = progcache__version_check(out, PROGCACHE_VERIFY_RESULT_VERSION,
                                       "progcache_file_verify", "out",
                                       "progcache_verify_result")))
        return rc;
    progcache_verify_options_init(&o);
    rc = progcache__options_load(&o, opts, verify_options_size, PROGCACHE_VERIFY_OPTIONS_VERSION,
                                 "progcache_file_verify", "progcache_verify_options");
    if (rc)
        return rc;
    if (o.flags & PROGCACHE_VERIFY_FIX_UNKNOWN)
        o.flags |= PROGCACHE_VERIFY_FIX;
    if (o.flags & ~(PROGCACHE_VERIFY_FIX | PROGCACHE_VERIFY_FIX_UNKNOWN | PROGCACHE_VERIFY_SEAL))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_verify_options.flags has unknown bits 0x%x", o.flags);
    if ((o.flags & (PROGCACHE_VERIFY_FIX | PROGCACHE_VERIFY_SEAL)) &&
        (fs->flags & PROGCACHE_FILE_READONLY))
        return progcache__error(PROGCACHE_EINVAL,
                                "cache %s was opened read-only; cannot remove "
                                "bad entries or seal entries",
                                fs->root);
    /* Counted in a whole struct, copied back in the caller's version's size. */
    progcache_verify_result r;
    memset(&r, 0, sizeof r);
    r.version = out->version;
    verify_ctx v = {fs, &o, &r, ""};
    rc = progcache__file_walk(fs, PROGCACHE_ENTRIES_INSPECT, verify_visit, &v);
    if (!rc)
        rc = verify_others(&v);
    memcpy(out, &r, verify_result_size[r.version]);
    return rc;
}

/* ---- prune ------------------------------------------------------------------ */

void progcache_prune_options_init(progcache_prune_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_PRUNE_OPTIONS_VERSION);
}

/* The options struct's size in each version, for progcache__options_load. */
static const size_t prune_options_size[] = {0, offsetof(progcache_prune_options, on_progress),
                                            sizeof(progcache_prune_options)};

int progcache_file_prune(progcache_prune_result *out, progcache_file *file,
                         const progcache_prune_options *opts)
{
    file_store *fs = file;
    int rc = progcache__admin_file(file, "progcache_file_prune");
    if (rc)
        return rc;
    if (!opts)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_prune: opts is NULL; give at "
                                                  "least one bound (PROGCACHE_PRUNE_OPTIONS_INIT)");
    progcache_prune_options o;
    progcache_prune_options_init(&o);
    rc = progcache__options_load(&o, opts, prune_options_size, PROGCACHE_PRUNE_OPTIONS_VERSION,
                                 "progcache_file_prune", "progcache_prune_options");
    if (rc)
        return rc;
    opts = &o;
    if (out && (rc = progcache__version_check(out, PROGCACHE_PRUNE_RESULT_VERSION,
                                              "progcache_file_prune", "out",
                                              "progcache_prune_result")))
        return rc;
    if (!opts->max_size && !opts->older_than)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_prune: no bound given; set "
                                                  "max_size and/or older_than");
    int64_t cutoff = 0;
    if (opts->older_than) {
        int64_t now = (int64_t)time(NULL);
        cutoff = opts->older_than >= (uint64_t)now ? 1 : now - (int64_t)opts->older_than;
    }
    uint64_t removed, removed_bytes, bytes, count;
    rc = progcache__file_prune(fs, opts->max_size ? opts->max_size : UINT64_MAX, cutoff, &removed,
                               &removed_bytes, opts->on_progress, opts->ctx);
    if (rc)
        return rc;
    if (out) {
        progcache__struct_init(out, sizeof *out, out->version);
        out->removed = removed;
        out->removed_bytes = removed_bytes;
        progcache__file_totals(fs, &bytes, &count);
        out->entries = count;
        out->total_size = bytes;
    }
    return PROGCACHE_OK;
}
