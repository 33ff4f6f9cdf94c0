/* A bundle: every answer of one NVRTC compile, kept as one cache entry so
 * that a HIT replays the whole compile (docs/FORMAT.md, "Compile bundles").
 *
 *   magic "\x89PCBNDL\n", version (le32), reserved (le32), total size (le64)
 *   compile rc, PCH create status rc, PCH heap rc, reserved (le32 each),
 *   PCH heap size (le64)
 *   five outputs (log, PTX, CUBIN, LTO-IR, OptiX IR): size rc, bytes rc
 *   (le32 each), size (le64), the bytes
 *   number of names (le64); each: rc (le32), expression length, lowered
 *   length (le32 each), the expression, the lowered name
 *   SHA-256 of everything before it
 *
 * Everything read is bounded by the entry's size; a bundle that does not
 * decode whole is not replayed (the compile runs and the entry is
 * replaced). */
#include <string.h>

#include "alloc.h"
#include "bytes.h"
#include "error.h"
#include "intercept/intercept.h"
#include "sha256.h"

#define MAGIC "\x89PCBNDL\n"
#define VERSION 1u
#define HEAD 48 /* the fixed header, up to the first output */

static int put32(progcache_buf *b, uint32_t v)
{
    unsigned char x[4];
    progcache__put_le32(x, v);
    return progcache__buf_append(b, x, 4);
}

static int put64(progcache_buf *b, uint64_t v)
{
    unsigned char x[8];
    progcache__put_le64(x, v);
    return progcache__buf_append(b, x, 8);
}

int progcache__bundle_encode(progcache_buf *out, const progcache__bundle *b)
{
    out->size = 0;
    int rc = progcache__buf_append(out, MAGIC, 8) || put32(out, VERSION) || put32(out, 0) ||
             put64(out, 0) || put32(out, (uint32_t)b->compile_rc) ||
             put32(out, (uint32_t)b->pch_status_rc) || put32(out, (uint32_t)b->pch_heap_rc) ||
             put32(out, 0) || put64(out, b->pch_heap);
    for (int k = 0; !rc && k < OUT_COUNT; k++)
        rc = put32(out, (uint32_t)b->size_rc[k]) || put32(out, (uint32_t)b->bytes_rc[k]) ||
             put64(out, b->out[k].size) ||
             progcache__buf_append(out, b->out[k].data, b->out[k].size);
    rc = rc || put64(out, b->num_names);
    for (size_t i = 0; !rc && i < b->num_names; i++) {
        const char *low = b->lowered[i] ? b->lowered[i] : "";
        size_t el = strlen(b->exprs[i]), ll = strlen(low);
        if (el > UINT32_MAX || ll > UINT32_MAX)
            return progcache__error(PROGCACHE_EINVAL, "a name expression too long to keep");
        rc = put32(out, (uint32_t)b->lowered_rc[i]) || put32(out, (uint32_t)el) ||
             put32(out, (uint32_t)ll) || progcache__buf_append(out, b->exprs[i], el) ||
             progcache__buf_append(out, low, ll);
    }
    if (rc)
        return PROGCACHE_ENOMEM;
    progcache__put_le64(out->data + 16, out->size + 32);
    unsigned char sha[32];
    if ((rc = progcache__sha256_oneshot(sha, out->data, out->size)))
        return rc;
    return progcache__buf_append(out, sha, 32) ? PROGCACHE_ENOMEM : PROGCACHE_OK;
}

void progcache__bundle_free(progcache__bundle *b)
{
    for (int k = 0; k < OUT_COUNT; k++)
        progcache_buf_free(&b->out[k]);
    for (size_t i = 0; i < b->num_names; i++) {
        progcache__free(b->exprs ? b->exprs[i] : NULL);
        progcache__free(b->lowered ? b->lowered[i] : NULL);
    }
    progcache__free(b->exprs);
    progcache__free(b->lowered);
    progcache__free(b->lowered_rc);
    memset(b, 0, sizeof *b);
}

static char *copy(const unsigned char *p, size_t n)
{
    char *s = progcache__malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

#define CORRUPT(what)                                                                             \
    do {                                                                                          \
        rc = progcache__error(PROGCACHE_ECORRUPT, "bundle: %s", what);                            \
        goto fail;                                                                                \
    } while (0)

int progcache__bundle_decode(progcache__bundle *b, const unsigned char *d, size_t size)
{
    int rc = PROGCACHE_OK;
    memset(b, 0, sizeof *b);
    unsigned char sha[32];
    if (size < HEAD + 32 || memcmp(d, MAGIC, 8))
        CORRUPT("not a bundle");
    if (progcache__le32(d + 8) != VERSION)
        CORRUPT("a version this library does not read");
    if (progcache__le64(d + 16) != size)
        CORRUPT("its size field does not match (cut short?)");
    if ((rc = progcache__sha256_oneshot(sha, d, size - 32)))
        goto fail;
    if (memcmp(sha, d + size - 32, 32))
        CORRUPT("its digest does not match");
    size_t end = size - 32, at = HEAD;
    b->compile_rc = (int)progcache__le32(d + 24);
    b->pch_status_rc = (int)progcache__le32(d + 28);
    b->pch_heap_rc = (int)progcache__le32(d + 32);
    b->pch_heap = progcache__le64(d + 40);
    for (int k = 0; k < OUT_COUNT; k++) {
        if (end - at < 16)
            CORRUPT("an output cut short");
        b->size_rc[k] = (int)progcache__le32(d + at);
        b->bytes_rc[k] = (int)progcache__le32(d + at + 4);
        uint64_t n = progcache__le64(d + at + 8);
        at += 16;
        if (n > end - at)
            CORRUPT("an output longer than the bundle");
        if (progcache__buf_append(&b->out[k], d + at, (size_t)n)) {
            rc = PROGCACHE_ENOMEM;
            goto fail;
        }
        at += (size_t)n;
    }
    if (end - at < 8)
        CORRUPT("the names cut short");
    uint64_t names = progcache__le64(d + at);
    at += 8;
    if (names > (end - at) / 12)
        CORRUPT("more names than the bundle holds");
    if (names) {
        b->exprs = progcache__calloc((size_t)names, sizeof *b->exprs);
        b->lowered = progcache__calloc((size_t)names, sizeof *b->lowered);
        b->lowered_rc = progcache__calloc((size_t)names, sizeof *b->lowered_rc);
        if (!b->exprs || !b->lowered || !b->lowered_rc) {
            rc = PROGCACHE_ENOMEM;
            goto fail;
        }
    }
    for (size_t i = 0; i < names; i++) {
        if (end - at < 12)
            CORRUPT("a name cut short");
        int lrc = (int)progcache__le32(d + at);
        size_t el = progcache__le32(d + at + 4), ll = progcache__le32(d + at + 8);
        at += 12;
        if (el > end - at || ll > end - at - el)
            CORRUPT("a name longer than the bundle");
        b->num_names = i + 1;
        b->lowered_rc[i] = lrc;
        b->exprs[i] = copy(d + at, el);
        b->lowered[i] = lrc == 0 ? copy(d + at + el, ll) : NULL;
        if (!b->exprs[i] || (lrc == 0 && !b->lowered[i])) {
            rc = PROGCACHE_ENOMEM;
            goto fail;
        }
        at += el + ll;
    }
    if (at != end)
        CORRUPT("bytes after the last name");
    return PROGCACHE_OK;
fail:
    progcache__bundle_free(b);
    return rc ? rc : PROGCACHE_ECORRUPT;
}
