/* The envelope around remote values: lengths, a SHA-256 bound to the key,
 * the entry's kind and records, and an optional HMAC-SHA256 tag (layout
 * and rules in envelope.h). Format 2 is written; format 1 is still read.
 * All cryptography is OpenSSL's (EVP_MAC for the HMAC), none of it written
 * here. */
#include "remote/envelope.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <string.h>

#include "alloc.h"
#include "bytes.h"
#include "error.h"
#include "sha256.h"

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "progcache's envelope needs OpenSSL 3 (EVP_MAC)"
#endif

struct progcache__envelope_key {
    EVP_MAC *mac;
    EVP_MAC_CTX *keyed; /* initialised with the secret; only ever duplicated */
};

int progcache__envelope_key_new(progcache__envelope_key **out, const void *secret, size_t len)
{
    int rc = PROGCACHE_ENOMEM;
    *out = NULL;
    if (!secret || len < PROGCACHE__ENVELOPE_MIN_SECRET)
        return progcache__error(PROGCACHE_EINVAL,
                                "the shared secret is %zu bytes; use at least %d (32 random "
                                "bytes are best, e.g. from `openssl rand -hex 32`)",
                                secret ? len : 0, PROGCACHE__ENVELOPE_MIN_SECRET);
    progcache__envelope_key *k = progcache__calloc(1, sizeof *k);
    if (!k)
        goto done;
    k->mac = EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL);
    if (!k->mac) {
        rc = progcache__error(PROGCACHE_EIO, "OpenSSL offers no HMAC (is the default or FIPS "
                                             "provider loaded?)");
        goto done;
    }
    if (!(k->keyed = EVP_MAC_CTX_new(k->mac)))
        goto done;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (EVP_MAC_init(k->keyed, secret, len, params) != 1) {
        rc = progcache__error(PROGCACHE_EIO, "OpenSSL refused to set up HMAC-SHA256");
        goto done;
    }
    *out = k;
    k = NULL;
    rc = PROGCACHE_OK;

done:
    if (rc == PROGCACHE_ENOMEM)
        progcache__error(rc, "out of memory preparing the shared secret");
    progcache__envelope_key_free(k);
    return rc;
}

void progcache__envelope_key_free(progcache__envelope_key *key)
{
    if (!key)
        return;
    EVP_MAC_CTX_free(key->keyed); /* OpenSSL cleanses the key schedule */
    EVP_MAC_free(key->mac);
    progcache__free(key);
}

int progcache__envelope_id_init(progcache__envelope_id *id, const void *key, size_t key_len)
{
    id->key = key;
    id->key_len = key_len;
    return progcache__sha256_oneshot(id->hash, key, key_len);
}

size_t progcache__envelope_header_size(int tagged)
{
    return tagged ? PROGCACHE__ENVELOPE_MAX_HEADER : PROGCACHE__ENVELOPE_BASE_SIZE;
}

/* The tag: HMAC(secret, u64le(key_len) || key || header || records ||
 * payload), header being the bytes before the tag (envelope.h). */
static int compute_tag(unsigned char tag[PROGCACHE__ENVELOPE_TAG_SIZE],
                       const progcache__envelope_key *hmac, const progcache__envelope_id *id,
                       const unsigned char *header, size_t header_len,
                       const progcache__envelope *env)
{
    unsigned char len_le[8];
    size_t n = 0;
    progcache__put_le64(len_le, (uint64_t)id->key_len);
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(hmac->keyed);
    if (!ctx)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory computing an HMAC");
    int ok = EVP_MAC_update(ctx, len_le, sizeof len_le) == 1 &&
             EVP_MAC_update(ctx, id->key, id->key_len) == 1 &&
             EVP_MAC_update(ctx, header, header_len) == 1 &&
             (env->records_len == 0 ||
              EVP_MAC_update(ctx, env->records, env->records_len) == 1) &&
             (env->size == 0 || EVP_MAC_update(ctx, env->payload, env->size) == 1) &&
             EVP_MAC_final(ctx, tag, &n, PROGCACHE__ENVELOPE_TAG_SIZE) == 1 &&
             n == PROGCACHE__ENVELOPE_TAG_SIZE;
    EVP_MAC_CTX_free(ctx);
    return ok ? PROGCACHE_OK : progcache__error(PROGCACHE_EIO, "OpenSSL HMAC-SHA256 failed");
}

