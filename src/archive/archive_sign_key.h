/* Internal: the Ed25519 keys of signed bundles, shared by archive_sign.c
 * (which defines them) and archive_verify.c. */
#ifndef PROGCACHE_STORE_ARCHIVE_SIGN_KEY_H
#define PROGCACHE_STORE_ARCHIVE_SIGN_KEY_H

#include <openssl/evp.h>
#include <stddef.h>

/* Read an Ed25519 key from PEM text (pem, len bytes): a private key, or
 * with is_public a public key ("-----BEGIN PUBLIC KEY-----"). No passphrase
 * is asked for. PROGCACHE_OK, or PROGCACHE_EINVAL (not PEM, not a key of
 * that half, not Ed25519: the message says which and how to make one). */
int progcache__bundle_key(EVP_PKEY **out, const void *pem, size_t len, int is_public);

/* The key's signer name: lowercase hex of SHA-256 over its 32-byte raw
 * public key. */
int progcache__bundle_signer(char out[65], EVP_PKEY *key);

#endif
