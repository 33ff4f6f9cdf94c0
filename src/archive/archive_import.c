/* Import of a ustar archive into a cache directory (docs/FORMAT.md,
 * "Archives"; the format is in archive_ustar.c, export in archive.c, the
 * reading of the archive's bytes in archive_source.c).
 *
 * Import trusts nothing in the archive. It reads the whole archive once to
 * check it before writing anything: every member must be a regular file
 * with an entry's name, or one of the directories above such a file; a
 * link, a device, an absolute or ".." path, a name with upper-case or
 * extra characters, a header with a bad checksum, a member running past
 * the end refuse the whole archive. The path written is then built from
 * the validated hex digits, never taken from the archive, and the bytes go
 * in through the store's put path (temp file, fsync, rename), so an import
 * can neither write outside the cache nor leave a torn entry.
 *
 * Nothing is read without a bound: a member larger than the store's
 * max_artifact_size is refused from its header, before its bytes are read,
 * and pax headers are capped at PAX_MAX; only one member's bytes are held
 * in memory at a time.
 *
 * The archive is read by position (pread) when it is a regular file. A
 * stream (a pipe, standard input, a FIFO, a device) can be read only once,
 * but has to be read twice (checked whole, then imported), so as it is
 * checked it is copied into an unlinked temporary file, in the cache
 * directory where the kernel allows (O_TMPFILE), else in the temporary
 * directory (tmpfile): nothing is left behind, whatever happens. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "fs.h"
#include "archive/archive.h"
#include "archive/archive_sign.h"
#include "archive/archive_source.h"
#include "dir/dir.h"
#include "artifact/inspect.h"
#include "artifact/manifest_kind.h"

/* ---- pass one: check the archive --------------------------------------------------- */

typedef struct member {
    char rel[80];
    int shard;
    int nvrtc; /* set in scan_archive's *nvrtc: progcache/nvrtc is there */
    uint64_t offset, size;
    int64_t mtime;
    uint64_t records_at; /* its records (a pax header before it), in the archive */
    size_t records_len;
    /* The same entry more than once (duplicates): the index of its first
     * member; on that one, what this import wrote for the entry so far
     * (DUP_*) and its size. */
    size_t first;
    int written;
    uint64_t written_size;
} member;

enum { DUP_NONE = 0, DUP_INVALID = 1, DUP_VALID = 2 };

typedef struct member_list {
    member *items;
    size_t len, cap;
} member_list;

static int refuse(const char *path, uint64_t offset, const char *fmt, const char *detail)
{
    char what[512];
    snprintf(what, sizeof what, fmt, detail);
    return progcache__error(PROGCACHE_ECORRUPT,
                            "archive %s refused (nothing imported): %s (at byte %llu)", path, what,
                            (unsigned long long)offset);
}

static const char *type_words(char type)
{
    switch (type) {
    case '1': return "a hard link";
    case '2': return "a symbolic link";
    case '3':
    case '4': return "a device";
    case '6': return "a FIFO";
    case 'L':
    case 'K': return "a GNU long-name record (cache entry names are short)";
    default: return "of a type other than regular file or directory";
    }
}

static int add_member(member_list *list, const member *m)
{
    if (list->len == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 256;
        member *items = progcache__realloc(list->items, cap * sizeof *items);
        if (!items)
            return progcache__error(PROGCACHE_ENOMEM, "out of memory reading an archive");
        list->items = items;
        list->cap = cap;
    }
    list->items[list->len++] = *m;
    return PROGCACHE_OK;
}

/* A pax extended header's records (h.size <= PAX_MAX bytes at data). */
static int read_pax(archive_source *src, const tar_header *h, uint64_t pos, uint64_t data,
                    tar_header *pending, int *has_path, int *has_size)
{
    char why[300];
    char *text = progcache__malloc((size_t)h->size + 1);
    if (!text)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading %s", src->name);
    int rc = progcache__source_read(src, text, (size_t)h->size, data);
    memset(pending, 0, sizeof *pending);
    *has_path = *has_size = 0;
    if (!rc && progcache__tar_pax(pending, has_path, has_size, text, (size_t)h->size, why,
                                  sizeof why) != 0)
        rc = refuse(src->name, pos, "%s", why);
    pending->records_at += data; /* from within the records to the archive */
    progcache__free(text);
    return rc;
}

