/* Looking after a cache directory: listing entries, reading one by name,
 * verify and prune (progcache/admin.h).
 *
 * Everything here runs while other processes use the cache. Entries are
 * read through the same symlink-refusing opens as a get, an entry that
 * vanishes between listing and reading is skipped, and nothing is removed
 * unless it is still the file that was examined (rename aside, compare,
 * link back: progcache__file_remove_if_same). */
#include "store/file/file_admin.h"

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
#include "store/file/file_stats.h"
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

/* ---- walking ------------------------------------------------------------ */

typedef struct shard_item {
    char name[63];
    struct stat st;
} shard_item;

typedef struct shard_list {
    shard_item *items;
    size_t len, cap;
    int failed;
} shard_list;

static int list_entry(void *ctx, int shard, const char *name, const struct stat *st)
{
    shard_list *list = ctx;
    if (list->len == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64;
        shard_item *items = progcache__realloc(list->items, cap * sizeof *items);
        if (!items) {
            list->failed = 1;
            return 1;
        }
        list->items = items;
        list->cap = cap;
    }
    memcpy(list->items[list->len].name, name, 63);
    list->items[list->len].st = *st;
    list->len++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const shard_item *)a)->name, ((const shard_item *)b)->name);
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static void fill_entry(progcache_entry *e, int shard, const char *name, const struct stat *st)
{
    snprintf(e->name, sizeof e->name, "%02x%s", shard, name);
    e->size = (uint64_t)st->st_size;
    e->atime_ns = ns_of(st->st_atim);
    e->mtime_ns = ns_of(st->st_mtim);
    e->inode = (uint64_t)st->st_ino;
}

/* Open an entry for reading without making the read a use: O_NOATIME
 * where we own the file (EPERM otherwise: open normally). */
static int open_entry(file_store *fs, int shard, const char *name)
{
    char rel[FILE_REL_PATH_MAX];
    snprintf(rel, sizeof rel, "entries/%02x/%s", shard, name);
    int fd = progcache__fs_open_beneath(fs->root_fd, rel, O_RDONLY | O_NOATIME, 0);
    if (fd < 0 && errno == EPERM)
        fd = progcache__fs_open_beneath(fs->root_fd, rel, O_RDONLY, 0);
    if (fd < 0)
        (void)progcache__file_refused(fs, rel, errno, 0); /* a link at the shard */
    return fd;
}

/* Read the whole entry behind fd into buf, unless it is larger than the
 * store's max_artifact_size (then it is not read at all). 1: read (st
 * filled); 0: gone or not a regular file any more (skip it); -1: failed or
 * too large, why in errtext. */
