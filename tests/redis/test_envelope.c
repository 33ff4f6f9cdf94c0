/* The envelope around remote values (src/remote/envelope.c): the
 * layout of format 2 is pinned against an independent computation with
 * OpenSSL's one-shot SHA-256 and HMAC; every single-byte change,
 * truncation and extension is refused; the digest binds the key without a
 * secret; format 1 values (crafted here byte by byte, as the previous
 * progcache wrote them) are still read; a newer format is told apart. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdint.h>

#include "check.h"
#include "alloc.h"
#include "remote/envelope.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef";
static const char OTHER[] = "fedcba9876543210fedcba9876543210";

static progcache__envelope_id id_of(const void *key, size_t key_len)
{
    progcache__envelope_id id;
    CHECK_OK(progcache__envelope_id_init(&id, key, key_len));
    return id;
}

/* header + records + payload in one malloc'd value, as stored. */
static unsigned char *seal_full(size_t *len, const void *key, size_t key_len, progcache_kind kind,
                                const void *records, size_t records_len, const void *payload,
                                size_t size, const progcache__envelope_key *k)
{
    unsigned char header[PROGCACHE__ENVELOPE_MAX_HEADER], *built = NULL;
    size_t hlen = 0, built_len = 0;
    progcache__envelope env = {0, kind, records, records_len, payload, size, 0};
    progcache__envelope_id id = id_of(key, key_len);
    CHECK_OK(progcache__envelope_seal(header, &hlen, &env, &id, k));
    CHECK(hlen == progcache__envelope_header_size(k != NULL));
    /* The tiers store what envelope_value builds: the sealed header, the
     * records, the payload. */
    CHECK_OK(progcache__envelope_value(&built, &built_len, &env, &id, k));
    CHECK(built_len == hlen + records_len + size);
    CHECK(memcmp(built, header, hlen) == 0);
    CHECK(records_len == 0 || memcmp(built + hlen, records, records_len) == 0);
    CHECK(size == 0 || memcmp(built + hlen + records_len, payload, size) == 0);
    unsigned char *v = malloc(built_len + 1); /* the tests free() and grow it */
    CHECK(v != NULL);
    memcpy(v, built, built_len);
    progcache__free(built);
    *len = built_len;
    return v;
}

static unsigned char *seal(size_t *len, const void *key, size_t key_len, const void *payload,
                           size_t size, const progcache__envelope_key *k)
{
    return seal_full(len, key, key_len, PROGCACHE_KIND_UNKNOWN, NULL, 0, payload, size, k);
}

static int opens(const unsigned char *v, size_t len, const void *key, size_t key_len,
                 const progcache__envelope_key *k)
{
    progcache__envelope e;
    progcache__envelope_id id = id_of(key, key_len);
    return progcache__envelope_open(&e, v, len, &id, k);
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* HMAC-SHA256(SECRET, u64le(key_len) || key || header || rest). */
static void expected_tag(unsigned char tag[32], const void *key, size_t key_len,
                         const unsigned char *header, size_t header_len,
                         const unsigned char *rest, size_t rest_len)
{
    size_t msg_len = 8 + key_len + header_len + rest_len;
    unsigned char *msg = malloc(msg_len);
    CHECK(msg != NULL);
    put_le(msg, key_len, 8);
    memcpy(msg + 8, key, key_len);
    memcpy(msg + 8 + key_len, header, header_len);
    memcpy(msg + 8 + key_len + header_len, rest, rest_len);
    unsigned int tag_len = 0;
    CHECK(HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, msg_len, tag, &tag_len) != NULL);
    CHECK(tag_len == 32);
    free(msg);
}

