/*
 * tier_dir.c - a tier of your own, through progcache/sys/store.h alone
 * (examples/README.md). A flat directory: each entry is one file, named by
 * the hex SHA-256 of its key, holding a header, the records and the bytes:
 *
 *   0   "PCTD"                          magic
 *   4   SHA-256 of bytes 36..end        finds damage (a torn copy, a bad disk)
 *   36  SHA-256 of the key              binds the file to its name
 *   68  kind    (u32, little-endian)    progcache_entry_meta.kind
 *   72  records length (u32, LE)
 *   76  records, then the entry's bytes
 *
 * Bytes and records are in one file, so one rename publishes both: a
 * reader never pairs the bytes of one put with the records of another.
 *
 * Threads and processes: the store's only state (the directory path) never
 * changes after tier_dir_new, every write goes to a temp file renamed into
 * place, and every read opens the file afresh, so no lock is needed: many
 * threads, processes, and machines on a file system with atomic rename may
 * use one directory at once. Errors go to progcache_error_set, which is
 * per thread.
 *
 * What it touches: only regular files named as entries (64 hex digits)
 * and the temp files its puts create (".tmp-*"). Anything else in the
 * directory (a README, a link, a subdirectory) is never read, replaced or
 * deleted.
 */
#define _POSIX_C_SOURCE 200809L
#include "tier_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <progcache/sys/store.h>

#define HEAD 76     /* header bytes, as above */
#define NAME_LEN 64 /* hex SHA-256 */
/* A temp file older than this is a leftover of a put that died. */
#define STALE_S 600

typedef struct tier_dir {
    progcache_store base; /* first: the library hands &base back to us */
    char *root;
    /* The largest entry put takes and get reads (the cache's
     * max_artifact_size, from the factory's params): whatever is in the
     * directory is read with a bound, never whole "because it is ours". */
    uint64_t data_max;
} tier_dir;

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The path of key's file, and the key's SHA-256. tier_dir_new checked that
 * root leaves room for the name. */
static void entry_path(char path[PATH_MAX], unsigned char hash[32], const tier_dir *t,
                       const void *key, size_t key_len)
{
    static const char hex[] = "0123456789abcdef";
    char name[NAME_LEN + 1];
    SHA256(key, key_len, hash);
    for (int i = 0; i < 32; i++) {
        name[2 * i] = hex[hash[i] >> 4];
        name[2 * i + 1] = hex[hash[i] & 15];
    }
    name[NAME_LEN] = '\0';
    snprintf(path, PATH_MAX, "%s/%s", t->root, name);
}

/* SHA-256 over up to three pieces. */
static int digest(unsigned char out[32], const void *a, size_t na, const void *b, size_t nb,
                  const void *c, size_t nc)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, a, na) &&
             EVP_DigestUpdate(ctx, b, nb) && EVP_DigestUpdate(ctx, c, nc) &&
             EVP_DigestFinal_ex(ctx, out, NULL);
    EVP_MD_CTX_free(ctx);
    return ok ? PROGCACHE_OK : progcache_error_set(PROGCACHE_ENOMEM, "tier_dir: SHA-256 failed");
}

/* Read the file at path whole, with a bound. Not following a link and not
 * waiting on a FIFO: what is not a regular file is not ours, so a miss. */
static int read_file(unsigned char **out, size_t *len, const char *path, uint64_t data_max)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP
                   ? PROGCACHE_ENOTFOUND /* a miss sets no message */
                   : progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot open %s: %s", path,
                                         strerror(errno));
    struct stat st;
    int rc = PROGCACHE_OK;
    size_t size = 0, got = 0;
    *out = NULL;
    if (fstat(fd, &st) != 0)
        rc = progcache_error_set(PROGCACHE_EIO, "tier_dir: %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = PROGCACHE_ENOTFOUND;
    else if (st.st_size < HEAD || (uint64_t)st.st_size > HEAD + PROGCACHE_RECORDS_MAX + data_max)
        rc = progcache_error_set(PROGCACHE_ECORRUPT, "tier_dir: %s is %lld bytes: not an entry",
                                 path, (long long)st.st_size);
    else if (!(*out = malloc(size = (size_t)st.st_size)))
        rc = progcache_error_set(PROGCACHE_ENOMEM, "tier_dir: out of memory reading %s", path);
    while (rc == PROGCACHE_OK && got < size) {
        ssize_t n = read(fd, *out + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) /* an error, or the file shrank under us */
            rc = progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot read %s: %s", path,
                                     n ? strerror(errno) : "it was cut short");
        got += n > 0 ? (size_t)n : 0;
    }
    close(fd);
    *len = got;
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* The entry in the file at path, whose key hashes to hash: its bytes and
 * (meta not NULL) kind, records and seal state. */
