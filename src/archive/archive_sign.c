/* Signed bundles, the export side (docs/FORMAT.md, "Signed bundles";
 * checking them is archive_verify.c).
 *
 * A signed archive is an ordinary export with two more members at its
 * end: a text manifest listing every entry (name, size, SHA-256, the
 * SHA-256 of its records, kind, architecture, lowered names) and the
 * SHA-256 of every archive byte before the manifest, and a detached
 * Ed25519 signature over the manifest. The archive hash is what makes
 * "changed in any way" checkable: a header's name, an added or removed
 * member, padding, all of it is in the signed bytes. OpenSSL signs; no
 * cryptography is written here. */
#include "archive/archive_sign.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "sha256.h"
#include "archive/archive_sign_key.h"

struct bundle_writer {
    EVP_PKEY *key;
    progcache__sha256 *archive; /* every byte written so far; NULL once finished */
    uint64_t archive_bytes;
    uint64_t entries;
    progcache_buf head, body; /* the manifest's first lines; its entry lines */
};

/* ---- keys ---------------------------------------------------------------------- */

/* The newest OpenSSL error, in words, for a message. */
static const char *openssl_why(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (!e)
        return "no details";
    ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

int progcache__bundle_key(EVP_PKEY **out, const void *pem, size_t len, int is_public)
{
    const char *what = is_public ? "verifying key" : "signing key";
    char why[256];
    *out = NULL;
    if (!pem || !len || len > INT32_MAX)
        return progcache__error(PROGCACHE_EINVAL, "the %s is empty", what);
    ERR_clear_error();
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (!bio)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory reading the %s", what);
    /* No passphrase callback: an encrypted key fails here rather than
     * prompting from inside a library. */
    EVP_PKEY *key = is_public ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL)
                              : PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (!key)
        return progcache__error(PROGCACHE_EINVAL,
                                "the %s is not a PEM %s (%s); make one with %s", what,
                                is_public ? "public key" : "private key",
                                openssl_why(why, sizeof why),
                                is_public ? "'openssl pkey -in KEY.pem -pubout -out PUB.pem'"
                                          : "'openssl genpkey -algorithm ed25519 -out KEY.pem'");
    if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
        const char *type = EVP_PKEY_get0_type_name(key);
        EVP_PKEY_free(key);
        return progcache__error(PROGCACHE_EINVAL,
                                "the %s is a %s key; bundles are signed with Ed25519 keys "
                                "('openssl genpkey -algorithm ed25519')",
                                what, type ? type : "non-Ed25519");
    }
    *out = key;
    return PROGCACHE_OK;
}

int progcache__bundle_signer(char out[65], EVP_PKEY *key)
{
    unsigned char raw[32], hash[PROGCACHE_SHA256_SIZE];
    size_t len = sizeof raw;
    if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != sizeof raw)
        return progcache__error(PROGCACHE_EINVAL, "cannot read the key's public half");
    int rc = progcache__sha256_oneshot(hash, raw, len);
    if (!rc)
        progcache__hex(out, hash, sizeof hash);
    return rc;
}

/* ---- the manifest ------------------------------------------------------------- */

static int append(progcache_buf *b, const char *s)
{
    return progcache__buf_append(b, s, strlen(s));
}

/* A word of the manifest: bytes that would end or split it (blanks,
 * controls, '%', and anything outside ASCII, so a line is always one
 * line) as %XX; "" as "%". */
static int append_word(progcache_buf *b, const char *s)
{
    if (!*s)
        return append(b, "%");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[4];
        if (*p > ' ' && *p < 0x7f && *p != '%') {
            if (progcache__buf_append(b, p, 1))
                return PROGCACHE_ENOMEM;
            continue;
        }
        snprintf(esc, sizeof esc, "%%%02X", *p);
        if (append(b, esc))
            return PROGCACHE_ENOMEM;
    }
    return PROGCACHE_OK;
}

int progcache__bundle_writer_new(bundle_writer **out, const void *pem, size_t len,
                                 const char *nvrtc)
{
    *out = NULL;
    bundle_writer *w = progcache__calloc(1, sizeof *w);
    if (!w)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory signing an archive");
    progcache_buf init = PROGCACHE_BUF_INIT;
    w->head = w->body = init;
    char signer[65], line[160];
    int rc = progcache__bundle_key(&w->key, pem, len, 0);
    if (!rc)
        rc = progcache__bundle_signer(signer, w->key);
    if (!rc && !(w->archive = progcache__sha256_new()))
        rc = PROGCACHE_ENOMEM;
    if (!rc) {
        snprintf(line, sizeof line, "progcache-bundle 1\nsigner %s\nnvrtc ", signer);
        rc = append(&w->head, line);
    }
    if (!rc)
        rc = append_word(&w->head, nvrtc && *nvrtc ? nvrtc : "unknown");
    if (!rc)
        rc = append(&w->head, "\n");
    if (rc) {
        progcache__bundle_writer_free(w);
        return rc;
    }
    *out = w;
    return PROGCACHE_OK;
}

int progcache__bundle_hash(bundle_writer *w, const void *data, size_t len)
{
    if (!w->archive)
        return PROGCACHE_OK;
    w->archive_bytes += len;
    return progcache__sha256_update(w->archive, data, len);
}

