/* Export and import of a cache directory as a POSIX ustar archive
 * (docs/FORMAT.md, "Archives").
 *
 * An archive holds the entries as regular files entries/<2 hex>/<62 hex>,
 * exactly the cache directory's own layout, so `tar -xf` into an empty
 * directory gives a working cache and `tar -cf x.tar entries` in a cache
 * directory gives an archive progcache imports.
 *
 * Import trusts nothing in the archive. It reads the whole archive once to
 * check it before writing anything: every member must be a regular file
 * with an entry's name, or one of the directories above such a file; a
 * link, a device, an absolute or ".." path, a name with upper-case or
 * extra characters, a header with a bad checksum, a member running past
 * the end refuse the whole archive. The path written is then built from
 * the validated hex digits, never taken from the archive, and the bytes go
 * in through the store's put path (temp file, fsync, rename), so an import
 * can neither write outside the cache nor leave a torn entry. */
#include "store/archive.h"

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
#include "store/store_file_admin.h"
#include "store/validate.h"

#define TAR_RECORD (20 * TAR_BLOCK) /* archives are padded to whole records */
#define PAX_MAX (1u << 20)

/* ---- names ------------------------------------------------------------------- */

tar_name_kind progcache__tar_name(const char *name, char rel[80], int *shard)
{
    if (name[0] == '.' && name[1] == '/')
        name += 2;
    if (strncmp(name, "entries", 7) != 0)
        return TAR_NAME_BAD;
    const char *p = name + 7;
    if (*p == '\0' || (p[0] == '/' && p[1] == '\0'))
        return TAR_NAME_DIR;
    if (*p != '/' || !progcache__is_hex(p + 1, 2))
        return TAR_NAME_BAD;
    const char *shard_hex = p + 1;
    p += 3;
    if (*p == '\0' || (p[0] == '/' && p[1] == '\0'))
        return TAR_NAME_DIR;
    if (*p != '/' || strlen(p + 1) != 62 || !progcache__is_hex(p + 1, 62))
        return TAR_NAME_BAD;
    snprintf(rel, 80, "entries/%.2s/%s", shard_hex, p + 1);
    char digits[3] = {shard_hex[0], shard_hex[1], 0};
    *shard = (int)strtol(digits, NULL, 16);
    return TAR_NAME_ENTRY;
}

/* ---- header blocks --------------------------------------------------------- */

/* A numeric field: octal digits (leading blanks, ended by blank or NUL) or,
 * for values too large for octal, GNU's base-256 (high bit of the first
 * byte set). 0, or -1 for anything else. */
static int parse_number(uint64_t *out, const unsigned char *field, size_t len)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        if (field[0] != 0x80)
            return -1; /* negative, or too large for us */
        for (size_t i = 1; i < len; i++) {
            if (v >> 56)
                return -1;
            v = v << 8 | field[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < len && field[i] == ' ')
        i++;
    size_t digits = 0;
    for (; i < len && field[i] >= '0' && field[i] <= '7'; i++, digits++) {
        if (v >> 60)
            return -1;
        v = v << 3 | (uint64_t)(field[i] - '0');
    }
    for (; i < len; i++)
        if (field[i] != ' ' && field[i] != '\0')
            return -1;
    if (!digits)
        return -1;
    *out = v;
    return 0;
}

static void copy_field(char *out, const unsigned char *field, size_t len)
{
    size_t n = 0;
    while (n < len && field[n])
        n++;
    memcpy(out, field, n);
    out[n] = '\0';
}

int progcache__tar_parse(tar_header *out, const unsigned char block[TAR_BLOCK], char *why,
                         size_t why_len)
{
    size_t zero = 0;
    while (zero < TAR_BLOCK && block[zero] == 0)
        zero++;
    if (zero == TAR_BLOCK)
        return 0;
    uint64_t want, sum = 0;
    int64_t ssum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++) {
        unsigned char c = (i >= 148 && i < 156) ? ' ' : block[i];
        sum += c;
        ssum += (signed char)c;
    }
    if (parse_number(&want, block + 148, 8) != 0 || (want != sum && (int64_t)want != ssum)) {
        snprintf(why, why_len, "not a tar header (bad checksum)");
        return -1;
    }
    if (memcmp(block + 257, "ustar", 5) != 0 || (block[262] != '\0' && block[262] != ' ')) {
        snprintf(why, why_len, "not a ustar header (an old-style tar archive?)");
        return -1;
    }
    memset(out, 0, sizeof *out);
    char name[101], prefix[156];
    copy_field(name, block, 100);
    copy_field(prefix, block + 345, 155);
    /* Only POSIX ustar ("ustar\0") has a prefix field; old GNU headers
     * keep other data there. */
    if (block[262] == '\0' && prefix[0])
        snprintf(out->name, sizeof out->name, "%s/%s", prefix, name);
    else
        snprintf(out->name, sizeof out->name, "%s", name);
    out->type = block[156] ? (char)block[156] : '0';
    if (parse_number(&out->size, block + 124, 12) != 0) {
        snprintf(why, why_len, "member \"%s\" has a malformed size field", out->name);
        return -1;
    }
    uint64_t mtime = 0;
    (void)parse_number(&mtime, block + 136, 12); /* informative only */
    out->mtime = mtime < ((uint64_t)1 << 34) ? (int64_t)mtime : 0;
    return 1;
}