static int read_open_entry(const file_store *fs, int fd, progcache_buf *buf, struct stat *st,
                           char *errtext, size_t errlen)
{
    if (fstat(fd, st) != 0) {
        snprintf(errtext, errlen, "cannot stat it: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st->st_mode))
        return 0;
    if ((uint64_t)st->st_size > fs->max_artifact_size) {
        snprintf(errtext, errlen,
                 "it is %lld bytes, more than max_artifact_size (%llu bytes); not read",
                 (long long)st->st_size, (unsigned long long)fs->max_artifact_size);
        return -1;
    }
    if (progcache__buf_reserve(buf, (size_t)st->st_size) != PROGCACHE_OK) {
        snprintf(errtext, errlen, "out of memory reading %lld bytes", (long long)st->st_size);
        return -1;
    }
    ssize_t n = progcache__fs_read_full(fd, buf->data, (size_t)st->st_size);
    if (n < 0) {
        snprintf(errtext, errlen, "cannot read it: %s", strerror(errno));
        return -1;
    }
    progcache__buf_set_size(buf, (size_t)n);
    if ((size_t)n != (size_t)st->st_size) {
        snprintf(errtext, errlen,
                 "it is %lld bytes long but only %zd could be read (cut "
                 "short while reading?)",
                 (long long)st->st_size, n);
        return -1;
    }
    return 1;
}

typedef struct walk_state {
    file_store *fs;
    unsigned int flags;
    file_walk_fn fn;
    void *ctx;
    progcache_buf data;
    progcache_artifact_info info;
    progcache_entry_meta meta; /* records, with PROGCACHE_ENTRIES_RECORDS */
} walk_state;

static int visit(walk_state *w, int shard, const shard_item *it)
{
    progcache_entry e;
    memset(&e, 0, sizeof e);
    fill_entry(&e, shard, it->name, &it->st);
    file_walk_item item = {&e, shard, it->name, -1, &it->st};
    char errtext[160];
    struct stat st;
    int rc = 0;
    unsigned int reads =
        PROGCACHE_ENTRIES_READ | PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS;
    if (w->flags & reads) {
        item.fd = open_entry(w->fs, shard, it->name);
        if (item.fd < 0) {
            if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                return 0; /* evicted or replaced meanwhile */
            snprintf(errtext, sizeof errtext, "cannot open it: %s", strerror(errno));
            e.error = errtext;
        } else {
            int got = read_open_entry(w->fs, item.fd, &w->data, &st, errtext, sizeof errtext);
            if (got == 0)
                goto done;
            if (got < 0) {
                e.error = errtext;
            } else {
                fill_entry(&e, shard, it->name, &st);
                item.st = &st;
                e.data = w->data.data;
            }
        }
        if (e.data && (w->flags & PROGCACHE_ENTRIES_INSPECT)) {
            rc = progcache__inspect_entry(&w->info, e.data, (size_t)e.size, 1);
            if (rc)
                goto done;
            e.artifact = &w->info;
        }
        if (e.data && (w->flags & PROGCACHE_ENTRIES_RECORDS)) {
            int whole;
            if (progcache__file_seal_check(w->fs, item.fd, e.name, e.data, (size_t)e.size, &w->meta,
                                           &whole, NULL) == FILE_SEAL_MATCH &&
                w->meta.records.size)
                e.meta = &w->meta;
        }
    }
    rc = w->fn(w->ctx, &item);
done:
    if (item.fd >= 0)
        close(item.fd);
    return rc;
}

int progcache__file_walk(file_store *fs, unsigned int flags, file_walk_fn fn, void *ctx)
{
    walk_state w = {fs, flags, fn, ctx, PROGCACHE_BUF_INIT, PROGCACHE_ARTIFACT_INFO_INIT,
                    PROGCACHE_ENTRY_META_INIT};
    shard_list list = {NULL, 0, 0, 0};
    int rc = PROGCACHE_OK;
    for (int shard = 0; shard < FILE_SHARDS && !rc; shard++) {
        list.len = 0;
        progcache__file_scan_shard(fs, shard, list_entry, &list);
        if (list.failed) {
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing %s/entries/%02x",
                                  fs->root, shard);
            break;
        }
        if (list.len > 1)
            qsort(list.items, list.len, sizeof *list.items, by_name);
        for (size_t i = 0; i < list.len && !rc; i++)
            rc = visit(&w, shard, &list.items[i]);
    }
    progcache__free(list.items);
    progcache_buf_free(&w.data);
    progcache_artifact_info_release(&w.info);
    progcache_entry_meta_release(&w.meta);
    return rc;
}

/* ---- foreach and read by name ------------------------------------------- */

typedef struct foreach_ctx {
    progcache_entry_fn fn;
    void *ctx;
} foreach_ctx;

static int foreach_visit(void *ctx, file_walk_item *item)
{
    foreach_ctx *f = ctx;
    return f->fn(f->ctx, item->entry);
}

int progcache_file_foreach(progcache_file *file, unsigned int flags, progcache_entry_fn fn,
                           void *ctx)
{
    file_store *fs = file;
    int rc = progcache__admin_file(file, "progcache_file_foreach");
    if (rc)
        return rc;
    if (!fn)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_foreach: fn is NULL");
    if (flags & ~(PROGCACHE_ENTRIES_READ | PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS))
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_foreach: unknown flags 0x%x",
                                flags);
    foreach_ctx f = {fn, ctx};
    return progcache__file_walk(fs, flags, foreach_visit, &f);
}

int progcache__file_vforeach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                             void *ctx)
{
    return progcache_file_foreach((file_store *)store, flags, fn, ctx);
}

int progcache_file_read_entry(progcache_buf *out, progcache_file *file, const char *name)
{
    file_store *fs = file;
    int rc = progcache__admin_file(file, "progcache_file_read_entry");
    if (rc)
        return rc;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_read_entry: out is NULL");
    if (!name || strlen(name) != 64 || !progcache__is_hex(name, 64))
        return progcache__error(PROGCACHE_EINVAL,
                                "\"%s\" is not an entry name: give the 64 lowercase hex digits "
                                "`progcache ls` prints",
                                name ? name : "(null)");
    char shard_hex[3] = {name[0], name[1], 0};
    int fd = open_entry(fs, (int)strtol(shard_hex, NULL, 16), name + 2);
    if (fd < 0) {
        if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
            return PROGCACHE_ENOTFOUND;
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      "cannot open entry %s in %s", name, fs->root);
    }
    struct stat st;
    memset(&st, 0, sizeof st);
    char errtext[160];
    int got = read_open_entry(fs, fd, out, &st, errtext, sizeof errtext);
    close(fd);
    if (got == 0)
        return PROGCACHE_ENOTFOUND;
    if (got < 0)
        return progcache__error((uint64_t)st.st_size > fs->max_artifact_size ? PROGCACHE_ECORRUPT
                                                                             : PROGCACHE_EIO,
                                "entry %s in %s: %s", name, fs->root, errtext);
    return PROGCACHE_OK;
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