static void test_layout(progcache__envelope_key *k)
{
    const char key[] = "the-key";
    const char records[] = "\x01\0\0\0\x03\0\0\0abc"; /* one record, tag 1 */
    const size_t rlen = sizeof records - 1;
    const char payload[] = "payload bytes";
    size_t len;
    unsigned char *v = seal_full(&len, key, sizeof key, PROGCACHE_KIND_PTX, records, rlen,
                                 payload, sizeof payload, k);
    CHECK(len == 88 + rlen + sizeof payload);
    CHECK(memcmp(v, "pcEV", 4) == 0);
    CHECK(v[4] == 2 && v[5] == 1 && v[6] == PROGCACHE_KIND_PTX && v[7] == 0);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | v[8 + i];
    CHECK(n == sizeof payload);
    CHECK(v[16] == rlen && v[17] == 0 && v[18] == 0 && v[19] == 0);
    CHECK(v[20] == 0 && v[21] == 0 && v[22] == 0 && v[23] == 0);

    /* The documented digest: SHA-256(bytes 0..23 with byte 5 as 0 ||
     * SHA-256(key) || records || payload). */
    unsigned char msg[24 + 32 + sizeof records + sizeof payload], digest[32];
    memcpy(msg, v, 24);
    msg[5] = 0;
    SHA256((const unsigned char *)key, sizeof key, msg + 24);
    memcpy(msg + 56, records, rlen);
    memcpy(msg + 56 + rlen, payload, sizeof payload);
    SHA256(msg, 56 + rlen + sizeof payload, digest);
    CHECK(memcmp(v + 24, digest, 32) == 0);

    /* The documented tag: u64le(key_len) || key || bytes 0..55 || records
     * || payload. */
    unsigned char tag[32];
    expected_tag(tag, key, sizeof key, v, 56, v + 88, rlen + sizeof payload);
    CHECK(memcmp(v + 56, tag, 32) == 0);
    CHECK(memcmp(v + 88, records, rlen) == 0);
    CHECK(memcmp(v + 88 + rlen, payload, sizeof payload) == 0);

    progcache__envelope e;
    progcache__envelope_id id = id_of(key, sizeof key);
    CHECK_OK(progcache__envelope_open(&e, v, len, &id, k));
    CHECK(e.version == 2 && e.kind == PROGCACHE_KIND_PTX);
    CHECK(e.records == v + 88 && e.records_len == rlen);
    CHECK(e.payload == v + 88 + rlen && e.size == sizeof payload);
    /* Without a secret: the same, the tag not looked at. */
    CHECK_OK(progcache__envelope_open(&e, v, len, &id, NULL));
    CHECK(e.version == 2 && e.records_len == rlen && e.size == sizeof payload);
    free(v);

    /* No records: a NULL pointer, an untagged header of 56 bytes. */
    v = seal(&len, key, sizeof key, payload, sizeof payload, NULL);
    CHECK(len == 56 + sizeof payload && v[5] == 0 && v[6] == 0);
    CHECK_OK(progcache__envelope_open(&e, v, len, &id, NULL));
    CHECK(e.records == NULL && e.records_len == 0 && e.kind == PROGCACHE_KIND_UNKNOWN);
    free(v);
}

/* Every byte flipped, every truncation and an extension: refused. A flip
 * of the version byte to a number above 2 reads as a newer format (a miss
 * of its own kind): it cannot be told apart from one. */
static void test_every_damage(const progcache__envelope_key *k)
{
    const char key[] = "k";
    const char records[] = "\x07\0\0\0\x02\0\0\0xy";
    unsigned char payload[40];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)(i * 7 + 1);
    size_t len;
    unsigned char *v = seal_full(&len, key, 1, PROGCACHE_KIND_CUBIN, records,
                                 sizeof records - 1, payload, sizeof payload, k);
    CHECK_OK(opens(v, len, key, 1, k));
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            v[i] ^= (unsigned char)(1u << bit);
            int rc = opens(v, len, key, 1, k);
            int want = i == 4 && v[4] > 2 ? PROGCACHE_ENOTFOUND : PROGCACHE_ECORRUPT;
            if (rc != want)
                fprintf(stderr, "flip of byte %zu bit %d (tagged %d) gave %d\n", i, bit,
                        k != NULL, rc);
            CHECK_RC(want, rc);
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
    CHECK(plain_len == 56 + sizeof payload);

    CHECK_OK(opens(tagged, tagged_len, key, sizeof key, k));
    /* Another secret, another key, no tag: refused, and the message says why. */
    CHECK_RC(PROGCACHE_ECORRUPT, opens(tagged, tagged_len, key, sizeof key, other));
    CHECK(strstr(progcache_error_last(), "HMAC") != NULL);
    CHECK_RC(PROGCACHE_ECORRUPT, opens(tagged, tagged_len, key_b, sizeof key_b, k));
    CHECK_RC(PROGCACHE_ECORRUPT, opens(plain, plain_len, key, sizeof key, k));
    CHECK(strstr(progcache_error_last(), "no HMAC tag") != NULL);
    /* Without a secret: both accepted (documented), and still bound to
     * their key by the digest. */
    CHECK_OK(opens(tagged, tagged_len, key, sizeof key, NULL));
    CHECK_OK(opens(plain, plain_len, key, sizeof key, NULL));
    CHECK_RC(PROGCACHE_ECORRUPT, opens(plain, plain_len, key_b, sizeof key_b, NULL));
    CHECK(strstr(progcache_error_last(), "written for another key") != NULL);
    CHECK_RC(PROGCACHE_ECORRUPT, opens(tagged, tagged_len, key_b, sizeof key_b, NULL));

    /* Stripping the tag (and its flag) turns it into a valid untagged
     * value: fine without a secret, refused with one. */
    unsigned char *stripped = malloc(tagged_len);
    CHECK(stripped != NULL);
    memcpy(stripped, tagged, 56);
    stripped[5] = 0;
    memcpy(stripped + 56, tagged + 88, sizeof payload);
    CHECK_OK(opens(stripped, 56 + sizeof payload, key, sizeof key, NULL));
    CHECK_RC(PROGCACHE_ECORRUPT, opens(stripped, 56 + sizeof payload, key, sizeof key, k));
    free(stripped);
    free(tagged);
    free(plain);
}

