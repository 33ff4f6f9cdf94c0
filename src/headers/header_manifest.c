/* The header manifest: a compile's header list, kept in the cache as an
 * entry of its own (tiered, evicted, sealed and verified like any entry),
 * modelled on ccache's direct mode. The lookup of a program that reads
 * headers costs a stat per header with it, instead of reading and hashing
 * every header again.
 *
 * Layout (docs/FORMAT.md, "Header manifests"), integers little-endian:
 *
 *     0   8  magic "\x89PCMANI\n"
 *     8   4  version (1)
 *    12   4  flags: 1 = the toolkit's headers are included
 *    16   8  total size of the manifest in bytes
 *    24   8  when the scan began, ns since 1970 (signed)
 *    32   4  number of header files
 *    36   4  number of watched directories
 *    40  32  toolkit identity (zeros without the toolkit)
 *    72      per header file: dev, ino, size (8 each), mtime_ns, ctime_ns
 *            (8 each, signed), SHA-256 (32), flags (4: 1 = too new to
 *            trust its stat), path length (4), path
 *            per directory: dev, ino, size, mtime_ns, ctime_ns (8 each),
 *            path length (4), path
 */
#include "headers/header_manifest.h"

#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "key/frame.h"
#include "headers/headers_digest.h"
#include "key/key_options.h"
#include "headers/toolkit.h"
#include "sha256.h"

#define HEADER_SIZE 72
#define FILE_FIXED 80 /* 5 * 8 + 32 + 4 + 4 */
#define DIR_FIXED 44  /* 5 * 8 + 4 */
#define MAX_ITEMS 1000000u

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static unsigned char *put_stat(unsigned char *p, const progcache__file_stat *st)
{
    put64(p, st->dev);
    put64(p + 8, st->ino);
    put64(p + 16, st->size);
    put64(p + 24, (uint64_t)st->mtime_ns);
    put64(p + 32, (uint64_t)st->ctime_ns);
    return p + 40;
}

static const unsigned char *get_stat(const unsigned char *p, progcache__file_stat *st)
{
    st->dev = get64(p);
    st->ino = get64(p + 8);
    st->size = get64(p + 16);
    st->mtime_ns = (int64_t)get64(p + 24);
    st->ctime_ns = (int64_t)get64(p + 32);
    return p + 40;
}

int progcache__manifest_encode(progcache_buf *out, const progcache__header_scan *s)
{
    size_t size = HEADER_SIZE;
    for (size_t i = 0; i < s->num_files; i++)
        size += FILE_FIXED + strlen(s->files[i].path);
    for (size_t i = 0; i < s->num_dirs; i++)
        size += DIR_FIXED + strlen(s->dirs[i].path);
    int rc = progcache__buf_reserve(out, size);
    if (rc)
        return rc;
    unsigned char *p = out->data;
    memcpy(p, PROGCACHE__MANIFEST_MAGIC, 8);
    put32(p + 8, PROGCACHE__MANIFEST_VERSION);
    put32(p + 12, s->toolkit ? 1u : 0u);
    put64(p + 16, size);
    put64(p + 24, (uint64_t)s->time_ns);
    put32(p + 32, (uint32_t)s->num_files);
    put32(p + 36, (uint32_t)s->num_dirs);
    if (s->toolkit)
        memcpy(p + 40, s->toolkit_id, 32);
    else
        memset(p + 40, 0, 32);
    p += HEADER_SIZE;
    for (size_t i = 0; i < s->num_files; i++) {
        const progcache__header_file *f = &s->files[i];
        size_t n = strlen(f->path);
        p = put_stat(p, &f->st);
        memcpy(p, f->sha256, 32);
        put32(p + 32, f->too_new ? 1u : 0u);
        put32(p + 36, (uint32_t)n);
        memcpy(p + 40, f->path, n);
        p += 40 + n;
    }
    for (size_t i = 0; i < s->num_dirs; i++) {
        const progcache__header_dir *d = &s->dirs[i];
        size_t n = strlen(d->path);
        p = put_stat(p, &d->st);
        put32(p, (uint32_t)n);
        memcpy(p + 4, d->path, n);
        p += 4 + n;
    }
    progcache__buf_set_size(out, size);
    return PROGCACHE_OK;
}

static int corrupt(const char *what)
{
    return progcache__error(PROGCACHE_ECORRUPT, "header manifest: %s", what);
}

/* A path of n bytes at p (bounded by end): a NUL-terminated copy, or NULL
 * when it does not fit, is empty, too long or holds a NUL. */
