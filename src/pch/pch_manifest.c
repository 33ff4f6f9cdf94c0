/* What a PCH was made from, and whether that still holds.
 *
 * NVRTC records the headers in a PCH but never compares them: a PCH made
 * before a header changed is used all the same and yields the old program.
 * So each PCH has a manifest: every file NVRTC read while making it (path,
 * size, SHA-256, and the stat it had then), every directory it found, and
 * every path it probed and did not find (a header created there later
 * would be found first by a compile without the PCH). Before each use,
 * every path is stat'ed; a file whose stat moved is hashed again, and only
 * bytes that differ make the PCH stale.
 *
 * The manifest is text, one field per line, ending with the SHA-256 of
 * everything before it (docs/FORMAT.md):
 *
 *   progcache-pch-manifest 2
 *   key <64 hex>
 *   pch <file name> <size> <SHA-256 of the file, 64 hex>
 *   heap <address, hex> <size>
 *   plain_ms <n>
 *   use_ms <n>
 *   created <seconds since 1970>
 *   deps <count>
 *   <kind> <size> <mtime_ns> <ctime_ns> <dev> <ino> <sha256 hex or -> <path>
 *   ...
 *   digest <sha256 hex>
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "pch/pch_tier.h"
#include "fs.h"
#include "sha256.h"

#define MAGIC_LINE "progcache-pch-manifest 2\n"
/* Version 1 recorded a 64-bit checksum of the PCH instead of its SHA-256. */
#define MAGIC_LINE_1 "progcache-pch-manifest 1\n"
/* The most a manifest may hold: a prefix opening 600 files needs ~100 KB. */
#define MAX_DEPS 200000u

void progcache__pch_manifest_free(pch_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->num_deps; i++)
        progcache__free(m->deps[i].path);
    progcache__free(m->deps);
    m->deps = NULL;
    m->num_deps = 0;
}

/* ---- writing ------------------------------------------------------------------- */

static int appendf(progcache_buf *out, const char *fmt, ...) PROGCACHE_PRINTF(2, 3);
static int appendf(progcache_buf *out, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof line)
        return progcache__error(PROGCACHE_EINVAL, "a manifest line does not fit");
    return progcache__buf_append(out, line, (size_t)n);
}

int progcache__pch_manifest_format(progcache_buf *out, const pch_manifest *m)
{
    out->size = 0;
    int rc = progcache__buf_append(out, MAGIC_LINE, strlen(MAGIC_LINE));
    char pch_hex[65];
    progcache__hex(pch_hex, m->pch_sha, sizeof m->pch_sha);
    if (!rc)
        rc = appendf(out, "key %s\npch %s %" PRIu64 " %s\nheap %" PRIx64 " %" PRIu64
                          "\nplain_ms %" PRIu64 "\nuse_ms %" PRIu64 "\ncreated %" PRId64
                          "\ndeps %zu\n",
                     m->key, m->pch, m->pch_size, pch_hex, m->heap_addr, m->heap_size,
                     m->plain_ms, m->use_ms, m->created, m->num_deps);
    for (size_t i = 0; !rc && i < m->num_deps; i++) {
        const pch_dep *d = &m->deps[i];
        char sha[65] = "-";
        if (d->kind == '+')
            progcache__hex(sha, d->sha256, 32);
        rc = appendf(out, "%c %" PRIu64 " %" PRId64 " %" PRId64 " %" PRIu64 " %" PRIu64 " %s ",
                     d->kind, d->size, d->mtime_ns, d->ctime_ns, d->dev, d->ino, sha);
        if (!rc)
            rc = progcache__buf_append(out, d->path, strlen(d->path));
        if (!rc)
            rc = progcache__buf_append(out, "\n", 1);
    }
    unsigned char digest[32];
    char hex[65];
    if (!rc)
        rc = progcache__sha256_oneshot(digest, out->data, out->size);
    if (!rc) {
        progcache__hex(hex, digest, sizeof digest);
        rc = appendf(out, "digest %s\n", hex);
    }
    return rc;
}

/* ---- reading ------------------------------------------------------------------- */

typedef struct reader {
    const char *p, *end;
    char why[128];
} reader;

static int bad(reader *r, const char *what)
{
    if (!r->why[0])
        snprintf(r->why, sizeof r->why, "%s", what);
    return -1;
}

/* The next line (without its newline) as [*s, *s + *len). */
static int line(reader *r, const char **s, size_t *len)
{
    const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
    if (!nl)
        return bad(r, "it ends in the middle of a line");
    *s = r->p;
    *len = (size_t)(nl - r->p);
    r->p = nl + 1;
    return 0;
}

/* "<name> <value>" lines: the value as text, NUL-terminated in a copy. */
static int field(reader *r, const char *name, char *out, size_t cap)
{
    const char *s;
    size_t len, n = strlen(name);
    if (line(r, &s, &len) != 0)
        return -1;
    if (len <= n || memcmp(s, name, n) != 0 || s[n] != ' ' || len - n - 1 >= cap)
        return bad(r, name);
    memcpy(out, s + n + 1, len - n - 1);
    out[len - n - 1] = '\0';
    return 0;
}