/* The digest of format 2: bytes 0..23 with the flags byte read as 0, the
 * key's hash, the records, the payload (envelope.h). */
static int digest_v2(unsigned char out[PROGCACHE_SHA256_SIZE], const unsigned char *header,
                     const progcache__envelope_id *id, const progcache__envelope *env)
{
    unsigned char fixed[24 + PROGCACHE__ENVELOPE_HASH_SIZE];
    memcpy(fixed, header, 24);
    fixed[5] = 0;
    memcpy(fixed + 24, id->hash, sizeof id->hash);
    if (!env->records_len) /* the usual case: one call, one pass */
        return progcache__sha256_two(out, fixed, sizeof fixed, env->payload, env->size);
    progcache__sha256 *ctx = progcache__sha256_new();
    if (!ctx)
        return progcache_error_code() ? progcache_error_code() : PROGCACHE_ENOMEM;
    int rc = progcache__sha256_update(ctx, fixed, sizeof fixed);
    if (!rc)
        rc = progcache__sha256_update(ctx, env->records, env->records_len);
    if (!rc && env->size)
        rc = progcache__sha256_update(ctx, env->payload, env->size);
    if (rc) {
        progcache__sha256_free(ctx);
        return rc;
    }
    return progcache__sha256_final(ctx, out);
}

/* A kind this library knows, or UNKNOWN: a newer writer's kind is not
 * guessed at. */
static progcache_kind known_kind(unsigned int v)
{
    return v <= PROGCACHE_KIND_FATBIN ? (progcache_kind)v : PROGCACHE_KIND_UNKNOWN;
}

int progcache__envelope_seal(unsigned char *out, size_t *out_len, const progcache__envelope *env,
                             const progcache__envelope_id *id,
                             const progcache__envelope_key *hmac)
{
    if (env->records_len > PROGCACHE_RECORDS_MAX)
        return progcache__error(PROGCACHE_EINVAL,
                                "the entry's records are %zu bytes, more than %zu",
                                env->records_len, PROGCACHE_RECORDS_MAX);
    memset(out, 0, PROGCACHE__ENVELOPE_BASE_SIZE);
    memcpy(out, PROGCACHE__ENVELOPE_MAGIC, 4);
    out[4] = PROGCACHE__ENVELOPE_VERSION;
    out[5] = hmac ? PROGCACHE__ENVELOPE_FLAG_HMAC : 0;
    out[6] = (unsigned char)known_kind((unsigned int)env->kind);
    progcache__put_le64(out + 8, (uint64_t)env->size);
    progcache__put_le32(out + 16, (uint32_t)env->records_len);
    int rc = digest_v2(out + 24, out, id, env);
    if (rc)
        return rc;
    if (hmac) {
        rc = compute_tag(out + PROGCACHE__ENVELOPE_BASE_SIZE, hmac, id, out,
                         PROGCACHE__ENVELOPE_BASE_SIZE, env);
        if (rc)
            return rc;
    }
    *out_len = progcache__envelope_header_size(hmac != NULL);
    return PROGCACHE_OK;
}

int progcache__envelope_value(unsigned char **out, size_t *out_len,
                              const progcache__envelope *env, const progcache__envelope_id *id,
                              const progcache__envelope_key *hmac)
{
    unsigned char header[PROGCACHE__ENVELOPE_MAX_HEADER];
    size_t header_len = 0;
    *out = NULL;
    *out_len = 0;
    int rc = progcache__envelope_seal(header, &header_len, env, id, hmac);
    if (rc)
        return rc;
    /* records_len is bounded by seal; the payload by the tier's maximum. */
    if (env->size > SIZE_MAX - header_len - env->records_len)
        return progcache__error(PROGCACHE_ENOMEM, "a value of %zu bytes cannot be held",
                                env->size);
    size_t len = header_len + env->records_len + env->size;
    unsigned char *v = progcache__malloc(len ? len : 1);
    if (!v)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory for a value of %zu bytes", len);
    memcpy(v, header, header_len);
    if (env->records_len)
        memcpy(v + header_len, env->records, env->records_len);
    if (env->size)
        memcpy(v + header_len + env->records_len, env->payload, env->size);
    *out = v;
    *out_len = len;
    return PROGCACHE_OK;
}

