/* The envelope around remote values (src/store/redis/envelope.c): its layout is
 * pinned against an independent computation with OpenSSL's one-shot HMAC,
 * and every single-byte change, truncation and extension is refused. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>

#include "check.h"
#include "sha256.h"
#include "store/redis/envelope.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef";
static const char OTHER[] = "fedcba9876543210fedcba9876543210";

/* header + payload in one malloc'd value, as stored. */
static unsigned char *seal(size_t *len, const void *key, size_t key_len, const void *payload,
                           size_t size, const progcache__envelope_key *k)
{
    unsigned char header[PROGCACHE__ENVELOPE_MAX_HEADER];
    size_t hlen = 0;
    CHECK_OK(progcache__envelope_seal(header, &hlen, key, key_len, payload, size, k));
    CHECK(hlen == progcache__envelope_header_size(k != NULL));
    unsigned char *v = malloc(hlen + size + 1);
    CHECK(v != NULL);
    memcpy(v, header, hlen);
    if (size)
        memcpy(v + hlen, payload, size);
    *len = hlen + size;
    return v;
}

static int opens(const unsigned char *v, size_t len, const void *key, size_t key_len,
                 const progcache__envelope_key *k)
{
    const unsigned char *payload = NULL;
    size_t size = 0;
    return progcache__envelope_open(&payload, &size, v, len, key, key_len, k);
}

static void test_layout(progcache__envelope_key *k)
{
    const char key[] = "the-key";
    const char payload[] = "payload bytes";
    size_t len;
    unsigned char *v = seal(&len, key, sizeof key, payload, sizeof payload, k);
    CHECK(len == 80 + sizeof payload);
    CHECK(memcmp(v, "pcEV", 4) == 0);
    CHECK(v[4] == 1 && v[5] == 1 && v[6] == 0 && v[7] == 0);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | v[8 + i];
    CHECK(n == sizeof payload);
    unsigned char digest[32];
    CHECK_OK(progcache__sha256_oneshot(digest, payload, sizeof payload));
    CHECK(memcmp(v + 16, digest, 32) == 0);

    /* The documented MAC input: u64le(key_len) || key || bytes 0..47 || payload. */
    size_t msg_len = 8 + sizeof key + 48 + sizeof payload;
    unsigned char *msg = malloc(msg_len);
    CHECK(msg != NULL);
    uint64_t kl = sizeof key;
    for (int i = 0; i < 8; i++)
        msg[i] = (unsigned char)(kl >> (8 * i));
    memcpy(msg + 8, key, sizeof key);
    memcpy(msg + 8 + sizeof key, v, 48);
    memcpy(msg + 8 + sizeof key + 48, payload, sizeof payload);
    unsigned char tag[32];
    unsigned int tag_len = 0;
    CHECK(HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, msg_len, tag, &tag_len) != NULL);
    CHECK(tag_len == 32);
    CHECK(memcmp(v + 48, tag, 32) == 0);
    CHECK(memcmp(v + 80, payload, sizeof payload) == 0);

    const unsigned char *p = NULL;
    size_t size = 0;
    CHECK_OK(progcache__envelope_open(&p, &size, v, len, key, sizeof key, k));
    CHECK(p == v + 80 && size == sizeof payload);
    free(msg);
    free(v);
}

/* Every byte flipped, every truncation and an extension: refused. */
static void test_every_damage(const progcache__envelope_key *k)
{
    const char key[] = "k";
    unsigned char payload[40];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)(i * 7 + 1);
    size_t len;
    unsigned char *v = seal(&len, key, 1, payload, sizeof payload, k);
    CHECK_OK(opens(v, len, key, 1, k));
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            v[i] ^= (unsigned char)(1u << bit);
            int rc = opens(v, len, key, 1, k);
            if (rc != PROGCACHE_ECORRUPT)
                fprintf(stderr, "flip of byte %zu bit %d (tagged %d) accepted\n", i, bit,
                        k != NULL);
            CHECK_RC(PROGCACHE_ECORRUPT, rc);
            v[i] ^= (unsigned char)(1u << bit);
        }
    }
    for (size_t n = 0; n < len; n++)
        CHECK_RC(PROGCACHE_ECORRUPT, opens(v, n, key, 1, k));
    unsigned char *longer = malloc(len + 1);
    CHECK(longer != NULL);
    memcpy(longer, v, len);
    longer[len] = 0;
    CHECK_RC(PROGCACHE_ECORRUPT, opens(longer, len + 1, key, 1, k));
    CHECK_OK(opens(v, len, key, 1, k));
    free(longer);
    free(v);
}

