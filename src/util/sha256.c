/* SHA-256 glue over OpenSSL libcrypto. */
#include "sha256.h"

#include <openssl/evp.h>

#include "error.h"
#include "progcache/common.h"

/* EVP_sha256() returns a static method table that OpenSSL 3 resolves
 * through the default (or FIPS) provider, so no per-call fetch is needed. */
progcache__sha256 *progcache__sha256_new(void)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md) {
        progcache__error(PROGCACHE_ENOMEM, "out of memory creating a SHA-256 context");
        return NULL;
    }
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        progcache__error(PROGCACHE_EIO, "OpenSSL refused to initialise SHA-256 "
                                        "(is a crypto provider with SHA-256 loaded?)");
        return NULL;
    }
    /* progcache__sha256 is an opaque name for OpenSSL's context. */
    return (progcache__sha256 *)md;
}

int progcache__sha256_update(progcache__sha256 *ctx, const void *data, size_t len)
{
    if (len == 0)
        return PROGCACHE_OK;
    if (EVP_DigestUpdate((EVP_MD_CTX *)ctx, data, len) != 1)
        return progcache__error(PROGCACHE_EIO, "OpenSSL SHA-256 update failed");
    return PROGCACHE_OK;
}

int progcache__sha256_final(progcache__sha256 *ctx, unsigned char out[PROGCACHE_SHA256_SIZE])
{
    unsigned int n = 0;
    int ok = EVP_DigestFinal_ex((EVP_MD_CTX *)ctx, out, &n) == 1 && n == PROGCACHE_SHA256_SIZE;
    EVP_MD_CTX_free((EVP_MD_CTX *)ctx);
    return ok ? PROGCACHE_OK : progcache__error(PROGCACHE_EIO, "OpenSSL SHA-256 final failed");
}

void progcache__sha256_free(progcache__sha256 *ctx) { EVP_MD_CTX_free((EVP_MD_CTX *)ctx); }

int progcache__sha256_oneshot(unsigned char out[PROGCACHE_SHA256_SIZE], const void *data,
                              size_t len)
{
    unsigned int n = 0;
    if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 || n != PROGCACHE_SHA256_SIZE)
        return progcache__error(PROGCACHE_EIO, "OpenSSL SHA-256 failed");
    return PROGCACHE_OK;
}

void progcache__hex(char *out, const unsigned char *bytes, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * len] = '\0';
}