/* The tag rule, for either format: with a secret, a tag must be there and
 * verify; without one, it is not looked at. */
static int check_tag(const unsigned char *v, size_t base, int tagged,
                     const progcache__envelope_id *id, const progcache__envelope *env,
                     const progcache__envelope_key *hmac)
{
    unsigned char tag[PROGCACHE__ENVELOPE_TAG_SIZE];
    if (!hmac)
        return PROGCACHE_OK;
    if (!tagged)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value carries no HMAC tag, and a shared secret is "
                                "configured: it was written without the secret");
    int rc = compute_tag(tag, hmac, id, v, base, env);
    if (rc)
        return rc;
    if (CRYPTO_memcmp(tag, v + base, sizeof tag) != 0)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the HMAC tag does not verify: the value was altered, "
                                "written with another secret, or copied from another key");
    return PROGCACHE_OK;
}

static int length_mismatch(uint64_t want, size_t have)
{
    return progcache__error(PROGCACHE_ECORRUPT,
                            "the envelope says %llu bytes of records and payload but holds %zu",
                            (unsigned long long)want, have);
}

static int open_v1(progcache__envelope *out, const unsigned char *v, size_t value_len,
                   const progcache__envelope_id *id, const progcache__envelope_key *hmac)
{
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    int tagged = (v[5] & PROGCACHE__ENVELOPE_FLAG_HMAC) != 0;
    size_t header = PROGCACHE__ENVELOPE_V1_BASE_SIZE + (tagged ? PROGCACHE__ENVELOPE_TAG_SIZE : 0);
    if ((v[5] & ~PROGCACHE__ENVELOPE_FLAG_HMAC) != 0 || v[6] != 0 || v[7] != 0)
        return progcache__error(PROGCACHE_ECORRUPT, "the envelope has unknown flags 0x%02x",
                                v[5]);
    uint64_t size = progcache__le64(v + 8);
    if (value_len < header || size != (uint64_t)(value_len - header))
        return length_mismatch(size, value_len >= header ? value_len - header : 0);
    *out = (progcache__envelope){1, PROGCACHE_KIND_UNKNOWN, NULL, 0, v + header, (size_t)size, 0};
    int rc = check_tag(v, PROGCACHE__ENVELOPE_V1_BASE_SIZE, tagged, id, out, hmac);
    out->bad_tag = rc == PROGCACHE_ECORRUPT;
    if (!rc)
        rc = progcache__sha256_oneshot(digest, out->payload, out->size);
    if (!rc && memcmp(digest, v + 16, sizeof digest) != 0)
        rc = progcache__error(PROGCACHE_ECORRUPT,
                              "the payload's SHA-256 does not match the envelope's");
    return rc;
}

static int open_v2(progcache__envelope *out, const unsigned char *v, size_t value_len,
                   const progcache__envelope_id *id, const progcache__envelope_key *hmac)
{
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    if (value_len < PROGCACHE__ENVELOPE_BASE_SIZE)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value is %zu bytes, shorter than an envelope header (%d)",
                                value_len, PROGCACHE__ENVELOPE_BASE_SIZE);
    int tagged = (v[5] & PROGCACHE__ENVELOPE_FLAG_HMAC) != 0;
    size_t header = progcache__envelope_header_size(tagged);
    if ((v[5] & ~PROGCACHE__ENVELOPE_FLAG_HMAC) != 0 || v[7] != 0 || progcache__le32(v + 20) != 0)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the envelope has unknown flags 0x%02x or reserved bytes set",
                                v[5]);
    uint64_t size = progcache__le64(v + 8), records = progcache__le32(v + 16);
    if (records > PROGCACHE_RECORDS_MAX)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the envelope says %llu bytes of records, more than %zu",
                                (unsigned long long)records, PROGCACHE_RECORDS_MAX);
    size_t body = value_len >= header ? value_len - header : 0;
    if (value_len < header || records > body || size != (uint64_t)(body - records))
        return length_mismatch(records + size, body);
    *out = (progcache__envelope){2,           known_kind(v[6]),
                                 v + header,  (size_t)records,
                                 v + header + records, (size_t)size, 0};
    if (!records)
        out->records = NULL;
    int rc = check_tag(v, PROGCACHE__ENVELOPE_BASE_SIZE, tagged, id, out, hmac);
    out->bad_tag = rc == PROGCACHE_ECORRUPT;
    if (!rc)
        rc = digest_v2(digest, v, id, out);
    if (!rc && memcmp(digest, v + 24, sizeof digest) != 0)
        rc = progcache__error(PROGCACHE_ECORRUPT,
                              "the envelope's SHA-256 does not match: the value is damaged, or "
                              "was written for another key");
    return rc;
}