static void test_secret_rules(progcache__envelope_key *k, progcache__envelope_key *other)
{
    const char key[] = "key-a";
    const char key_b[] = "key-b";
    const char payload[] = "cubin";
    size_t tagged_len, plain_len;
    unsigned char *tagged = seal(&tagged_len, key, sizeof key, payload, sizeof payload, k);
    unsigned char *plain = seal(&plain_len, key, sizeof key, payload, sizeof payload, NULL);
    CHECK(plain_len == 48 + sizeof payload);

    CHECK_OK(opens(tagged, tagged_len, key, sizeof key, k));
    /* Another secret, another key, no tag: refused, and the message says why. */
    CHECK_RC(PROGCACHE_ECORRUPT, opens(tagged, tagged_len, key, sizeof key, other));
    CHECK(strstr(progcache_error_last(), "HMAC") != NULL);
    CHECK_RC(PROGCACHE_ECORRUPT, opens(tagged, tagged_len, key_b, sizeof key_b, k));
    CHECK_RC(PROGCACHE_ECORRUPT, opens(plain, plain_len, key, sizeof key, k));
    CHECK(strstr(progcache_error_last(), "no HMAC tag") != NULL);
    /* Without a secret: both accepted (documented), the key does not matter. */
    CHECK_OK(opens(tagged, tagged_len, key, sizeof key, NULL));
    CHECK_OK(opens(plain, plain_len, key, sizeof key, NULL));
    CHECK_OK(opens(plain, plain_len, key_b, sizeof key_b, NULL));

    /* Stripping the tag (and its flag) turns it into a valid untagged
     * value: fine without a secret, refused with one. */
    unsigned char *stripped = malloc(tagged_len);
    CHECK(stripped != NULL);
    memcpy(stripped, tagged, 48);
    stripped[5] = 0;
    memcpy(stripped + 48, tagged + 80, sizeof payload);
    CHECK_OK(opens(stripped, 48 + sizeof payload, key, sizeof key, NULL));
    CHECK_RC(PROGCACHE_ECORRUPT, opens(stripped, 48 + sizeof payload, key, sizeof key, k));
    free(stripped);
    free(tagged);
    free(plain);
}

static void test_sizes(const progcache__envelope_key *k)
{
    size_t sizes[] = {0, 1, 4096, (size_t)3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *payload = malloc(sizes[i] + 1);
        CHECK(payload != NULL);
        for (size_t j = 0; j < sizes[i]; j++)
            payload[j] = (unsigned char)(j ^ (j >> 8));
        size_t len;
        unsigned char *v = seal(&len, "key", 3, payload, sizes[i], k);
        const unsigned char *p;
        size_t size;
        CHECK_OK(progcache__envelope_open(&p, &size, v, len, "key", 3, k));
        CHECK(size == sizes[i]);
        CHECK(size == 0 || memcmp(p, payload, size) == 0);
        free(v);
        free(payload);
    }
}

int main(void)
{
    progcache__envelope_key *k = NULL, *other = NULL, *none = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache__envelope_key_new(&none, "short", 5));
    CHECK(none == NULL);
    CHECK(strstr(progcache_error_last(), "at least 16") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache__envelope_key_new(&none, NULL, 32));
    CHECK_OK(progcache__envelope_key_new(&k, SECRET, strlen(SECRET)));
    CHECK_OK(progcache__envelope_key_new(&other, OTHER, strlen(OTHER)));

    test_layout(k);
    test_every_damage(NULL);
    test_every_damage(k);
    test_secret_rules(k, other);
    test_sizes(NULL);
    test_sizes(k);

    progcache__envelope_key_free(k);
    progcache__envelope_key_free(other);
    progcache__envelope_key_free(NULL);
    printf("test_envelope: ok\n");
    return 0;
}
