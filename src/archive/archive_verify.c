/* Signed bundles, the import side: checking the manifest and signature
 * that archive_sign.c wrote (docs/FORMAT.md, "Signed bundles").
 *
 * The order matters. The signature is checked first, over the manifest's
 * bytes exactly as they are in the archive, with the caller's public key;
 * only a manifest that verifies is parsed, so nothing an attacker wrote
 * is interpreted before it is known to be the signer's. Then the
 * manifest's hash of the archive is compared with every byte before the
 * manifest, which covers each header, name, size, padding and member: a
 * byte changed, a member added, removed or renamed anywhere in it fails
 * here. The two reserved members must be the last before the end blocks,
 * and import's scan allows only zero bytes after those (check_tail in
 * archive_import.c), so nothing can be appended after the signed part
 * either. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error.h"
#include "sha256.h"
#include "archive/archive_sign.h"
#include "archive/archive_sign_key.h"

#define HASH_CHUNK 65536

typedef struct bundle_entry {
    char name[65];
    uint64_t size;
    unsigned char sha[PROGCACHE_SHA256_SIZE];
    unsigned char records_sha[PROGCACHE_SHA256_SIZE];
    int has_records;
} bundle_entry;

struct bundle_check {
    bundle_entry *items;
    size_t len, cap;
};

static int refused(const char *archive, const char *why)
{
    return progcache__error(PROGCACHE_ECORRUPT,
                            "archive %s refused (nothing imported): %s", archive, why);
}

int progcache__bundle_member(bundle_seen *b, const tar_header *h, uint64_t pos, uint64_t data,
                             const char *archive)
{
    if (b->has_sig)
        b->after_sig++;
    const char *name = h->name[0] == '.' && h->name[1] == '/' ? h->name + 2 : h->name;
    int manifest = !strcmp(name, BUNDLE_MANIFEST_NAME);
    if (!manifest && strcmp(name, BUNDLE_SIGNATURE_NAME))
        return 0;
    char why[400];
    if (h->type != '0') {
        snprintf(why, sizeof why, "member \"%s\" (a name signed bundles reserve) is not a "
                 "regular file", name);
        return refused(archive, why);
    }
    if (manifest ? b->has_manifest : b->has_sig) {
        snprintf(why, sizeof why, "member \"%s\" appears twice", name);
        return refused(archive, why);
    }
    uint64_t next = data + (h->size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
    if (manifest) {
        if (h->size > BUNDLE_MANIFEST_MAX) {
            snprintf(why, sizeof why, "member \"%s\" claims %llu bytes, more than a manifest "
                     "may hold (%llu)", name, (unsigned long long)h->size,
                     (unsigned long long)BUNDLE_MANIFEST_MAX);
            return refused(archive, why);
        }
        b->has_manifest = 1;
        b->manifest_pos = pos;
        b->manifest_at = data;
        b->manifest_size = h->size;
        b->manifest_next = next;
    } else {
        if (h->size != BUNDLE_SIGNATURE_SIZE) {
            snprintf(why, sizeof why, "member \"%s\" is %llu bytes, not an Ed25519 signature's "
                     "%d", name, (unsigned long long)h->size, BUNDLE_SIGNATURE_SIZE);
            return refused(archive, why);
        }
        b->has_sig = 1;
        b->sig_pos = pos;
        b->sig_at = data;
        b->sig_size = h->size;
        b->sig_next = next;
    }
    return 1;
}

/* ---- the manifest, once its signature holds ----------------------------------------- */

static int hex_bytes(unsigned char *out, const char *hex, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = progcache__hex_digit(hex[2 * i]), lo = progcache__hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return hex[2 * n] == '\0' || hex[2 * n] == ' ' ? 0 : -1;
}

static int add_entry(bundle_check *c, const char *line)
{
    bundle_entry e;
    char sha[65], rec[65];
    unsigned long long size;
    memset(&e, 0, sizeof e);
    if (sscanf(line, "entry %64s %llu %64s %64s", e.name, &size, sha, rec) != 4 ||
        strlen(e.name) != 64 || hex_bytes(e.sha, sha, 32))
        return -1;
    e.size = size;
    if (strcmp(rec, "-")) {
        if (hex_bytes(e.records_sha, rec, 32))
            return -1;
        e.has_records = 1;
    }
    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        bundle_entry *items = progcache__realloc(c->items, cap * sizeof *items);
        if (!items)
            return PROGCACHE_ENOMEM;
        c->items = items;
        c->cap = cap;
    }
    c->items[c->len++] = e;
    return 0;
}