static char *get_path(const unsigned char *p, const unsigned char *end, uint32_t n)
{
    if (n == 0 || n >= PATH_MAX || (size_t)(end - p) < n || memchr(p, '\0', n))
        return NULL;
    char *s = progcache__malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

int progcache__manifest_decode(progcache__header_scan *out, const unsigned char *data,
                               size_t size)
{
    progcache__header_scan_free(out);
    if (size < HEADER_SIZE || memcmp(data, PROGCACHE__MANIFEST_MAGIC, 8))
        return corrupt("not a manifest (no magic number)");
    if (get32(data + 8) != PROGCACHE__MANIFEST_VERSION)
        return corrupt("a version this library does not read");
    if (get64(data + 16) != size)
        return corrupt("its size field does not match its size (cut short?)");
    uint32_t flags = get32(data + 12), nf = get32(data + 32), nd = get32(data + 36);
    if (flags & ~1u || nf > MAX_ITEMS || nd > MAX_ITEMS)
        return corrupt("unknown flags or impossible counts");
    out->toolkit = (int)(flags & 1u);
    out->time_ns = (int64_t)get64(data + 24);
    memcpy(out->toolkit_id, data + 40, 32);
    const unsigned char *p = data + HEADER_SIZE, *end = data + size;
    int rc = PROGCACHE_ENOMEM;
    if ((nf && !(out->files = progcache__calloc(nf, sizeof *out->files))) ||
        (nd && !(out->dirs = progcache__calloc(nd, sizeof *out->dirs))))
        goto fail;
    rc = PROGCACHE_ECORRUPT;
    for (uint32_t i = 0; i < nf; i++) {
        progcache__header_file *f = &out->files[i];
        if ((size_t)(end - p) < FILE_FIXED)
            goto fail;
        p = get_stat(p, &f->st);
        memcpy(f->sha256, p, 32);
        uint32_t ff = get32(p + 32), n = get32(p + 36);
        p += 40;
        if (ff & ~1u || !(f->path = get_path(p, end, n)))
            goto fail;
        f->too_new = (int)ff;
        out->num_files++;
        p += n;
    }
    for (uint32_t i = 0; i < nd; i++) {
        progcache__header_dir *d = &out->dirs[i];
        if ((size_t)(end - p) < DIR_FIXED)
            goto fail;
        p = get_stat(p, &d->st);
        uint32_t n = get32(p);
        p += 4;
        if (!(d->path = get_path(p, end, n)))
            goto fail;
        out->num_dirs++;
        p += n;
    }
    if (p != end)
        goto fail;
    return PROGCACHE_OK;
fail:
    progcache__header_scan_free(out);
    return rc == PROGCACHE_ENOMEM ? progcache__error(rc, "out of memory reading a manifest")
                                  : corrupt("its records do not fit its size");
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int progcache__manifest_check(progcache__header_scan *s, progcache__manifest_state *state)
{
    *state = PROGCACHE__MANIFEST_STALE;
    for (size_t i = 0; i < s->num_dirs; i++) {
        progcache__file_stat st;
        if (progcache__file_stat_of(&st, s->dirs[i].path) != 0 ||
            !progcache__file_stat_same(&st, &s->dirs[i].st))
            return PROGCACHE_OK; /* a file may have appeared (or gone) there */
    }
    if (s->toolkit) {
        unsigned char id[32];
        if (progcache__toolkit_identity(id) != PROGCACHE_OK || memcmp(id, s->toolkit_id, 32))
            return PROGCACHE_OK;
    }
    int refreshed = 0;
    int64_t now = 0;
    for (size_t i = 0; i < s->num_files; i++) {
        progcache__header_file *f = &s->files[i];
        progcache__file_stat st;
        if (progcache__file_stat_of(&st, f->path) != 0)
            return PROGCACHE_OK;
        if (!f->too_new && progcache__file_stat_same(&st, &f->st))
            continue;
        /* Its stat cannot vouch for it: read it again. */
        unsigned char sha[32];
        int rc = progcache__header_read(f->path, &st, sha, NULL, NULL);
        if (rc == PROGCACHE_ENOTFOUND)
            return PROGCACHE_OK;
        if (rc)
            return rc;
        if (memcmp(sha, f->sha256, 32))
            return PROGCACHE_OK;
        if (!now)
            now = now_ns();
        f->st = st;
        f->too_new = st.mtime_ns > now - PROGCACHE__HEADER_TOO_NEW_NS ||
                     st.ctime_ns > now - PROGCACHE__HEADER_TOO_NEW_NS;
        refreshed = 1;
    }
    *state = refreshed ? PROGCACHE__MANIFEST_REFRESHED : PROGCACHE__MANIFEST_VALID;
    return PROGCACHE_OK;
}

int progcache__manifest_key(unsigned char out[32], const progcache_key_nvrtc_options *o)
{
    unsigned char base[32], extra[32];
    int rc = progcache__headers_digest(extra, o, NULL, 0, NULL);
    if (!rc)
        rc = progcache__key_derive(base, o, extra, sizeof extra);
    if (rc)
        return rc;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = '\0'; /* gone: every manifest of it is as good as any */
    progcache__sha256 *h = progcache__sha256_new();
    if (!h)
        return progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
    if ((rc = progcache__frame_str(h, "manifest", "1")) ||
        (rc = progcache__frame(h, "key", base, sizeof base)) ||
        (rc = progcache__frame_str(h, "cwd", cwd))) {
        progcache__sha256_free(h);
        return rc;
    }
    return progcache__sha256_final(h, out);
}
