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
 *   progcache-pch-manifest 1
 *   key <64 hex>
 *   pch <file name> <size> <checksum, 16 hex>
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

#define MAGIC_LINE "progcache-pch-manifest 1\n"
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
    if (!rc)
        rc = appendf(out, "key %s\npch %s %" PRIu64 " %016" PRIx64 "\nheap %" PRIx64 " %" PRIu64
                          "\nplain_ms %" PRIu64 "\nuse_ms %" PRIu64 "\ncreated %" PRId64
                          "\ndeps %zu\n",
                     m->key, m->pch, m->pch_size, m->pch_sum, m->heap_addr, m->heap_size,
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
    char v[160], name[PCH_NAME_MAX + 64];
    uint64_t count;
    const char *s;
    size_t len;
    if (line(r, &s, &len) != 0 || len + 1 != strlen(MAGIC_LINE) || memcmp(s, MAGIC_LINE, len))
        return bad(r, "it does not start with \"progcache-pch-manifest 1\"");
    if (field(r, "key", m->key, sizeof m->key) != 0 || strlen(m->key) != PCH_KEY_HEX)
        return bad(r, "key");
    if (field(r, "pch", v, sizeof v) != 0 ||
        sscanf(v, "%95s %" SCNu64 " %" SCNx64, name, &m->pch_size, &m->pch_sum) != 3 ||
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

/* ---- the PCH file's checksum -------------------------------------------------- */

/* Four lanes of a 64-bit multiply-rotate round over 32-byte blocks (the
 * round of xxHash64): a few GB/s on one core, so a 180 MB PCH costs tens
 * of milliseconds, where SHA-256 costs a second on a CPU without SHA
 * instructions. It detects damage and truncation, which are what happens
 * by accident; protection against a writer is the directory's owner-only
 * mode (docs/SECURITY.md). */
#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full

static uint64_t round64(uint64_t acc, uint64_t w)
{
    acc += w * P2;
    acc = (acc << 31) | (acc >> 33);
    return acc * P1;
}

/* Fill len bytes from offset off: short only at the end of the file. */
static ssize_t pread_full(int fd, unsigned char *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int progcache__pch_checksum(int fd, uint64_t size, uint64_t *out)
{
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = progcache__malloc(CHUNK + 32);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    uint64_t v[4] = {P1 + P2, P2, 0, (uint64_t)0 - P1};
    int rc = 0;
    for (uint64_t off = 0; off < size;) {
        size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
        ssize_t n = pread_full(fd, buf, want, off);
        if (n < 0 || (size_t)n != want) {
            if (n >= 0)
                errno = EIO; /* shorter than recorded */
            rc = -1;
            break;
        }
        /* Only the last chunk can end in a partial block: zeros pad it,
         * and the size is mixed in at the end. */
        size_t m = want;
        while (m % 32)
            buf[m++] = 0;
        for (size_t i = 0; i < m; i += 32)
            for (int l = 0; l < 4; l++) {
                uint64_t w;
                memcpy(&w, buf + i + 8 * (size_t)l, 8);
                v[l] = round64(v[l], w);
            }
        off += want;
    }
    progcache__free(buf);
    if (rc)
        return rc;
    uint64_t h = ((v[0] << 1) | (v[0] >> 63)) ^ ((v[1] << 7) | (v[1] >> 57)) ^
                 ((v[2] << 12) | (v[2] >> 52)) ^ ((v[3] << 18) | (v[3] >> 46));
    *out = round64(h, size);
    return 0;
}