/* Fields of the manifest a verifier needs; the others (kind, arch,
 * lowered names) are for people and services reading it. */
typedef struct manifest_view {
    char signer[65];
    char nvrtc[32];
    unsigned char archive_sha[PROGCACHE_SHA256_SIZE];
    unsigned long long archive_bytes, end;
    int has_archive, has_end;
} manifest_view;

static int parse_manifest(bundle_check *c, manifest_view *v, char *text)
{
    int line_no = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        line_no++;
        char hex[65];
        if (line_no == 1) {
            if (strcmp(line, "progcache-bundle 1"))
                return -1;
        } else if (!strncmp(line, "signer ", 7)) {
            snprintf(v->signer, sizeof v->signer, "%s", line + 7);
        } else if (!strncmp(line, "nvrtc ", 6)) {
            snprintf(v->nvrtc, sizeof v->nvrtc, "%s", line + 6);
        } else if (!strncmp(line, "entry ", 6)) {
            int rc = add_entry(c, line);
            if (rc)
                return rc;
        } else if (!strncmp(line, "archive ", 8)) {
            if (sscanf(line, "archive %64s %llu", hex, &v->archive_bytes) != 2 ||
                hex_bytes(v->archive_sha, hex, 32))
                return -1;
            v->has_archive = 1;
        } else if (!strncmp(line, "end ", 4)) {
            if (sscanf(line, "end %llu", &v->end) != 1)
                return -1;
            v->has_end = 1;
        } else if (strncmp(line, "lowered ", 8)) {
            return -1; /* a line this version does not know: not ours */
        }
    }
    return v->has_archive && v->has_end && v->end == c->len ? 0 : -1;
}

/* ---- verifying ---------------------------------------------------------------------- */

static int read_member(unsigned char **out, bundle_read_fn read, void *ctx, uint64_t at,
                       uint64_t size)
{
    *out = progcache__malloc((size_t)size + 1);
    if (!*out)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory verifying an archive");
    int rc = read(ctx, *out, (size_t)size, at);
    (*out)[size] = '\0';
    return rc;
}

static int check_signature(EVP_PKEY *key, const unsigned char *sig, const unsigned char *msg,
                           size_t len)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md && EVP_DigestVerifyInit(md, NULL, NULL, NULL, key) == 1 &&
             EVP_DigestVerify(md, sig, BUNDLE_SIGNATURE_SIZE, msg, len) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

/* SHA-256 of the archive's first len bytes. */
static int hash_prefix(unsigned char out[PROGCACHE_SHA256_SIZE], bundle_read_fn read, void *ctx,
                       uint64_t len)
{
    progcache__sha256 *h = progcache__sha256_new();
    unsigned char *chunk = progcache__malloc(HASH_CHUNK);
    int rc = h && chunk ? PROGCACHE_OK
                        : progcache__error(PROGCACHE_ENOMEM, "out of memory verifying an archive");
    for (uint64_t at = 0; !rc && at < len; at += HASH_CHUNK) {
        size_t n = len - at < HASH_CHUNK ? (size_t)(len - at) : HASH_CHUNK;
        if (!(rc = read(ctx, chunk, n, at)))
            rc = progcache__sha256_update(h, chunk, n);
    }
    if (!rc) {
        rc = progcache__sha256_final(h, out);
        h = NULL;
    }
    progcache__sha256_free(h);
    progcache__free(chunk);
    return rc;
}

static int check_layout(const bundle_seen *b, const char *archive)
{
    if (!b->has_manifest && !b->has_sig)
        return refused(archive, "it is not signed (no " BUNDLE_MANIFEST_NAME " and "
                                BUNDLE_SIGNATURE_NAME " members; export it with --sign)");
    if (!b->has_manifest || !b->has_sig)
        return refused(archive, b->has_sig ? "it has a signature but no manifest"
                                           : "it has a manifest but no signature");
    if (b->sig_pos != b->manifest_next || b->after_sig || b->end_pos != b->sig_next)
        return refused(archive, "members were added around its manifest and signature, "
                                "which must be its last two");
    return PROGCACHE_OK;
}