static int number(reader *r, const char *name, uint64_t *out)
{
    char v[32], *end;
    if (field(r, name, v, sizeof v) != 0)
        return -1;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return errno || end == v || *end || v[0] == '-' ? bad(r, name) : 0;
}

static int hex_bytes(unsigned char *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = progcache__hex_digit(s[2 * i]), lo = hi < 0 ? -1 : progcache__hex_digit(s[2 * i + 1]);
        if (lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return s[2 * n] == '\0' || s[2 * n] == ' ' || s[2 * n] == '\n' ? 0 : -1;
}

static int parse_dep(reader *r, pch_dep *d)
{
    const char *s;
    size_t len;
    if (line(r, &s, &len) != 0)
        return -1;
    char head[256];
    size_t n = len < sizeof head - 1 ? len : sizeof head - 1;
    memcpy(head, s, n);
    head[n] = '\0';
    char kind, sha[65];
    int used = 0;
    if (sscanf(head, "%c %" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNu64 " %" SCNu64 " %64s %n", &kind,
               &d->size, &d->mtime_ns, &d->ctime_ns, &d->dev, &d->ino, sha, &used) < 7 ||
        used == 0 || (size_t)used >= len || (kind != '+' && kind != '-' && kind != 'd'))
        return bad(r, "a dependency line");
    d->kind = kind;
    if (kind == '+' ? hex_bytes(d->sha256, sha, 32) != 0 : strcmp(sha, "-") != 0)
        return bad(r, "a dependency's digest");
    d->path = progcache__malloc(len - (size_t)used + 1);
    if (!d->path)
        return bad(r, "out of memory");
    memcpy(d->path, s + used, len - (size_t)used);
    d->path[len - (size_t)used] = '\0';
    return 0;
}

static int parse(reader *r, pch_manifest *m)
{
    char v[200], name[PCH_NAME_MAX + 64], sha[65];
    uint64_t count;
    const char *s;
    size_t len;
    if (line(r, &s, &len) != 0)
        return -1;
    if (len + 1 == strlen(MAGIC_LINE_1) && !memcmp(s, MAGIC_LINE_1, len))
        return bad(r, "version 1, of an earlier progcache: its PCH is made again");
    if (len + 1 != strlen(MAGIC_LINE) || memcmp(s, MAGIC_LINE, len))
        return bad(r, "it does not start with \"progcache-pch-manifest 2\"");
    if (field(r, "key", m->key, sizeof m->key) != 0 || strlen(m->key) != PCH_KEY_HEX)
        return bad(r, "key");
    if (field(r, "pch", v, sizeof v) != 0 ||
        sscanf(v, "%95s %" SCNu64 " %64s", name, &m->pch_size, sha) != 3 ||
        hex_bytes(m->pch_sha, sha, 32) != 0 ||
        strlen(name) + 1 > sizeof m->pch || strncmp(name, m->key, PCH_KEY_HEX) != 0 ||
        strchr(name, '/'))
        return bad(r, "pch");
    strcpy(m->pch, name);
    if (field(r, "heap", v, sizeof v) != 0 ||
        sscanf(v, "%" SCNx64 " %" SCNu64, &m->heap_addr, &m->heap_size) != 2)
        return bad(r, "heap");
    uint64_t created;
    if (number(r, "plain_ms", &m->plain_ms) || number(r, "use_ms", &m->use_ms) ||
        number(r, "created", &created) || number(r, "deps", &count))
        return -1;
    m->created = (int64_t)created;
    if (count > MAX_DEPS)
        return bad(r, "deps");
    m->deps = progcache__calloc(count ? count : 1, sizeof *m->deps);
    if (!m->deps)
        return bad(r, "out of memory");
    for (; m->num_deps < count; m->num_deps++)
        if (parse_dep(r, &m->deps[m->num_deps]) != 0)
            return -1;
    return 0;
}

int progcache__pch_manifest_parse(pch_manifest *out, const char *text, size_t len)
{
    memset(out, 0, sizeof *out);
    /* The digest line closes the text and covers everything before it. */
    static const char tail[] = "digest ";
    size_t body = len;
    while (body > 0 && text[body - 1] == '\n')
        body--;
    while (body > 0 && text[body - 1] != '\n')
        body--;
    unsigned char want[32], got[32];
    if (len - body != sizeof tail - 1 + 65 || memcmp(text + body, tail, sizeof tail - 1) ||
        text[len - 1] != '\n' || hex_bytes(want, text + body + sizeof tail - 1, 32) != 0)
        return progcache__error(PROGCACHE_ECORRUPT, "the manifest has no digest line");
    int rc = progcache__sha256_oneshot(got, text, body);
    if (rc)
        return rc;
    if (memcmp(want, got, sizeof got) != 0)
        return progcache__error(PROGCACHE_ECORRUPT, "the manifest does not match its digest");
    reader r = {text, text + body, ""};
    if (parse(&r, out) != 0 || r.p != r.end) {
        progcache__pch_manifest_free(out);
        return progcache__error(PROGCACHE_ECORRUPT, "the manifest is malformed (%s)",
                                r.why[0] ? r.why : "text after its dependencies");
    }
    return PROGCACHE_OK;
}

/* ---- checking -------------------------------------------------------------------- */

static int64_t ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static int same_stat(const pch_dep *d, const struct stat *st)
{
    return d->dev == (uint64_t)st->st_dev && d->ino == (uint64_t)st->st_ino &&
           d->size == (uint64_t)st->st_size && d->mtime_ns == ns(st->st_mtim) &&
           d->ctime_ns == ns(st->st_ctim);
}

static void set_stat(pch_dep *d, const struct stat *st)
{
    d->dev = (uint64_t)st->st_dev;
    d->ino = (uint64_t)st->st_ino;
    d->size = (uint64_t)st->st_size;
    d->mtime_ns = ns(st->st_mtim);
    d->ctime_ns = ns(st->st_ctim);
}

/* SHA-256 of the file at path as NVRTC would open it (following links),
 * with the stat of what was read in *st. 0, or -1 with errno (a file that
 * is not regular: PROGCACHE__FS_ENOTREG). */
static int hash_file(const char *path, unsigned char out[32], struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    int rc = -1;
    progcache__sha256 *h = NULL;
    unsigned char *chunk = NULL;
    if (fstat(fd, st) != 0)
        goto done;
    if (!S_ISREG(st->st_mode)) {
        errno = PROGCACHE__FS_ENOTREG;
        goto done;
    }
    h = progcache__sha256_new();
    chunk = progcache__malloc(65536);
    if (!h || !chunk) {
        errno = ENOMEM;
        goto done;
    }
    uint64_t total = 0;
    for (;;) {
        ssize_t n = progcache__fs_read_full(fd, chunk, 65536);
        if (n < 0)
            goto done;
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > (uint64_t)st->st_size || progcache__sha256_update(h, chunk, (size_t)n)) {
            errno = EAGAIN; /* grew while read: not what NVRTC read either */
            goto done;
        }
    }
    if (total != (uint64_t)st->st_size) {
        errno = EAGAIN;
        goto done;
    }
    rc = progcache__sha256_final(h, out) ? -1 : 0;
    h = NULL;
done:;
    int saved = errno;
    progcache__sha256_free(h);
    progcache__free(chunk);
    close(fd);
    errno = saved;
    return rc;
}