int progcache__tar_pax(tar_header *next, int *has_path, int *has_size, const char *data, size_t len,
                       char *why, size_t why_len)
{
    size_t pos = 0;
    while (pos < len) {
        /* "<length> <key>=<value>\n", length counting the whole record. */
        size_t rec = 0, i = pos;
        while (i < len && data[i] >= '0' && data[i] <= '9' && rec < PAX_MAX)
            rec = rec * 10 + (size_t)(data[i++] - '0');
        if (i == pos || i >= len || data[i] != ' ' || rec <= i - pos + 1 || rec > len - pos ||
            data[pos + rec - 1] != '\n') {
            snprintf(why, why_len, "malformed pax extended header record at byte %zu", pos);
            return -1;
        }
        const char *key = data + i + 1, *end = data + pos + rec - 1;
        const char *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq) {
            snprintf(why, why_len, "pax extended header record without '=' at byte %zu", pos);
            return -1;
        }
        size_t key_len = (size_t)(eq - key), value_len = (size_t)(end - eq - 1);
        if (key_len == 4 && !memcmp(key, "path", 4)) {
            if (value_len >= sizeof next->name || memchr(eq + 1, '\0', value_len)) {
                snprintf(why, why_len, "pax path of %zu bytes is not a cache entry name",
                         value_len);
                return -1;
            }
            memcpy(next->name, eq + 1, value_len);
            next->name[value_len] = '\0';
            *has_path = 1;
        } else if (key_len == 4 && !memcmp(key, "size", 4)) {
            uint64_t v = 0;
            if (value_len == 0 || value_len > 19) {
                snprintf(why, why_len, "malformed pax size");
                return -1;
            }
            for (size_t k = 0; k < value_len; k++) {
                char c = eq[1 + k];
                if (c < '0' || c > '9') {
                    snprintf(why, why_len, "malformed pax size");
                    return -1;
                }
                v = v * 10 + (uint64_t)(c - '0');
            }
            next->size = v;
            *has_size = 1;
        }
        pos += rec;
    }
    return 0;
}

int progcache__tar_make(unsigned char block[TAR_BLOCK], const char *name, uint64_t size,
                        int64_t mtime)
{
    if (size >= (uint64_t)1 << 33 || strlen(name) >= 100)
        return -1;
    memset(block, 0, TAR_BLOCK);
    memcpy(block, name, strlen(name));
    memcpy(block + 100, "0000644", 8);
    memcpy(block + 108, "0000000", 8);
    memcpy(block + 116, "0000000", 8);
    char num[16];
    snprintf(num, sizeof num, "%011llo", (unsigned long long)size);
    memcpy(block + 124, num, 12);
    snprintf(num, sizeof num, "%011llo",
             (unsigned long long)(mtime > 0 && mtime < ((int64_t)1 << 33) ? mtime : 0));
    memcpy(block + 136, num, 12);
    block[156] = '0';
    memcpy(block + 257, "ustar", 6); /* with its NUL */
    memcpy(block + 263, "00", 2);
    memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += block[i];
    snprintf(num, sizeof num, "%06o", sum);
    memcpy(block + 148, num, 7); /* six digits, NUL; the space stays */
    return 0;
}

/* ---- export ------------------------------------------------------------------- */

typedef struct export_ctx {
    FILE *f;
    const char *path;
    const progcache_archive_options *opts;
    progcache_archive_result *out;
    uint64_t written;
} export_ctx;

static int write_bytes(export_ctx *x, const void *data, size_t len)
{
    if (len && fwrite(data, 1, len, x->f) != len)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", x->path);
    x->written += len;
    return PROGCACHE_OK;
}

static int export_visit(void *ctx, file_walk_item *item)
{
    export_ctx *x = ctx;
    progcache_entry *e = item->entry;
    if (e->error)
        return progcache__error(PROGCACHE_EIO, "cannot export entry %s: %s", e->name, e->error);
    unsigned char block[TAR_BLOCK];
    char name[80];
    snprintf(name, sizeof name, "entries/%.2s/%s", e->name, e->name + 2);
    if (progcache__tar_make(block, name, e->size, e->mtime_ns / 1000000000) != 0)
        return progcache__error(PROGCACHE_EIO, "entry %s is too large for a ustar archive",
                                e->name);
    int rc = write_bytes(x, block, sizeof block);
    if (!rc)
        rc = write_bytes(x, e->data, (size_t)e->size);
    static const unsigned char zeros[TAR_BLOCK];
    if (!rc && e->size % TAR_BLOCK)
        rc = write_bytes(x, zeros, TAR_BLOCK - e->size % TAR_BLOCK);
    if (rc)
        return rc;
    x->out->entries++;
    x->out->bytes += e->size;
    if (e->artifact && !e->artifact->valid)
        x->out->invalid++;
    return x->opts && x->opts->on_entry ? x->opts->on_entry(x->opts->ctx, e) : 0;
}

