/* Internal: the envelope around every value progcache keeps in a remote
 * store (Redis), checked on every read.
 *
 * A remote value can be damaged (a truncated write, a bit flipped in
 * transit or in a replica), replaced by something that is not ours (another
 * program using the same key names), copied under another key's name, or
 * forged by anyone who can write to the server. The envelope catches the
 * first three with lengths and a SHA-256 that covers the key's hash, the
 * entry's records and the payload; with a shared secret configured, an
 * HMAC-SHA256 tag catches the fourth (docs/SECURITY.md).
 *
 * Layout of format 2, the one written (integers little-endian;
 * docs/REMOTE.md and docs/FORMAT.md have the same table):
 *
 *   offset size
 *    0      4   magic "pcEV"
 *    4      1   format version, 2
 *    5      1   flags: bit 0 = an HMAC tag follows the digest; others 0
 *    6      1   kind of the payload (progcache_kind; 0 = unknown)
 *    7      1   reserved, 0
 *    8      8   payload length in bytes
 *   16      4   records length in bytes (at most PROGCACHE_RECORDS_MAX)
 *   20      4   reserved, 0
 *   24     32   digest: SHA-256(bytes 0..23 with byte 5 read as 0 ||
 *               SHA-256(key) || records || payload)
 *   56     32   HMAC-SHA256 tag (only when flag bit 0 is set)
 *   56|88  ..   the records (progcache_entry_meta.records), then the payload
 *
 * The digest binds the value to its cache key without any secret: a value
 * copied to another key's Redis name fails it. The flags byte is left out
 * so that a tag can be added or stripped without recomputing it (whether a
 * tag is required is the reader's rule, below).
 *
 * The tag is HMAC-SHA256(secret, u64le(key_len) || key || bytes 0..55 ||
 * records || payload): it covers the cache key the caller asked for (not
 * the Redis key name, so a tagged value stays valid under another key
 * prefix), the whole header (version, flags, kind, lengths, digest), the
 * records and the payload. key_len comes first so no two (key, rest) pairs
 * feed the MAC the same bytes.
 *
 * Format 1 (written by earlier progcache, still read): bytes 0..7 as above
 * with version 1 and bytes 6..7 reserved, the payload length at 8, the
 * SHA-256 of the payload alone at 16, the tag (HMAC over u64le(key_len) ||
 * key || bytes 0..47 || payload) at 48, the payload at 48 or 80. No kind,
 * no records, and without a secret nothing binds it to its key. Every
 * format keeps the magic, the version byte and the payload length where
 * they are (bytes 0..15): the Redis store's size script reads only those.
 *
 * Which values are accepted:
 *  - with a secret: only values with a tag that verifies; an untagged value
 *    is rejected (anyone could have written it);
 *  - without a secret: untagged and tagged values alike, after the digest
 *    check (a reader without the secret trusts the server anyway, and this
 *    lets readers and writers adopt a secret one at a time);
 *  - a version above 2 is not damage: a newer progcache wrote it. It is not
 *    read (PROGCACHE_ENOTFOUND, below), so the caller can count it apart.
 * Everything needs OpenSSL only; no hiredis. */
#ifndef PROGCACHE_REMOTE_ENVELOPE_H
#define PROGCACHE_REMOTE_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/remote.h" /* PROGCACHE_REDIS_MIN_SECRET */
#include "progcache/store.h"  /* progcache_kind, PROGCACHE_RECORDS_MAX */

#define PROGCACHE__ENVELOPE_VERSION 2 /* the format written; 1 is still read */
#define PROGCACHE__ENVELOPE_MAGIC "pcEV"
#define PROGCACHE__ENVELOPE_FLAG_HMAC 0x01u
#define PROGCACHE__ENVELOPE_V1_BASE_SIZE 48 /* format 1: header and digest */
#define PROGCACHE__ENVELOPE_BASE_SIZE 56    /* format 2: header and digest */
#define PROGCACHE__ENVELOPE_TAG_SIZE 32
#define PROGCACHE__ENVELOPE_MAX_HEADER                                           \
    (PROGCACHE__ENVELOPE_BASE_SIZE + PROGCACHE__ENVELOPE_TAG_SIZE)
#define PROGCACHE__ENVELOPE_HASH_SIZE 32 /* SHA-256 of the key */
/* A secret shorter than this is refused: HMAC is only as strong as its key. */
#define PROGCACHE__ENVELOPE_MIN_SECRET PROGCACHE_REDIS_MIN_SECRET