/* A format 1 value, laid out as the previous progcache wrote it: magic,
 * version 1, flags, u64 length at 8, SHA-256(payload) at 16, the tag
 * (HMAC over u64le(key_len) || key || bytes 0..47 || payload) at 48. */
static unsigned char *craft_v1(size_t *len, const void *key, size_t key_len,
                               const void *payload, size_t size, int tagged)
{
    size_t header = tagged ? 80 : 48;
    unsigned char *v = calloc(1, header + size + 1);
    CHECK(v != NULL);
    memcpy(v, "pcEV", 4);
    v[4] = 1;
    v[5] = tagged ? 1 : 0;
    put_le(v + 8, size, 8);
    SHA256(payload, size, v + 16);
    if (tagged)
        expected_tag(v + 48, key, key_len, v, 48, payload, size);
    memcpy(v + header, payload, size);
    *len = header + size;
    return v;
}

static void test_format_1(progcache__envelope_key *k)
{
    const char key[] = "old-key";
    const char payload[] = "written by progcache 1";
    progcache__envelope_id id = id_of(key, sizeof key), other = id_of("x", 1);
    progcache__envelope e;
    size_t len;
    for (int tagged = 0; tagged <= 1; tagged++) {
        unsigned char *v = craft_v1(&len, key, sizeof key, payload, sizeof payload, tagged);
        CHECK_OK(progcache__envelope_open(&e, v, len, &id, NULL));
        CHECK(e.version == 1 && e.kind == PROGCACHE_KIND_UNKNOWN);
        CHECK(e.records == NULL && e.records_len == 0);
        CHECK(e.payload == v + (tagged ? 80 : 48) && e.size == sizeof payload);
        CHECK(memcmp(e.payload, payload, sizeof payload) == 0);
        /* Format 1 bound no key without a secret: that is why a get calls
         * it PROGCACHE_SEAL_NONE. With a secret its tag did. */
        CHECK_OK(progcache__envelope_open(&e, v, len, &other, NULL));
        if (tagged) {
            CHECK_OK(progcache__envelope_open(&e, v, len, &id, k));
            CHECK(e.version == 1 && e.size == sizeof payload);
            CHECK_RC(PROGCACHE_ECORRUPT, progcache__envelope_open(&e, v, len, &other, k));
        } else {
            CHECK_RC(PROGCACHE_ECORRUPT, progcache__envelope_open(&e, v, len, &id, k));
        }
        /* Damage is still found: a payload bit, the digest. */
        v[len - 1] ^= 4;
        CHECK_RC(PROGCACHE_ECORRUPT, progcache__envelope_open(&e, v, len, &id, NULL));
        v[len - 1] ^= 4;
        v[20] ^= 1;
        CHECK_RC(PROGCACHE_ECORRUPT, progcache__envelope_open(&e, v, len, &id, NULL));
        free(v);
    }
}