/* The lowered-name lines of one entry. */
static int add_lowered(bundle_writer *w, const progcache_entry *e)
{
    const unsigned char *rec;
    size_t len, pos = 0;
    if (!e->meta || progcache_entry_meta_find(&rec, &len, e->meta,
                                              PROGCACHE_RECORD_LOWERED_NAMES) != PROGCACHE_OK)
        return PROGCACHE_OK;
    const char *expr, *lowered;
    int got, rc = PROGCACHE_OK;
    while (!rc && (got = progcache_lowered_names_next(rec, len, &pos, &expr, &lowered)) == 1) {
        char line[80];
        snprintf(line, sizeof line, "lowered %s ", e->name);
        rc = append(&w->body, line);
        if (!rc)
            rc = append_word(&w->body, expr);
        if (!rc)
            rc = append(&w->body, " ");
        if (!rc)
            rc = append_word(&w->body, lowered);
        if (!rc)
            rc = append(&w->body, "\n");
    }
    /* A record its seal vouches for but that does not parse is still in
     * the archive, and in the records hash; only its names are not listed. */
    return rc;
}

int progcache__bundle_add(bundle_writer *w, const progcache_entry *e)
{
    unsigned char hash[PROGCACHE_SHA256_SIZE];
    char hex[65], rec_hex[65] = "-", line[400];
    int rc = progcache__sha256_oneshot(hash, e->data, (size_t)e->size);
    if (rc)
        return rc;
    progcache__hex(hex, hash, sizeof hash);
    if (e->meta && e->meta->records.size) {
        if ((rc = progcache__sha256_oneshot(hash, e->meta->records.data, e->meta->records.size)))
            return rc;
        progcache__hex(rec_hex, hash, sizeof hash);
    }
    const progcache_artifact_info *a = e->artifact;
    snprintf(line, sizeof line, "entry %s %llu %s %s ", e->name, (unsigned long long)e->size, hex,
             rec_hex);
    rc = append(&w->body, line);
    if (!rc)
        rc = append_word(&w->body, progcache_kind_name(a ? a->kind : PROGCACHE_KIND_UNKNOWN));
    if (!rc)
        rc = append(&w->body, " ");
    if (!rc)
        rc = append_word(&w->body, a && a->arch[0] ? a->arch : "-");
    if (!rc)
        rc = append(&w->body, "\n");
    if (!rc)
        rc = add_lowered(w, e);
    w->entries++;
    return rc ? progcache__error(PROGCACHE_ENOMEM, "out of memory signing an archive") : rc;
}

/* One regular-file member, from memory, onto out. */
static int add_member(progcache_buf *out, const char *name, const void *data, size_t len)
{
    unsigned char block[TAR_BLOCK];
    static const unsigned char zeros[TAR_BLOCK];
    if (progcache__tar_make(block, name, len, (int64_t)time(NULL)) != 0)
        return progcache__error(PROGCACHE_EIO, "%s is too large for a ustar archive", name);
    if (progcache__buf_append(out, block, sizeof block) || progcache__buf_append(out, data, len) ||
        progcache__buf_append(out, zeros, (TAR_BLOCK - len % TAR_BLOCK) % TAR_BLOCK))
        return progcache__error(PROGCACHE_ENOMEM, "out of memory signing an archive");
    return PROGCACHE_OK;
}

int progcache__bundle_finish(bundle_writer *w, const progcache_buf **members)
{
    unsigned char hash[PROGCACHE_SHA256_SIZE], sig[BUNDLE_SIGNATURE_SIZE];
    char hex[65], line[160];
    progcache__sha256 *ctx = w->archive;
    w->archive = NULL;
    int rc = progcache__sha256_final(ctx, hash);
    if (rc)
        return rc;
    progcache__hex(hex, hash, sizeof hash);
    snprintf(line, sizeof line, "archive %s %llu\nend %llu\n", hex,
             (unsigned long long)w->archive_bytes, (unsigned long long)w->entries);
    if (progcache__buf_append(&w->head, w->body.data, w->body.size) || append(&w->head, line))
        return progcache__error(PROGCACHE_ENOMEM, "out of memory signing an archive");
    if (w->head.size > BUNDLE_MANIFEST_MAX)
        return progcache__error(PROGCACHE_EIO,
                                "the archive's manifest would be %zu bytes, more than an "
                                "import reads (%llu): export fewer entries",
                                w->head.size, (unsigned long long)BUNDLE_MANIFEST_MAX);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t sig_len = sizeof sig;
    char why[256];
    /* Ed25519 hashes the message itself: no digest is named. */
    if (!md || EVP_DigestSignInit(md, NULL, NULL, NULL, w->key) != 1 ||
        EVP_DigestSign(md, sig, &sig_len, w->head.data, w->head.size) != 1 ||
        sig_len != sizeof sig)
        rc = progcache__error(PROGCACHE_EIO, "cannot sign the archive's manifest (%s)",
                              openssl_why(why, sizeof why));
    EVP_MD_CTX_free(md);
    /* body is done with: it holds the two members now. */
    w->body.size = 0;
    if (!rc)
        rc = add_member(&w->body, BUNDLE_MANIFEST_NAME, w->head.data, w->head.size);
    if (!rc)
        rc = add_member(&w->body, BUNDLE_SIGNATURE_NAME, sig, sizeof sig);
    *members = &w->body;
    return rc;
}

void progcache__bundle_writer_free(bundle_writer *w)
{
    if (!w)
        return;
    EVP_PKEY_free(w->key);
    progcache__sha256_free(w->archive);
    progcache_buf_free(&w->head);
    progcache_buf_free(&w->body);
    progcache__free(w);
}