static int load(progcache_buf *out, progcache_entry_meta *meta, const tier_dir *t,
                const char *path, const unsigned char hash[32])
{
    unsigned char sum[32], *f = NULL;
    size_t len = 0;
    int rc = read_file(&f, &len, path, t->data_max);
    if (rc)
        return rc;
    uint32_t reclen = get32(f + 72), kind = get32(f + 68);
    const char *bad = NULL;
    if (memcmp(f, "PCTD", 4) != 0 || reclen > len - HEAD)
        bad = "it is not an entry of this tier";
    else if ((rc = digest(sum, f + 36, len - 36, NULL, 0, NULL, 0)) == 0 && memcmp(sum, f + 4, 32))
        bad = "it is damaged: its bytes do not match the digest written with them";
    else if (rc == 0 && memcmp(f + 36, hash, 32) != 0)
        bad = "it holds the entry of another key (copied or renamed)";
    else if (rc == 0 && len - HEAD - reclen > t->data_max)
        bad = "it is larger than max_artifact_size";
    if (bad)
        rc = progcache_error_set(PROGCACHE_ECORRUPT, "tier_dir: %s: %s", path, bad);
    if (rc == PROGCACHE_OK)
        rc = progcache_buf_set(out, f + HEAD + reclen, len - HEAD - reclen);
    if (rc == PROGCACHE_OK && meta) {
        meta->kind = kind <= PROGCACHE_KIND_FATBIN ? (progcache_kind)kind : PROGCACHE_KIND_UNKNOWN;
        /* The digest shows the bytes are the ones written under this key,
         * not who wrote them: anyone who can write here could write a
         * matching digest. So MATCHED, never WHOLE: compile-or-load still
         * checks the artifact's structure before it is loaded. A tier
         * holding a secret (an HMAC instead of a plain digest) could vouch
         * for more. */
        meta->seal = PROGCACHE_SEAL_MATCHED;
        rc = progcache_buf_set(&meta->records, f + HEAD, reclen);
    }
    free(f);
    return rc;
}

/* get_meta: the bytes, and (meta not NULL) kind, records and seal state. */
static int tier_get_meta(progcache_buf *out, progcache_entry_meta *meta, progcache_store *s,
                         const void *key, size_t key_len)
{
    char path[PATH_MAX];
    unsigned char hash[32];
    entry_path(path, hash, (tier_dir *)s, key, key_len);
    return load(out, meta, (tier_dir *)s, path, hash);
}

/* Whether key's file is there, as a regular file (anything else at its
 * path is not ours: a miss); path set either way. */
static int find(char path[PATH_MAX], progcache_store *s, const void *key, size_t key_len)
{
    unsigned char hash[32];
    struct stat st;
    entry_path(path, hash, (tier_dir *)s, key, key_len);
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? PROGCACHE_ENOTFOUND
                               : progcache_error_set(PROGCACHE_EIO, "tier_dir: %s: %s", path,
                                                     strerror(errno));
    return S_ISREG(st.st_mode) ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}

/* exists: a regular file at the key's name. Its bytes are not read (for a
 * server tier this is a HEAD request instead of a download); a damaged
 * entry counts as held until a get finds the damage. */
static int tier_exists(progcache_store *s, const void *key, size_t key_len)
{
    char path[PATH_MAX];
    return find(path, s, key, key_len);
}

static int tier_get(progcache_buf *out, progcache_store *s, const void *key, size_t key_len)
{
    return tier_get_meta(out, NULL, s, key, key_len);
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* put_meta: temp file, write, fsync, rename. The directory is not fsynced:
 * a put lost to a power cut is a miss later, never a torn entry. */
static int tier_put_meta(progcache_store *s, const void *key, size_t key_len, const void *data,
                         size_t size, const progcache_entry_meta *meta)
{
    tier_dir *t = (tier_dir *)s;
    const unsigned char *rec = meta ? meta->records.data : NULL;
    size_t reclen = meta ? meta->records.size : 0;
    if (size > t->data_max || reclen > PROGCACHE_RECORDS_MAX)
        return progcache_error_set(PROGCACHE_EINVAL,
                                   "tier_dir: an entry of %zu bytes with %zu bytes of records is "
                                   "too large (at most %llu and %zu)",
                                   size, reclen, (unsigned long long)t->data_max,
                                   (size_t)PROGCACHE_RECORDS_MAX);
    char path[PATH_MAX], tmp[PATH_MAX];
    unsigned char head[HEAD];
    entry_path(path, head + 36, t, key, key_len);
    memcpy(head, "PCTD", 4);
    put32(head + 68, meta ? (uint32_t)meta->kind : PROGCACHE_KIND_UNKNOWN);
    put32(head + 72, (uint32_t)reclen);
    int rc = digest(head + 4, head + 36, HEAD - 36, rec, reclen, data, size);
    if (rc)
        return rc;
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", t->root);
    int fd = mkstemp(tmp); /* mode 0600: a directory shared by several users would fchmod */
    if (fd < 0)
        return progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot create a file in %s: %s",
                                   t->root, strerror(errno));
    int ok = write_all(fd, head, HEAD) == 0 && write_all(fd, rec, reclen) == 0 &&
             write_all(fd, data, size) == 0 && fsync(fd) == 0;
    int err = ok ? 0 : errno;
    if (close(fd) != 0 && ok)
        err = errno;
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err == 0)
        return PROGCACHE_OK;
    unlink(tmp);
    return progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot write %s: %s", path,
                               strerror(err));
}

