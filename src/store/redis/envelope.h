/* Internal: the envelope around every value progcache keeps in a remote
 * store (Redis), checked on every read.
 *
 * A remote value can be damaged (a truncated write, a bit flipped in
 * transit or in a replica), replaced by something that is not ours (another
 * program using the same key names), or forged by anyone who can write to
 * the server. The envelope catches the first two with a length and a
 * SHA-256 of the payload; with a shared secret configured, an HMAC-SHA256
 * tag catches the third (docs/SECURITY.md).
 *
 * Layout (integers little-endian; docs/REMOTE.md has the same table):
 *
 *   offset size
 *    0      4   magic "pcEV"
 *    4      1   format version, 1
 *    5      1   flags: bit 0 = an HMAC tag follows the digest; others 0
 *    6      2   reserved, 0
 *    8      8   payload length in bytes
 *   16     32   SHA-256 of the payload
 *   48     32   HMAC-SHA256 tag (only when flag bit 0 is set)
 *   48|80  ..   the payload (the artifact bytes)
 *
 * The tag is HMAC-SHA256(secret, u64le(key_len) || key || envelope bytes
 * 0..47 || payload): it covers the cache key the caller asked for (not the
 * Redis key name, so a tagged value stays valid under another key prefix,
 * and cannot be copied to another cache key), the header (so the version,
 * flags and length cannot be altered) and the payload itself. key_len comes
 * first so no two (key, payload) pairs feed the MAC the same bytes.
 *
 * Which values are accepted:
 *  - with a secret: only values with a tag that verifies; an untagged value
 *    is rejected (anyone could have written it);
 *  - without a secret: untagged and tagged values alike, after the digest
 *    check (a reader without the secret trusts the server anyway, and this
 *    lets readers and writers adopt a secret one at a time).
 * Everything needs OpenSSL only; no hiredis. */
#ifndef PROGCACHE_STORE_ENVELOPE_H
#define PROGCACHE_STORE_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/remote.h" /* PROGCACHE_REDIS_MIN_SECRET */

#define PROGCACHE__ENVELOPE_VERSION 1
#define PROGCACHE__ENVELOPE_MAGIC "pcEV"
#define PROGCACHE__ENVELOPE_FLAG_HMAC 0x01u
#define PROGCACHE__ENVELOPE_BASE_SIZE 48 /* header and digest */
#define PROGCACHE__ENVELOPE_TAG_SIZE 32
#define PROGCACHE__ENVELOPE_MAX_HEADER                                           \
    (PROGCACHE__ENVELOPE_BASE_SIZE + PROGCACHE__ENVELOPE_TAG_SIZE)
/* A secret shorter than this is refused: HMAC is only as strong as its key. */
#define PROGCACHE__ENVELOPE_MIN_SECRET PROGCACHE_REDIS_MIN_SECRET

/* A shared secret, prepared once (the MAC fetched from OpenSSL and keyed),
 * then used by any number of threads at once: each seal/open works on a
 * private copy of the keyed context. */
typedef struct progcache__envelope_key progcache__envelope_key;

/* Prepare secret (len >= PROGCACHE__ENVELOPE_MIN_SECRET bytes). Only
 * OpenSSL's keyed context keeps it; the caller's bytes are not referenced.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (too short), PROGCACHE_ENOMEM or
 *         PROGCACHE_EIO (OpenSSL has no HMAC-SHA256); message set. */
int progcache__envelope_key_new(progcache__envelope_key **out, const void *secret, size_t len);

/* Wipe and free. NULL-safe. */
void progcache__envelope_key_free(progcache__envelope_key *key);

/* Header size for a value sealed with (tagged = 1) or without a key. */
size_t progcache__envelope_header_size(int tagged);

/*
 * Seal: write the header (and tag) for payload into out, which must hold
 * PROGCACHE__ENVELOPE_MAX_HEADER bytes; *out_len is set to the bytes
 * written. The stored value is out[0..*out_len) followed by the payload.
 * hmac NULL: no tag. key/key_len: the cache key the value is stored under.
 * @return PROGCACHE_OK or PROGCACHE_EIO/PROGCACHE_ENOMEM (OpenSSL failed).
 */
int progcache__envelope_seal(unsigned char *out, size_t *out_len, const void *key,
                             size_t key_len, const void *payload, size_t size,
                             const progcache__envelope_key *hmac);

/*
 * Open: check value (as read from the store) for key. On PROGCACHE_OK,
 * *out_payload and *out_size point into value at the payload.
 * @return PROGCACHE_OK; PROGCACHE_ECORRUPT with a message saying which
 *         check failed (too short, not an envelope, unknown version or
 *         flags, length mismatch, digest mismatch, missing tag, wrong tag);
 *         PROGCACHE_EIO/PROGCACHE_ENOMEM when OpenSSL fails.
 */
int progcache__envelope_open(const unsigned char **out_payload, size_t *out_size,
                             const void *value, size_t value_len, const void *key,
                             size_t key_len, const progcache__envelope_key *hmac);

#endif
