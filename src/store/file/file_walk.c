/* The walk of a cache directory's entries: every entry in name order,
 * read, inspected and its records checked on request, for the tier's
 * foreach (progcache_store_foreach) and for the cache directory's room
 * (src/dir/: listing, verify, export). Reading an entry by its name too.
 *
 * Everything here runs while other processes use the cache. Entries are
 * read through the same symlink-refusing opens as a get, and an entry that
 * vanishes between listing and reading is skipped. */
#include "store/file/file_walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "sha256.h"
#include "artifact/manifest_kind.h"

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

int progcache__file_foreach(file_store *fs, unsigned int flags, progcache_entry_fn fn, void *ctx)
{
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
    return progcache__file_foreach((file_store *)store, flags, fn, ctx);
}

int progcache__file_read_name(progcache_buf *out, file_store *fs, const char *name)
{
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