/* The end: two zero blocks, then zeros to a whole record. */
static int write_trailer(export_ctx *x)
{
    static const unsigned char zeros[TAR_RECORD];
    uint64_t end = x->written + 2 * TAR_BLOCK;
    uint64_t pad = (TAR_RECORD - end % TAR_RECORD) % TAR_RECORD;
    return write_bytes(x, zeros, (size_t)(2 * TAR_BLOCK + pad));
}

static int check_archive_args(file_store **fs, progcache_archive_result *out,
                              progcache_store *store, const char *path,
                              const progcache_archive_options *opts, const char *fn)
{
    int rc = progcache__admin_store(fs, store, fn);
    if (rc)
        return rc;
    if (!path || !*path)
        return progcache__error(PROGCACHE_EINVAL, "%s: the archive path is empty", fn);
    if (out && (out->version == 0 || out->version > PROGCACHE_ARCHIVE_RESULT_VERSION))
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: out->version is not set "
                                "(PROGCACHE_ARCHIVE_RESULT_INIT)",
                                fn);
    if (opts && (opts->version == 0 || opts->version > PROGCACHE_ARCHIVE_OPTIONS_VERSION))
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: opts->version is not set "
                                "(PROGCACHE_ARCHIVE_OPTIONS_INIT)",
                                fn);
    if (out) {
        unsigned int version = out->version;
        memset(out, 0, sizeof *out);
        out->version = version;
    }
    return PROGCACHE_OK;
}

void progcache_archive_options_init(progcache_archive_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->version = PROGCACHE_ARCHIVE_OPTIONS_VERSION;
}

/* Split path into its directory (opened) and its last component. */
static int open_parent(const char *path, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash)
        return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char dir[4096];
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, len);
    dir[len] = '\0';
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int progcache_file_export(progcache_archive_result *out, progcache_store *store, const char *path,
                          const progcache_archive_options *opts)
{
    file_store *fs;
    progcache_archive_result local = PROGCACHE_ARCHIVE_RESULT_INIT;
    int rc = check_archive_args(&fs, out, store, path, opts, "progcache_file_export");
    if (rc)
        return rc;
    const char *base;
    char tmp_name[64];
    int dirfd = open_parent(path, &base), fd = -1;
    export_ctx x = {NULL, path, opts, out ? out : &local, 0};
    if (dirfd < 0 || !*base)
        return progcache__error_errno(PROGCACHE_EIO, *base ? errno : EISDIR,
                                      "cannot write archive %s", path);
    /* Written under a temp name and renamed when complete: an export that
     * fails leaves no partial archive behind. */
    fd = progcache__fs_create_temp(dirfd, ".progcache-export-", 0666, tmp_name, sizeof tmp_name);
    if (fd < 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot create archive %s", path);
        goto done;
    }
    x.f = fdopen(fd, "wb");
    if (!x.f) {
        rc = progcache__error_errno(PROGCACHE_ENOMEM, errno, "cannot write archive %s", path);
        goto done;
    }
    fd = -1;
    rc = progcache__file_walk(fs, PROGCACHE_ENTRIES_INSPECT, export_visit, &x);
    if (!rc)
        rc = write_trailer(&x);
    if (!rc && (fflush(x.f) != 0 || fsync(fileno(x.f)) != 0))
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", path);
    if (fclose(x.f) != 0 && !rc)
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot write archive %s", path);
    x.f = NULL;
    if (!rc && renameat(dirfd, tmp_name, dirfd, base) != 0)
        rc =
            progcache__error_errno(PROGCACHE_EIO, errno, "cannot rename the archive into %s", path);
    if (rc)
        (void)unlinkat(dirfd, tmp_name, 0);
done:
    if (x.f)
        fclose(x.f);
    if (fd >= 0)
        close(fd);
    close(dirfd);
    return rc;
}

/* ---- import --------------------------------------------------------------------- */

typedef struct member {
    char rel[80];
    int shard;
    uint64_t offset, size;
    int64_t mtime;
} member;

typedef struct member_list {
    member *items;
    size_t len, cap;
} member_list;

static int read_at(int fd, void *buf, size_t len, uint64_t offset)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : 0;
        done += (size_t)n;
    }
    return 1;
}

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