/* The checks of bytes 0..4 every format shares: 0, or the error. */
static int check_start(const unsigned char *v, size_t value_len)
{
    if (value_len < 5)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value is %zu bytes, shorter than an envelope header (%d)",
                                value_len, PROGCACHE__ENVELOPE_V1_BASE_SIZE);
    if (memcmp(v, PROGCACHE__ENVELOPE_MAGIC, 4) != 0)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value is not a progcache envelope (bad magic); another "
                                "program may be using the same key prefix");
    if (v[4] > PROGCACHE__ENVELOPE_VERSION)
        return progcache__error(PROGCACHE_ENOTFOUND,
                                "written by a newer progcache (envelope format version %u; "
                                "this one reads versions 1 to %d)",
                                v[4], PROGCACHE__ENVELOPE_VERSION);
    if (v[4] != 1 && v[4] != 2)
        return progcache__error(PROGCACHE_ECORRUPT, "envelope format version %u does not exist",
                                v[4]);
    return 0;
}

int progcache__envelope_length(uint64_t *total, uint64_t *size, size_t *header_len,
                               const void *head, size_t have)
{
    const unsigned char *v = head;
    int rc = check_start(v, have);
    if (rc)
        return rc;
    if (have < 24)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value is %zu bytes, shorter than an envelope header (%d)",
                                have, PROGCACHE__ENVELOPE_V1_BASE_SIZE);
    int tagged = (v[5] & PROGCACHE__ENVELOPE_FLAG_HMAC) != 0;
    uint64_t payload = progcache__le64(v + 8), records = 0;
    if (v[4] == 1) {
        *header_len = PROGCACHE__ENVELOPE_V1_BASE_SIZE + (tagged ? PROGCACHE__ENVELOPE_TAG_SIZE : 0);
    } else {
        *header_len = progcache__envelope_header_size(tagged);
        records = progcache__le32(v + 16);
        if (records > PROGCACHE_RECORDS_MAX)
            return progcache__error(PROGCACHE_ECORRUPT,
                                    "the envelope says %llu bytes of records, more than %zu",
                                    (unsigned long long)records, PROGCACHE_RECORDS_MAX);
    }
    if (payload > UINT64_MAX - *header_len - records)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the envelope says %llu bytes of payload, more than can exist",
                                (unsigned long long)payload);
    *size = payload;
    *total = *header_len + records + payload;
    return PROGCACHE_OK;
}

int progcache__envelope_open(progcache__envelope *out, const void *value, size_t value_len,
                             const progcache__envelope_id *id,
                             const progcache__envelope_key *hmac)
{
    const unsigned char *v = value;
    memset(out, 0, sizeof *out);
    int rc = check_start(v, value_len);
    if (value_len >= 5 && !memcmp(v, PROGCACHE__ENVELOPE_MAGIC, 4))
        out->version = v[4];
    if (rc)
        return rc;
    if (v[4] == 2)
        return open_v2(out, v, value_len, id, hmac);
    if (v[4] == 1 && value_len >= PROGCACHE__ENVELOPE_V1_BASE_SIZE)
        return open_v1(out, v, value_len, id, hmac);
    return progcache__error(PROGCACHE_ECORRUPT,
                            "the value is %zu bytes, shorter than an envelope header (%d)",
                            value_len, PROGCACHE__ENVELOPE_V1_BASE_SIZE);
}