static int tier_put(progcache_store *s, const void *key, size_t key_len, const void *data,
                    size_t size)
{
    return tier_put_meta(s, key, key_len, data, size, NULL);
}

static int tier_remove(progcache_store *s, const void *key, size_t key_len)
{
    char path[PATH_MAX];
    int rc = find(path, s, key, key_len); /* what is not a regular file is left alone */
    if (rc)
        return rc;
    if (unlink(path) == 0)
        return PROGCACHE_OK;
    if (errno == ENOENT) /* another thread removed it first */
        return PROGCACHE_ENOTFOUND;
    return progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot remove %s: %s", path,
                               strerror(errno));
}

enum walk_op { COUNT, TOTAL_SIZE, CLEAR, FOREACH };

/* What foreach hands each entry to: the caller's function and flags. */
typedef struct visit {
    unsigned int flags;
    progcache_entry_fn fn;
    void *ctx;
} visit;

/* foreach's view of one entry: its name (the hex SHA-256 of the key, as
 * in every tier), size and time; with READ its bytes, with RECORDS its
 * kind and records. One that cannot be read is handed over with error. */
static int visit_entry(tier_dir *t, const visit *v, const char *name, const struct stat *st)
{
    char path[PATH_MAX], errtext[256];
    unsigned char hash[32];
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    progcache_entry e;
    memset(&e, 0, sizeof e);
    memcpy(e.name, name, NAME_LEN + 1);
    for (int i = 0; i < 32; i++)
        hash[i] = (unsigned char)strtoul((char[]){name[2 * i], name[2 * i + 1], 0}, NULL, 16);
    e.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    e.atime_ns = (int64_t)st->st_atim.tv_sec * 1000000000 + st->st_atim.tv_nsec;
    e.inode = (uint64_t)st->st_ino;
    /* Without READ the header alone says the size; this example reads the
     * entry either way (a real tier would ask its index). */
    snprintf(path, sizeof path, "%s/%s", t->root, name);
    int rc = load(&bytes, (v->flags & PROGCACHE_ENTRIES_RECORDS) ? &meta : NULL, t, path, hash);
    if (rc == PROGCACHE_ENOTFOUND) { /* removed meanwhile */
        progcache_entry_meta_release(&meta);
        return 0;
    }
    if (rc) {
        snprintf(errtext, sizeof errtext, "%s", progcache_error_last());
        e.error = errtext;
        e.size = (uint64_t)st->st_size;
    } else {
        e.size = bytes.size;
        if (v->flags & PROGCACHE_ENTRIES_READ)
            e.data = bytes.data ? bytes.data : (const unsigned char *)"";
        if (meta.records.size)
            e.meta = &meta;
    }
    rc = v->fn(v->ctx, &e);
    progcache_buf_free(&bytes);
    progcache_entry_meta_release(&meta);
    return rc;
}

/* One pass over the directory, for count, total_size, clear and foreach.
 * Entries are counted by a scan: O(entries), fine for an example; a real
 * tier might keep counters (or answer from its server, as an S3 LIST
 * would). */
static int walk(uint64_t *out, tier_dir *t, enum walk_op op, const visit *v)
{
    DIR *d = opendir(t->root);
    if (!d)
        return progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot read %s: %s", t->root,
                                   strerror(errno));
    uint64_t n = 0;
    int rc = PROGCACHE_OK;
    struct dirent *e;
    while (rc == PROGCACHE_OK && (errno = 0, (e = readdir(d)) != NULL)) {
        const char *name = e->d_name;
        int entry = strlen(name) == NAME_LEN && strspn(name, "0123456789abcdef") == NAME_LEN;
        int temp = strncmp(name, ".tmp-", 5) == 0;
        struct stat st;
        if ((!entry && !(temp && op == CLEAR)) ||
            fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (temp && st.st_mtime > time(NULL) - STALE_S)
            continue; /* another put may be writing it */
        if (op == FOREACH) {
            rc = visit_entry(t, v, name, &st);
            errno = 0;
            continue;
        }
        if (op == CLEAR && unlinkat(dirfd(d), name, 0) != 0 && errno != ENOENT)
            rc = progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot remove %s/%s: %s",
                                     t->root, name, strerror(errno));
        n += op == COUNT ? 1 : (uint64_t)st.st_size;
    }
    if (rc == PROGCACHE_OK && errno != 0)
        rc = progcache_error_set(PROGCACHE_EIO, "tier_dir: cannot read %s: %s", t->root,
                                 strerror(errno));
    closedir(d);
    if (out)
        *out = n;
    return rc;
}