/* Pass one: check every header and collect the entries. */
static int scan_archive(member_list *list, int fd, uint64_t file_size, const char *path)
{
    unsigned char block[TAR_BLOCK];
    char why[300];
    tar_header h, pending;
    int has_path = 0, has_size = 0;
    uint64_t pos = 0;
    memset(&pending, 0, sizeof pending);
    for (;;) {
        if (pos + TAR_BLOCK > file_size)
            return pos == 0 ? refuse(path, pos, "%s", "empty, or not a tar archive")
                            : refuse(path, pos, "%s", "cut short: no end-of-archive blocks");
        if (read_at(fd, block, TAR_BLOCK, pos) != 1)
            return progcache__error_errno(PROGCACHE_EIO, errno, "cannot read archive %s", path);
        int got = progcache__tar_parse(&h, block, why, sizeof why);
        if (got == 0)
            return PROGCACHE_OK; /* end of archive; what follows is padding */
        if (got < 0)
            return refuse(path, pos, "%s", why);
        if (has_path)
            memcpy(h.name, pending.name, sizeof h.name);
        if (has_size)
            h.size = pending.size;
        uint64_t data = pos + TAR_BLOCK;
        if (h.size > file_size - data)
            return refuse(path, pos, "member \"%s\" runs past the end of the archive", h.name);
        uint64_t next = data + (h.size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (h.type == 'x' || h.type == 'g') {
            /* pax headers: 'x' applies to the next member, 'g' holds
             * archive-wide defaults (nothing we use). */
            if (h.type == 'x') {
                if (h.size > PAX_MAX)
                    return refuse(path, pos, "%s", "oversized pax header");
                char *text = progcache__malloc((size_t)h.size + 1);
                if (!text)
                    return progcache__error(PROGCACHE_ENOMEM, "out of memory reading %s", path);
                int ok = read_at(fd, text, (size_t)h.size, data) == 1;
                memset(&pending, 0, sizeof pending);
                has_path = has_size = 0;
                int bad = ok ? progcache__tar_pax(&pending, &has_path, &has_size, text,
                                                  (size_t)h.size, why, sizeof why)
                             : 0;
                progcache__free(text);
                if (!ok)
                    return progcache__error_errno(PROGCACHE_EIO, errno, "cannot read archive %s",
                                                  path);
                if (bad)
                    return refuse(path, pos, "%s", why);
            }
            pos = next;
            continue;
        }
        has_path = has_size = 0;
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
                          "digits>/<62 hex digits>)",
                          h.name);
        if ((h.type == '5') != (kind == TAR_NAME_DIR))
            return refuse(path, pos,
                          "member \"%s\" has an entry's name but is not a regular file"
                          " (or a directory's name but is a file)",
                          h.name);
        if (kind == TAR_NAME_ENTRY) {
            if (h.size > TAR_MAX_ENTRY)
                return refuse(path, pos, "member \"%s\" is larger than 1 GiB", h.name);
            m.offset = data;
            m.size = h.size;
            m.mtime = h.mtime;
            int rc = add_member(list, &m);
            if (rc)
                return rc;
        }
        pos = next;
    }
}

int progcache_file_import(progcache_archive_result *out, progcache_store *store, const char *path,
                          const progcache_archive_options *opts)
{
    file_store *fs;
    progcache_archive_result local = PROGCACHE_ARCHIVE_RESULT_INIT;
    int rc = check_archive_args(&fs, out, store, path, opts, "progcache_file_import");
    if (rc)
        return rc;
    if (!out)
        out = &local;
    if (fs->flags & PROGCACHE_FILE_READONLY)
        return progcache__error(PROGCACHE_EINVAL, "cache %s was opened read-only; cannot import",
                                fs->root);
    member_list list = {NULL, 0, 0};
    progcache_buf data = PROGCACHE_BUF_INIT;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, "cannot open archive %s", path);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = progcache__error(PROGCACHE_EIO, "archive %s is not a regular file", path);
        goto done;
    }
    rc = scan_archive(&list, fd, (uint64_t)st.st_size, path);
    for (size_t i = 0; !rc && i < list.len; i++) {
        const member *m = &list.items[i];
        if ((rc = progcache__buf_reserve(&data, (size_t)m->size)))
            break;
        if (read_at(fd, data.data, (size_t)m->size, m->offset) != 1) {
            rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot read archive %s", path);
            break;
        }
        progcache__buf_set_size(&data, (size_t)m->size);
        if ((rc = progcache__validate(&info, data.data, data.size, 1)))
            break;
        if ((rc = progcache__file_put_rel(fs, m->rel, m->shard, data.data, data.size)))
            break;
        out->entries++;
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
    }
done:
    close(fd);
    progcache__free(list.items);
    progcache_buf_free(&data);
    progcache_artifact_info_release(&info);
    return rc;
}