int progcache__bundle_verify(bundle_check **out_check, const bundle_seen *b, bundle_read_fn read,
                             void *ctx, const void *pem, size_t len, const char *archive,
                             progcache_archive_result *out)
{
    EVP_PKEY *key = NULL;
    unsigned char *text = NULL, *sig = NULL, hash[PROGCACHE_SHA256_SIZE];
    char signer[65], why[300];
    manifest_view v;
    bundle_check *c = progcache__calloc(1, sizeof *c);
    memset(&v, 0, sizeof v);
    *out_check = NULL;
    int rc = c ? PROGCACHE_OK
               : progcache__error(PROGCACHE_ENOMEM, "out of memory verifying an archive");
    if (!rc)
        rc = progcache__bundle_key(&key, pem, len, 1);
    if (!rc)
        rc = progcache__bundle_signer(signer, key);
    if (!rc)
        rc = check_layout(b, archive);
    if (!rc)
        rc = read_member(&text, read, ctx, b->manifest_at, b->manifest_size);
    if (!rc)
        rc = read_member(&sig, read, ctx, b->sig_at, b->sig_size);
    if (!rc && !check_signature(key, sig, text, (size_t)b->manifest_size)) {
        /* Which of the two, when the manifest says (a hint only: an
         * unverified manifest is not believed for anything else). */
        const char *said = strstr((const char *)text, "\nsigner ");
        int other = said && strncmp(said + 8, signer, 64) != 0;
        if (other)
            snprintf(why, sizeof why,
                     "it is signed by another key (signer %.16s..., the verifying key is "
                     "%.16s...)",
                     said + 8, signer);
        else
            snprintf(why, sizeof why,
                     "its signature does not verify with the key %.16s... (the manifest or "
                     "the signature was changed)",
                     signer);
        rc = refused(archive, why);
    }
    if (!rc && (memchr(text, '\0', (size_t)b->manifest_size) ||
                parse_manifest(c, &v, (char *)text) != 0))
        rc = refused(archive, "its manifest is signed but not one this version reads");
    if (!rc && (v.archive_bytes != b->manifest_pos))
        rc = refused(archive, "it was changed after it was signed (its size before the "
                              "manifest is not the signed one)");
    if (!rc)
        rc = hash_prefix(hash, read, ctx, b->manifest_pos);
    if (!rc && memcmp(hash, v.archive_sha, sizeof hash))
        rc = refused(archive, "it was changed after it was signed (its bytes do not match "
                              "the signed manifest)");
    if (!rc && out && out->version >= 2) {
        out->verified = 1;
        memcpy(out->signer, signer, sizeof out->signer);
        snprintf(out->nvrtc_version, sizeof out->nvrtc_version, "%s", v.nvrtc);
    }
    EVP_PKEY_free(key);
    progcache__free(text);
    progcache__free(sig);
    if (rc)
        progcache__bundle_check_free(c);
    else
        *out_check = c;
    return rc;
}

int progcache__bundle_expect(const bundle_check *c, size_t i, size_t count, const char *rel,
                             uint64_t size, const char *archive)
{
    if (i == count || !*rel)
        return c->len == count ? PROGCACHE_OK
                               : refused(archive, "it holds other entries than its manifest");
    char name[65];
    snprintf(name, sizeof name, "%.2s%s", rel + 8, rel + 11);
    if (i >= c->len || strcmp(c->items[i].name, name) || c->items[i].size != size)
        return refused(archive, "it holds other entries than its manifest");
    return PROGCACHE_OK;
}

int progcache__bundle_entry_ok(const bundle_check *c, size_t i, const void *data, size_t len,
                               const void *records, size_t records_len, const char *archive)
{
    unsigned char hash[PROGCACHE_SHA256_SIZE];
    const bundle_entry *e = &c->items[i];
    int rc = progcache__sha256_oneshot(hash, data, len);
    if (!rc && (len != e->size || memcmp(hash, e->sha, sizeof hash) ||
                (records_len != 0) != e->has_records ||
                (records_len && ((rc = progcache__sha256_oneshot(hash, records, records_len)) ||
                                 memcmp(hash, e->records_sha, sizeof hash)))))
        rc = rc ? rc
                : progcache__error(PROGCACHE_ECORRUPT,
                                   "archive %s: entry %s is not the one its signed manifest "
                                   "lists (it changed while it was imported; the entries "
                                   "before it are in)",
                                   archive, e->name);
    return rc;
}

void progcache__bundle_check_free(bundle_check *c)
{
    if (!c)
        return;
    progcache__free(c->items);
    progcache__free(c);
}
