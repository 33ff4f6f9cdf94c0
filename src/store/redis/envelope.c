/* The envelope around remote values: length, SHA-256 and an optional
 * HMAC-SHA256 tag (layout and rules in envelope.h). All cryptography is
 * OpenSSL's (EVP_MAC for the HMAC), none of it written here. */
#include "store/redis/envelope.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <string.h>

#include "alloc.h"
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

size_t progcache__envelope_header_size(int tagged)
{
    return tagged ? PROGCACHE__ENVELOPE_MAX_HEADER : PROGCACHE__ENVELOPE_BASE_SIZE;
}

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 8; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* The tag over (key_len, key, base header, payload); see envelope.h. */
static int compute_tag(unsigned char tag[PROGCACHE__ENVELOPE_TAG_SIZE],
                       const progcache__envelope_key *hmac, const void *key, size_t key_len,
                       const unsigned char *base, const void *payload, size_t size)
{
    unsigned char len_le[8];
    size_t n = 0;
    put_u64le(len_le, (uint64_t)key_len);
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(hmac->keyed);
    if (!ctx)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory computing an HMAC");
    int ok = EVP_MAC_update(ctx, len_le, sizeof len_le) == 1 &&
             EVP_MAC_update(ctx, key, key_len) == 1 &&
             EVP_MAC_update(ctx, base, PROGCACHE__ENVELOPE_BASE_SIZE) == 1 &&
             (size == 0 || EVP_MAC_update(ctx, payload, size) == 1) &&
             EVP_MAC_final(ctx, tag, &n, PROGCACHE__ENVELOPE_TAG_SIZE) == 1 &&
             n == PROGCACHE__ENVELOPE_TAG_SIZE;
    EVP_MAC_CTX_free(ctx);
    return ok ? PROGCACHE_OK : progcache__error(PROGCACHE_EIO, "OpenSSL HMAC-SHA256 failed");
}

int progcache__envelope_seal(unsigned char *out, size_t *out_len, const void *key,
                             size_t key_len, const void *payload, size_t size,
                             const progcache__envelope_key *hmac)
{
    memcpy(out, PROGCACHE__ENVELOPE_MAGIC, 4);
    out[4] = PROGCACHE__ENVELOPE_VERSION;
    out[5] = hmac ? PROGCACHE__ENVELOPE_FLAG_HMAC : 0;
    out[6] = out[7] = 0;
    put_u64le(out + 8, (uint64_t)size);
    int rc = progcache__sha256_oneshot(out + 16, payload, size);
    if (rc)
        return rc;
    if (hmac) {
        rc = compute_tag(out + PROGCACHE__ENVELOPE_BASE_SIZE, hmac, key, key_len, out, payload,
                         size);
        if (rc)
            return rc;
    }
    *out_len = progcache__envelope_header_size(hmac != NULL);
    return PROGCACHE_OK;
}

int progcache__envelope_open(const unsigned char **out_payload, size_t *out_size,
                             const void *value, size_t value_len, const void *key,
                             size_t key_len, const progcache__envelope_key *hmac)
{
    const unsigned char *v = value;
    unsigned char digest[PROGCACHE_SHA256_SIZE];

    if (value_len < PROGCACHE__ENVELOPE_BASE_SIZE)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value is %zu bytes, shorter than an envelope header (%d)",
                                value_len, PROGCACHE__ENVELOPE_BASE_SIZE);
    if (memcmp(v, PROGCACHE__ENVELOPE_MAGIC, 4) != 0)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the value is not a progcache envelope (bad magic); another "
                                "program may be using the same key prefix");
    if (v[4] != PROGCACHE__ENVELOPE_VERSION)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "envelope format version %u is not supported (this library "
                                "reads version %d)",
                                v[4], PROGCACHE__ENVELOPE_VERSION);
    if ((v[5] & ~PROGCACHE__ENVELOPE_FLAG_HMAC) != 0 || v[6] != 0 || v[7] != 0)
        return progcache__error(PROGCACHE_ECORRUPT, "the envelope has unknown flags 0x%02x",
                                v[5]);
    int tagged = (v[5] & PROGCACHE__ENVELOPE_FLAG_HMAC) != 0;
    size_t header = progcache__envelope_header_size(tagged);
    uint64_t size = get_u64le(v + 8);
    if (value_len < header || size != (uint64_t)(value_len - header))
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the envelope says %llu payload bytes but holds %zu",
                                (unsigned long long)size,
                                value_len >= header ? value_len - header : 0);
    const unsigned char *payload = v + header;

    if (hmac) {
        unsigned char tag[PROGCACHE__ENVELOPE_TAG_SIZE];
        if (!tagged)
            return progcache__error(PROGCACHE_ECORRUPT,
                                    "the value carries no HMAC tag, and a shared secret is "
                                    "configured: it was written without the secret");
        int rc = compute_tag(tag, hmac, key, key_len, v, payload, (size_t)size);
        if (rc)
            return rc;
        if (CRYPTO_memcmp(tag, v + PROGCACHE__ENVELOPE_BASE_SIZE, sizeof tag) != 0)
            return progcache__error(PROGCACHE_ECORRUPT,
                                    "the HMAC tag does not verify: the value was altered, "
                                    "written with another secret, or copied from another key");
    }
    int rc = progcache__sha256_oneshot(digest, payload, (size_t)size);
    if (rc)
        return rc;
    if (memcmp(digest, v + 16, sizeof digest) != 0)
        return progcache__error(PROGCACHE_ECORRUPT,
                                "the payload's SHA-256 does not match the envelope's");
    *out_payload = payload;
    *out_size = (size_t)size;
    return PROGCACHE_OK;
}
