/* The walk of a cache directory's entries: every entry in name order,
 * read, inspected and its records checked on request, for the tier's
 * foreach (progcache_store_foreach) and for the cache directory's room
 * (src/dir/: listing, verify, export). Reading an entry by its name too.
 *
 * A shard is listed by name only (one readdir), sorted, and each entry is
 * stat'ed when it is visited, not before: the first entries of a million
 * come after one shard's readdir, not ~3,900 stats (issue 32: `ls | head
 * -1`, the sample of `stats --charts`); memory is one shard's names.
 *
 * Everything here runs while other processes use the cache. Entries are
 * read through the same symlink-refusing opens as a get, and an entry that
 * vanishes between listing and visiting is skipped. */
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

typedef struct shard_name {
    char name[63];
    unsigned char type; /* DT_REG, or DT_UNKNOWN where the file system does not say */
} shard_name;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const shard_name *)a)->name, ((const shard_name *)b)->name);
}

/* One shard's entry names, listed without a stat (the top of the file). */
typedef struct shard_names {
    shard_name *names;
    size_t len, cap;
} shard_names;

/* List the entry names of the shard open as dir (regular files or of
 * unknown type, with an entry's name) in name order. -1: out of memory. */
static int list_names(DIR *dir, shard_names *list)
{
    list->len = 0;
    struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
        if ((d->d_type != DT_REG && d->d_type != DT_UNKNOWN) ||
            !progcache__file_is_entry_name(d->d_name))
            continue;
        if (list->len == list->cap) {
            size_t cap = list->cap ? list->cap * 2 : 64;
            shard_name *names = progcache__realloc(list->names, cap * sizeof *names);
            if (!names)
                return -1;
            list->names = names;
            list->cap = cap;
        }
        memcpy(list->names[list->len].name, d->d_name, 63);
        list->names[list->len++].type = d->d_type;
    }
    if (list->len > 1)
        qsort(list->names, list->len, sizeof *list->names, by_name);
    return 0;
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

/* Names the walk stat'ed by name (progcache__file_walk_names_statted). */
static uint64_t names_statted;

uint64_t progcache__file_walk_names_statted(void)
{
    return __atomic_load_n(&names_statted, __ATOMIC_RELAXED);
}

/* Stat name in the shard open as dirfd: 1 if it is a regular file. */
static int stat_name(int dirfd, const char *name, struct stat *st)
{
    __atomic_add_fetch(&names_statted, 1, __ATOMIC_RELAXED);
    return fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st->st_mode);
}

/* Visit the entry it of the shard open as dirfd. Its stat comes from the
 * open file where the flags read it (one stat, not two), else from a stat
 * of the name now; a name gone or no longer a regular file since the
 * listing is skipped. A name of unknown type is stat'ed before it is
 * opened, as the scans do: nothing but a regular file is opened. */
static int visit(walk_state *w, int dirfd, int shard, const shard_name *it)
{
    const char *name = it->name;
    progcache_entry e;
    memset(&e, 0, sizeof e);
    struct stat st;
    memset(&st, 0, sizeof st);
    file_walk_item item = {&e, shard, name, -1, &st};
    char errtext[160];
    int rc = 0;
    unsigned int reads =
        PROGCACHE_ENTRIES_READ | PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS;
    if (w->flags & reads) {
        if (it->type == DT_UNKNOWN && !stat_name(dirfd, name, &st))
            return 0;
        item.fd = open_entry(w->fs, shard, name);
        if (item.fd < 0) {
            if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                return 0; /* evicted or replaced meanwhile */
            snprintf(errtext, sizeof errtext, "cannot open it: %s", strerror(errno));
            e.error = errtext;
        } else {
            int got = read_open_entry(w->fs, item.fd, &w->data, &st, errtext, sizeof errtext);
            if (got == 0)
                goto done;
            if (got < 0)
                e.error = errtext; /* (st: the fstat's if it succeeded, else still the stat's) */
            else
                e.data = w->data.data;
        }
    }
    if (!S_ISREG(st.st_mode) && !stat_name(dirfd, name, &st)) /* not opened, or no fstat */
        goto done;
    progcache__file_scan_count(0, 1); /* an entry examined, once */
    fill_entry(&e, shard, name, &st);
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
    shard_names list = {NULL, 0, 0};
    int rc = PROGCACHE_OK;
    for (int shard = 0; shard < FILE_SHARDS && !rc; shard++) {
        char rel[16];
        snprintf(rel, sizeof rel, "entries/%02x", shard);
        int dirfd = progcache__file_dir(fs, rel);
        if (dirfd < 0)
            continue; /* a missing shard is empty; a link there refused and named */
        DIR *dir = fdopendir(dirfd);
        if (!dir) {
            close(dirfd);
            continue;
        }
        if (list_names(dir, &list) != 0) {
            closedir(dir);
            rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing %s/entries/%02x",
                                  fs->root, shard);
            break;
        }
        progcache__file_scan_count(1, 0);
        for (size_t i = 0; i < list.len && !rc; i++)
            rc = visit(&w, dirfd, shard, &list.names[i]);
        closedir(dir); /* closes dirfd */
    }
    progcache__free(list.names);
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