/* A shared secret, prepared once (the MAC fetched from OpenSSL and keyed),
 * then used by any number of threads at once: each seal/open works on a
 * private copy of the keyed context. */
typedef struct progcache__envelope_key progcache__envelope_key;

/* The cache key a value is stored under: its bytes (the tag covers them)
 * and their SHA-256 (the digest covers it; the Redis name is its hex). */
typedef struct progcache__envelope_id {
    const void *key;
    size_t key_len;
    unsigned char hash[PROGCACHE__ENVELOPE_HASH_SIZE];
} progcache__envelope_id;

/* What a value holds besides its key. Filled by the caller for a seal
 * (version ignored), by open for a read: then the pointers point into the
 * value read. */
typedef struct progcache__envelope {
    unsigned int version;       /* the format read: 1 or 2 */
    progcache_kind kind;        /* UNKNOWN in format 1, or a kind this
                                   library does not know */
    const unsigned char *records; /* none (NULL, 0) in format 1 */
    size_t records_len;
    const unsigned char *payload;
    size_t size;
    int bad_tag; /* set by a failed open: the HMAC tag was missing or wrong */
} progcache__envelope;

/* Prepare secret (len >= PROGCACHE__ENVELOPE_MIN_SECRET bytes). Only
 * OpenSSL's keyed context keeps it; the caller's bytes are not referenced.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (too short), PROGCACHE_ENOMEM or
 *         PROGCACHE_EIO (OpenSSL has no HMAC-SHA256); message set. */
int progcache__envelope_key_new(progcache__envelope_key **out, const void *secret, size_t len);

/* Wipe and free. NULL-safe. */
void progcache__envelope_key_free(progcache__envelope_key *key);

/* Fill id for key (its SHA-256). PROGCACHE_OK or an OpenSSL failure. */
int progcache__envelope_id_init(progcache__envelope_id *id, const void *key, size_t key_len);

/* Header size of format 2 for a value sealed with (tagged = 1) or without
 * a key. */
size_t progcache__envelope_header_size(int tagged);

/*
 * Seal (format 2): write the header (and tag) for env into out, which must
 * hold PROGCACHE__ENVELOPE_MAX_HEADER bytes; *out_len is set to the bytes
 * written. The stored value is out[0..*out_len), then env->records, then
 * env->payload. hmac NULL: no tag.
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (records over
 *         PROGCACHE_RECORDS_MAX); PROGCACHE_EIO/PROGCACHE_ENOMEM (OpenSSL
 *         failed).
 */
int progcache__envelope_seal(unsigned char *out, size_t *out_len, const progcache__envelope *env,
                             const progcache__envelope_id *id,
                             const progcache__envelope_key *hmac);

/*
 * The whole stored value of format 2 in one allocation: the header (and
 * tag) as seal writes it, then env->records, then env->payload. Every
 * remote tier stores exactly these bytes. *out is freed with
 * progcache__free; NULL on failure.
 * @return as seal, or PROGCACHE_ENOMEM (message set).
 */
int progcache__envelope_value(unsigned char **out, size_t *out_len,
                              const progcache__envelope *env, const progcache__envelope_id *id,
                              const progcache__envelope_key *hmac);

/*
 * Open: check value (as read from the store) for the key id names. On
 * PROGCACHE_OK, out says what it holds; its pointers point into value.
 * A value of format 1 is accepted by its own rules (out->version 1).
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND: a format newer than this
 *         library's (out->version says which), written by a newer
 *         progcache, not read; PROGCACHE_ECORRUPT with a message saying
 *         which check failed (too short, not an envelope, unknown version
 *         or flags, length mismatch, digest mismatch, missing tag, wrong
 *         tag); PROGCACHE_EIO/PROGCACHE_ENOMEM when OpenSSL fails.
 */
int progcache__envelope_open(progcache__envelope *out, const void *value, size_t value_len,
                             const progcache__envelope_id *id,
                             const progcache__envelope_key *hmac);

/*
 * Length: from the first have bytes of a value (at least 24), the length
 * of the whole value its header announces (*total: header, tag, records
 * and payload), its payload length (*size) and the length of its header
 * and tag (*header_len), so that a reader can check the bound and
 * allocate once before reading the rest. The checks open makes on these
 * bytes are made here with the same messages; open still checks it all.
 * @return PROGCACHE_OK; PROGCACHE_ENOTFOUND: a newer format (as open);
 *         PROGCACHE_ECORRUPT with a message.
 */
int progcache__envelope_length(uint64_t *total, uint64_t *size, size_t *header_len,
                               const void *head, size_t have);

#endif