/* A signed bundle ends with its end-of-archive blocks at end, then zero
 * bytes only, at most BUNDLE_TAIL_MAX of them (the padding of tar's
 * records, whatever the blocking factor; docs/FORMAT.md, "Signed
 * bundles"): a byte or a member appended after the signed part is
 * refused, at its offset. Read in blocks, a stream at most that far. */
static int check_tail(archive_source *src, uint64_t end)
{
    unsigned char block[TAR_BLOCK];
    uint64_t limit = end + BUNDLE_TAIL_MAX + 1;
    int rc = progcache__source_have(src, limit);
    if (rc < 0)
        return rc;
    uint64_t size = src->size < limit ? src->size : limit;
    for (uint64_t at = end; at < size; at += TAR_BLOCK) {
        size_t n = size - at < TAR_BLOCK ? (size_t)(size - at) : TAR_BLOCK;
        if ((rc = progcache__source_read(src, block, n, at)))
            return rc;
        for (size_t i = 0; i < n; i++) {
            if (at + i >= end + BUNDLE_TAIL_MAX)
                return refuse(src->name, at + i, "%s", "more than 1 MiB of zero bytes after "
                                                       "its end-of-archive blocks");
            if (block[i])
                return refuse(src->name, at + i, "%s",
                              "bytes that are not zero after its end-of-archive blocks (a "
                              "signed bundle ends there; something was appended)");
        }
    }
    return PROGCACHE_OK;
}

/* Check every header and collect the entries; the NVRTC records' member,
 * not an entry, apart in *nvrtc (nvrtc->nvrtc set when there is one). */