static int tier_foreach(progcache_store *s, unsigned int flags, progcache_entry_fn fn, void *ctx)
{
    visit v = {flags, fn, ctx};
    return walk(NULL, (tier_dir *)s, FOREACH, &v);
}

static int tier_clear(progcache_store *s) { return walk(NULL, (tier_dir *)s, CLEAR, NULL); }
static int tier_count(uint64_t *n, progcache_store *s)
{
    return walk(n, (tier_dir *)s, COUNT, NULL);
}
static int tier_total_size(uint64_t *n, progcache_store *s)
{
    return walk(n, (tier_dir *)s, TOTAL_SIZE, NULL);
}

static void tier_free(progcache_store *s)
{
    free(((tier_dir *)s)->root);
    free(s);
}

/* The store, for tier_dir_new and the factory. */
static int make(progcache_store **out, const char *path, unsigned int flags, uint64_t data_max)
{
    if (out)
        *out = NULL;
    if (!out || !path || !*path || (flags & ~(PROGCACHE_STORE_PERSISTENT | PROGCACHE_STORE_SHARED)))
        return progcache_error_set(PROGCACHE_EINVAL, "tier_dir_new: out or path missing, or "
                                                     "flags other than PERSISTENT and SHARED");
    struct stat st;
    if (strlen(path) + NAME_LEN + 2 > PATH_MAX)
        return progcache_error_set(PROGCACHE_EINVAL, "tier_dir_new: the path is too long");
    if ((mkdir(path, 0700) != 0 && errno != EEXIST) || stat(path, &st) != 0)
        return progcache_error_set(PROGCACHE_EIO, "tier_dir_new: %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return progcache_error_set(PROGCACHE_EIO, "tier_dir_new: %s is not a directory", path);
    tier_dir *t = calloc(1, sizeof *t);
    if (!t || !(t->root = strdup(path))) {
        free(t);
        return progcache_error_set(PROGCACHE_ENOMEM, "tier_dir_new: out of memory");
    }
    t->data_max = data_max;
    /* PROGCACHE_STORE_INIT: the version of the sys/store.h this file was
     * written against (the library reads only the members that version
     * has), every member 0 or NULL, which reads as "not offered" (flush,
     * stats, lease, and whatever a later version appends). */
    t->base = (progcache_store)PROGCACHE_STORE_INIT;
    t->base.name = "tier_dir";
    /* version 1 */
    t->base.get = tier_get;
    t->base.put = tier_put;
    t->base.remove = tier_remove;
    t->base.clear = tier_clear;
    t->base.count = tier_count;
    t->base.total_size = tier_total_size;
    t->base.free = tier_free;
    /* version 2 */
    t->base.flags = flags;
    t->base.get_meta = tier_get_meta;
    t->base.put_meta = tier_put_meta;
    /* version 3 */
    t->base.exists = tier_exists;
    t->base.foreach = tier_foreach;
    *out = &t->base;
    return PROGCACHE_OK;
}

int tier_dir_new(progcache_store **out, const char *path, unsigned int flags)
{
    return make(out, path, flags, PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT);
}

/* The factory progcache_open calls for "tier_dir:PATH": a remote tier
 * (PERSISTENT | SHARED), bounded by the cache's max_artifact_size. */
static int tier_dir_factory(progcache_store **out, const char *url,
                            const progcache_store_params *params, void *ctx)
{
    (void)ctx;
    static const char scheme[] = TIER_DIR_NAME ":";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0 || !url[sizeof scheme - 1])
        return progcache_error_set(PROGCACHE_EINVAL, "tier_dir: %s: write %sPATH", url, scheme);
    uint64_t max = params->max_artifact_size ? params->max_artifact_size
                                             : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    return make(out, url + sizeof scheme - 1, PROGCACHE_STORE_PERSISTENT | PROGCACHE_STORE_SHARED,
                max);
}

int tier_dir_register(void)
{
    return progcache_store_register(TIER_DIR_NAME, tier_dir_factory, NULL);
}