/* A format above 2: PROGCACHE_ENOTFOUND with its version, whatever
 * follows the version byte; 0 is no format at all. */
static void test_newer_format(void)
{
    progcache__envelope_id id = id_of("k", 1);
    progcache__envelope e;
    size_t len;
    unsigned char *v = seal(&len, "k", 1, "abc", 3, NULL);
    v[4] = 3;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache__envelope_open(&e, v, len, &id, NULL));
    CHECK(e.version == 3);
    CHECK(strstr(progcache_error_last(), "written by a newer progcache") != NULL);
    CHECK(strstr(progcache_error_last(), "version 3") != NULL);
    const unsigned char bare[] = {'p', 'c', 'E', 'V', 200};
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache__envelope_open(&e, bare, sizeof bare, &id, NULL));
    CHECK(e.version == 200);
    v[4] = 0;
    CHECK_RC(PROGCACHE_ECORRUPT, progcache__envelope_open(&e, v, len, &id, NULL));
    free(v);
}

/* Records: up to PROGCACHE_RECORDS_MAX written and read; one byte more
 * refused by seal, and a header claiming more refused by open. */
static void test_records_bound(void)
{
    unsigned char *records = calloc(1, PROGCACHE_RECORDS_MAX + 1);
    CHECK(records != NULL);
    size_t len;
    unsigned char *v = seal_full(&len, "k", 1, PROGCACHE_KIND_CUBIN, records,
                                 PROGCACHE_RECORDS_MAX, "x", 1, NULL);
    progcache__envelope_id id = id_of("k", 1);
    progcache__envelope e;
    CHECK_OK(progcache__envelope_open(&e, v, len, &id, NULL));
    CHECK(e.records_len == PROGCACHE_RECORDS_MAX && e.size == 1);
    put_le(v + 16, PROGCACHE_RECORDS_MAX + 1, 4);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache__envelope_open(&e, v, len, &id, NULL));
    CHECK(strstr(progcache_error_last(), "records") != NULL);
    free(v);

    unsigned char header[PROGCACHE__ENVELOPE_MAX_HEADER];
    progcache__envelope env = {0, PROGCACHE_KIND_CUBIN, records, PROGCACHE_RECORDS_MAX + 1,
                               (const unsigned char *)"x", 1, 0};
    CHECK_RC(PROGCACHE_EINVAL, progcache__envelope_seal(header, &len, &env, &id, NULL));
    unsigned char *value = (unsigned char *)"not touched";
    CHECK_RC(PROGCACHE_EINVAL, progcache__envelope_value(&value, &len, &env, &id, NULL));
    CHECK(value == NULL && len == 0);
    /* Out of memory for the whole value: refused, nothing handed out. */
    env.records_len = 0;
    progcache__alloc_fail_after(1);
    CHECK_RC(PROGCACHE_ENOMEM, progcache__envelope_value(&value, &len, &env, &id, NULL));
    progcache__alloc_fail_after(0);
    CHECK(value == NULL && len == 0);
    free(records);
}

/* A kind this library does not know reads as UNKNOWN. */
static void test_unknown_kind(void)
{
    size_t len;
    unsigned char *v = seal_full(&len, "k", 1, (progcache_kind)77, NULL, 0, "x", 1, NULL);
    CHECK(v[6] == 0);
    free(v);
    v = seal_full(&len, "k", 1, PROGCACHE_KIND_FATBIN, NULL, 0, "x", 1, NULL);
    progcache__envelope_id id = id_of("k", 1);
    progcache__envelope e;
    CHECK_OK(progcache__envelope_open(&e, v, len, &id, NULL));
    CHECK(e.kind == PROGCACHE_KIND_FATBIN);
    free(v);
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
        progcache__envelope e;
        progcache__envelope_id id = id_of("key", 3);
        CHECK_OK(progcache__envelope_open(&e, v, len, &id, k));
        CHECK(e.size == sizes[i]);
        CHECK(e.size == 0 || memcmp(e.payload, payload, e.size) == 0);
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
    test_format_1(k);
    test_newer_format();
    test_records_bound();
    test_unknown_kind();
    test_sizes(NULL);
    test_sizes(k);

    progcache__envelope_key_free(k);
    progcache__envelope_key_free(other);
    progcache__envelope_key_free(NULL);
    printf("test_envelope: ok\n");
    return 0;
}
