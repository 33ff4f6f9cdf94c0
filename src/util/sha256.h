/* Internal: SHA-256 through OpenSSL's EVP interface (FIPS-capable; no
 * hand-written hashing in progcache). */
#ifndef PROGCACHE_UTIL_SHA256_H
#define PROGCACHE_UTIL_SHA256_H

#include <stddef.h>

#define PROGCACHE_SHA256_SIZE 32

typedef struct progcache__sha256 progcache__sha256;

/* Incremental hashing. new returns NULL when out of memory or when the
 * provider offers no SHA-256 (message set). final writes 32 bytes and
 * frees the context; free alone discards it (NULL-safe). */
progcache__sha256 *progcache__sha256_new(void);
int progcache__sha256_update(progcache__sha256 *ctx, const void *data, size_t len);
int progcache__sha256_final(progcache__sha256 *ctx, unsigned char out[PROGCACHE_SHA256_SIZE]);
void progcache__sha256_free(progcache__sha256 *ctx);

/* One shot. PROGCACHE_OK or a negative code with a message. */
int progcache__sha256_oneshot(unsigned char out[PROGCACHE_SHA256_SIZE], const void *data,
                              size_t len);

/* One shot over two pieces, a then b, as if they were one buffer (a
 * short prefix and a long body: one pass over the body). */
int progcache__sha256_two(unsigned char out[PROGCACHE_SHA256_SIZE], const void *a, size_t a_len,
                          const void *b, size_t b_len);

/* Lowercase hex of len bytes into out (2*len+1 bytes, NUL-terminated). */
void progcache__hex(char *out, const unsigned char *bytes, size_t len);

/* The value of one hex digit (either case), or -1. */
int progcache__hex_digit(char c);

/* Whether s is n lowercase hex digits (an entry's name, a temp name's
 * tail). */
int progcache__is_hex(const char *s, size_t n);

#endif