static int stale(char *why, size_t len, const char *path, const char *what)
{
    snprintf(why, len, "%s %s", path, what);
    return 1;
}

int progcache__pch_deps_check(pch_manifest *m, char *why, size_t why_len, int *moved)
{
    *moved = 0;
    for (size_t i = 0; i < m->num_deps; i++) {
        pch_dep *d = &m->deps[i];
        struct stat st;
        int found = stat(d->path, &st) == 0;
        if (d->kind == '-') {
            if (found)
                return stale(why, why_len, d->path, "exists now (it was absent)");
            if (errno != ENOENT && errno != ENOTDIR)
                return stale(why, why_len, d->path, "cannot be checked");
            continue;
        }
        if (!found)
            return stale(why, why_len, d->path, "is gone");
        if (d->kind == 'd') {
            if (!S_ISDIR(st.st_mode))
                return stale(why, why_len, d->path, "is no longer a directory");
            continue;
        }
        if (same_stat(d, &st))
            continue;
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != d->size)
            return stale(why, why_len, d->path, "changed");
        unsigned char sha[32];
        if (hash_file(d->path, sha, &st) != 0) {
            if (errno == ENOMEM)
                return progcache__error(PROGCACHE_ENOMEM, "out of memory hashing %s", d->path);
            return stale(why, why_len, d->path, "cannot be read");
        }
        if (memcmp(sha, d->sha256, sizeof sha) != 0)
            return stale(why, why_len, d->path, "changed");
        set_stat(d, &st);
        *moved = 1;
    }
    return 0;
}

int progcache__pch_deps_hash(pch_manifest *m, char *why, size_t why_len)
{
    for (size_t i = 0; i < m->num_deps; i++) {
        pch_dep *d = &m->deps[i];
        if (strchr(d->path, '\n'))
            return stale(why, why_len, "a path", "holds a newline");
        if (d->kind != '+')
            continue;
        struct stat st;
        if (hash_file(d->path, d->sha256, &st) != 0)
            return stale(why, why_len, d->path, "cannot be read");
        /* The stat NVRTC's open saw: the same file, unchanged since. */
        if (!same_stat(d, &st))
            return stale(why, why_len, d->path, "changed while the PCH was made");
    }
    return 0;
}