static int scan_archive(member_list *list, bundle_seen *bundle, archive_source *src,
                        uint64_t max_entry, const progcache_archive_options *opts, member *nvrtc)
{
    const char *path = src->name;
    unsigned char block[TAR_BLOCK];
    char why[300];
    tar_header h, pending;
    int has_path = 0, has_size = 0, rc;
    uint64_t pos = 0;
    memset(&pending, 0, sizeof pending);
    for (;;) {
        if ((rc = progcache__source_have(src, pos + TAR_BLOCK)) != 1)
            return rc < 0 ? rc
                   : pos == 0
                       ? refuse(path, pos, "%s", "empty, or not a tar archive")
                       : refuse(path, pos, "%s", "cut short: no end-of-archive blocks");
        if ((rc = progcache__source_read(src, block, TAR_BLOCK, pos)))
            return rc;
        int got = progcache__tar_parse(&h, block, why, sizeof why);
        if (got == 0) {
            bundle->end_pos = pos;
            /* End of archive: what follows is padding, zeros only in a
             * bundle that is to be verified. */
            return opts && opts->verify_key ? check_tail(src, pos) : PROGCACHE_OK;
        }
        if (got < 0)
            return refuse(path, pos, "%s", why);
        if (has_path)
            memcpy(h.name, pending.name, sizeof h.name);
        if (has_size)
            h.size = pending.size;
        h.records_at = pending.records_at;
        h.records_len = pending.records_len;
        uint64_t data = pos + TAR_BLOCK;
        if (!src->stream && h.size > src->size - data)
            return refuse(path, pos, "member \"%s\" runs past the end of the archive", h.name);
        /* Sizes are checked before any data is read: a header may claim
         * anything. An entry may be as large as the store accepts; every
         * other member (pax records, directories) is small. */
        int is_entry = h.type == '0';
        if (h.size > (is_entry ? max_entry : PAX_MAX)) {
            char what[400];
            snprintf(what, sizeof what, "member \"%.255s\" claims %llu bytes, more than %s",
                     h.name, (unsigned long long)h.size,
                     is_entry ? "the maximum artifact size" : "such a member holds");
            return refuse(path, pos, "%s (max_artifact_size; the progcache command's "
                                     "--max-artifact-size)",
                          what);
        }
        uint64_t next = data + (h.size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if ((rc = progcache__source_have(src, data + h.size)) != 1)
            return rc < 0 ? rc
                          : refuse(path, pos, "member \"%s\" runs past the end of the archive",
                                   h.name);
        if ((rc = progcache__bundle_member(bundle, &h, pos, data, path)) != 0) {
            if (rc < 0)
                return rc;
            memset(&pending, 0, sizeof pending);
            has_path = has_size = 0;
            pos = next; /* a signed bundle's own member: not an entry */
            continue;
        }
        if (h.type == 'x' || h.type == 'g') {
            /* pax headers: 'x' applies to the next member, 'g' holds
             * archive-wide defaults (nothing we use). */
            if (h.type == 'x' &&
                (rc = read_pax(src, &h, pos, data, &pending, &has_path, &has_size)))
                return rc;
            pos = next;
            continue;
        }
        if (opts && opts->on_progress &&
            (rc = opts->on_progress(opts->ctx, "checking", next, src->stream ? 0 : src->size)))
            return rc;
        has_path = has_size = 0;
        pending.records_at = 0;
        pending.records_len = 0;
        member m;
        memset(&m, 0, sizeof m);
        if (h.type != '0' && h.type != '5') {
            char what[400];
            snprintf(what, sizeof what, "member \"%.255s\" is %s", h.name, type_words(h.type));
            return refuse(path, pos, "%s; only regular files are imported", what);
        }
        tar_name_kind kind = progcache__tar_name(h.name, m.rel, &m.shard);
        if (kind == TAR_NAME_BAD)
            return refuse(path, pos,
                          "member \"%s\" is not a cache entry (expected entries/<2 hex "
                          "digits>/<62 hex digits>, or " PROGCACHE__NVRTC_MEMBER ")",
                          h.name);
        if (kind == TAR_NAME_NVRTC) {
            if (h.type != '0' || h.size > PROGCACHE__NVRTC_RECORD_MAX || nvrtc->nvrtc)
                return refuse(path, pos, "member \"%s\" is not one small regular file of "
                                         "NVRTC records", h.name);
            nvrtc->nvrtc = 1;
            nvrtc->offset = data;
            nvrtc->size = h.size;
            pos = next;
            continue;
        }
        if ((h.type == '5') != (kind == TAR_NAME_DIR))
            return refuse(path, pos,
                          "member \"%s\" has an entry's name but is not a regular file"
                          " (or a directory's name but is a file)",
                          h.name);
        if (kind == TAR_NAME_ENTRY) {
            m.offset = data;
            m.size = h.size;
            m.mtime = h.mtime;
            m.records_at = h.records_at;
            m.records_len = h.records_len;
            if ((rc = add_member(list, &m)))
                return rc;
        }
        pos = next;
    }
}

static int read_source(void *ctx, void *buf, size_t len, uint64_t offset)
{
    return progcache__source_read(ctx, buf, len, offset);
}

/* Pass one whole: open, scan, and with opts->verify_key verify the
 * signature and that the entries are the manifest's (*check then holds
 * it, for pass two). fs may be NULL (progcache_archive_verify). */
static int check_archive(member_list *list, member *nvrtc, bundle_check **check,
                         archive_source *src, progcache_file *fs, int fd, const char *name,
                         uint64_t max_entry, const progcache_archive_options *opts,
                         progcache_archive_result *out)
{
    memset(nvrtc, 0, sizeof *nvrtc);
    bundle_seen bundle;
    memset(&bundle, 0, sizeof bundle);
    int rc = progcache__source_open(src, fs, fd, name, opts->verify_key != NULL);
    if (!rc)
        rc = scan_archive(list, &bundle, src, max_entry, opts, nvrtc);
    if (!rc)
        progcache__source_drain(src);
    if (!rc && opts->verify_key)
        rc = progcache__bundle_verify(check, &bundle, read_source, src, opts->verify_key,
                                      opts->verify_key_len, name, out);
    for (size_t i = 0; !rc && *check && i <= list->len; i++)
        rc = progcache__bundle_expect(*check, i, list->len, i < list->len ? list->items[i].rel : "",
                                      i < list->len ? list->items[i].size : 0, name);
    return rc;
}

/* ---- pass two: the puts ------------------------------------------------------------- */

static int by_rel(const void *a, const void *b, void *ctx)
{
    const member *items = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(items[x].rel, items[y].rel);
    return c ? c : (x < y ? -1 : x > y);
}

/* Point every member at the first member of its entry. An archive may
 * hold one entry twice (tar -r, two exports concatenated, or on purpose):
 * the first valid copy is the one kept, and an entry is counted once. */
static int find_duplicates(member_list *list)
{
    size_t *order = progcache__malloc((list->len ? list->len : 1) * sizeof *order);
    if (!order)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading an archive");
    for (size_t i = 0; i < list->len; i++)
        order[i] = list->items[i].first = i;
    qsort_r(order, list->len, sizeof *order, by_rel, list->items);
    for (size_t i = 1; i < list->len; i++)
        if (!strcmp(list->items[order[i]].rel, list->items[order[i - 1]].rel))
            list->items[order[i]].first = list->items[order[i - 1]].first;
    progcache__free(order);
    return PROGCACHE_OK;
}

static int import_from(progcache_file *fs, int fd, const char *name,
                       const progcache_archive_options *opts, progcache_archive_result *out)
{
    int rc = progcache__dir_writable(fs, "import");
    if (rc)
        return rc;
    member_list list = {NULL, 0, 0};
    progcache_buf data = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    archive_source src;
    progcache_buf nvrtc = PROGCACHE_BUF_INIT;
    member nv;
    uint64_t duplicates = 0;
    bundle_check *check = NULL;
    rc = check_archive(&list, &nv, &check, &src, fs, fd, name,
                       progcache__dir_max_artifact_size(fs), opts, out);
    if (!rc)
        rc = find_duplicates(&list);
    /* The NVRTC records are checked before anything is written, and
     * merged into this user's after the entries (dir/dir_nvrtc.c). */
    if (!rc && nv.nvrtc) {
        const member *m = &nv;
        if (!(rc = progcache__buf_reserve(&nvrtc, (size_t)m->size + 1)) &&
            !(rc = progcache__source_read(&src, nvrtc.data, (size_t)m->size, m->offset))) {
            progcache__buf_set_size(&nvrtc, (size_t)m->size);
            if (m->size && (nvrtc.data[m->size - 1] != '\n' || memchr(nvrtc.data, 0, m->size)))
                rc = refuse(name, m->offset, "%s", PROGCACHE__NVRTC_MEMBER " is not text lines");
        }
    }
    for (size_t i = 0; !rc && i < list.len; i++) {
        const member *m = &list.items[i];
        member *entry = &list.items[m->first];
        duplicates += m->first != i;
        if (entry->written == DUP_VALID)
            goto next; /* a later copy of an entry already in: the first valid one stays */
        if ((rc = progcache__buf_reserve(&data, (size_t)m->size)))
            break;
        if ((rc = progcache__source_read(&src, data.data, (size_t)m->size, m->offset)))
            break;
        progcache__buf_set_size(&data, (size_t)m->size);
        if ((rc = progcache__inspect_entry(&info, data.data, data.size, 1)))
            break;
        if (entry->written == DUP_INVALID && !info.valid)
            goto next; /* no better than the copy already in */
        /* Its records (lowered names...) go in with it, sealed with it. */
        if (m->records_len) {
            if ((rc = progcache__buf_reserve(&meta.records, m->records_len)) ||
                (rc = progcache__source_read(&src, meta.records.data, m->records_len,
                                             m->records_at)))
                break;
            progcache__buf_set_size(&meta.records, m->records_len);
        }
        if (check && (rc = progcache__bundle_entry_ok(check, i, data.data, data.size,
                                                      meta.records.data, m->records_len, name)))
            break;
        if ((rc = progcache__dir_put_entry(fs, m->rel, m->shard, data.data, data.size,
                                           m->records_len ? &meta : NULL)))
            break;
        if (entry->written == DUP_NONE) {
            out->entries++;
        } else { /* a valid copy in place of an invalid one: counted once */
            out->bytes -= entry->written_size;
            out->invalid--;
        }
        entry->written = info.valid ? DUP_VALID : DUP_INVALID;
        entry->written_size = m->size;
        out->bytes += m->size;
        out->invalid += !info.valid;
        if (opts && opts->on_entry) {
            progcache_entry e;
            memset(&e, 0, sizeof e);
            snprintf(e.name, sizeof e.name, "%.2s%s", m->rel + 8, m->rel + 11);
            e.size = m->size;
            e.mtime_ns = m->mtime * 1000000000;
            e.data = data.data;
            e.artifact = &info;
            rc = opts->on_entry(opts->ctx, &e);
        }
    next:
        if (!rc && opts && opts->on_progress)
            rc = opts->on_progress(opts->ctx, "importing", i + 1, list.len);
    }
    if (duplicates)
        progcache__dir_log(fs, PROGCACHE_LOG_WARN,
                           "archive %s holds %llu members that repeat an entry before them: "
                           "the first valid copy of each entry was kept, the others skipped",
                           name, (unsigned long long)duplicates);
    if (!rc && nvrtc.size)
        rc = progcache__file_nvrtc_add(fs, (const char *)nvrtc.data, nvrtc.size,
                                       PROGCACHE__NVRTC_RECORD_LINES);
    progcache_buf_free(&nvrtc);
    progcache__source_close(&src);
    progcache__bundle_check_free(check);
    progcache__free(list.items);
    progcache_buf_free(&data);
    progcache_artifact_info_release(&info);
    progcache_entry_meta_release(&meta);
    return rc;
}

int progcache_file_import_fd(progcache_archive_result *out, progcache_file *file, int fd,
                             const char *name, const progcache_archive_options *opts)
{
    progcache_file *fs;
    progcache_archive_result local = PROGCACHE_ARCHIVE_RESULT_INIT;
    progcache_archive_options o;
    int rc = progcache__archive_args(&fs, out, file, opts, &o, "progcache_file_import_fd");
    if (rc)
        return rc;
    opts = &o;
    if (fd < 0)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_import_fd: fd is %d", fd);
    return import_from(fs, fd, name && *name ? name : "(file descriptor)", opts,
                       out ? out : &local);
}

int progcache_file_import(progcache_archive_result *out, progcache_file *file, const char *path,
                          const progcache_archive_options *opts)
{
    progcache_file *fs;
    progcache_archive_result local = PROGCACHE_ARCHIVE_RESULT_INIT;
    if (!path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "progcache_file_import: the archive path is "
                                                  "empty");
    progcache_archive_options o;
    int rc = progcache__archive_args(&fs, out, file, opts, &o, "progcache_file_import");
    if (rc)
        return rc;
    opts = &o;
    if ((rc = progcache__dir_writable(fs, "import")))
        return rc;
    /* A FIFO is read as a pipe is: the open waits for its writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot open archive %s", path);
    rc = import_from(fs, fd, path, opts, out ? out : &local);
    close(fd);
    return rc;
}

int progcache_archive_verify(progcache_archive_result *out, const char *path,
                             uint64_t max_artifact_size, const progcache_archive_options *opts)
{
    progcache_archive_options o;
    member_list list = {NULL, 0, 0};
    bundle_check *check = NULL;
    archive_source src;
    int rc = progcache__archive_args(NULL, out, NULL, opts, &o, "progcache_archive_verify");
    if (rc)
        return rc;
    if (!path || !*path || !o.verify_key)
        return progcache__error(PROGCACHE_EINVAL, "progcache_archive_verify: give %s",
                                o.verify_key ? "the archive's path" : "opts->verify_key");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot open archive %s", path);
    member nv;
    rc = check_archive(&list, &nv, &check, &src, NULL, fd, path,
                       max_artifact_size ? max_artifact_size : (uint64_t)1 << 30, &o, out);
    for (size_t i = 0; !rc && out && i < list.len; i++) {
        out->entries++;
        out->bytes += list.items[i].size;
    }
    progcache__source_close(&src);
    progcache__bundle_check_free(check);
    progcache__free(list.items);
    close(fd);
    return rc;
}
