/* SHA-256 glue over OpenSSL libcrypto. */
#include "sha256.h"

#include <openssl/evp.h>
#include <pthread.h>

#include "error.h"
#include "progcache/common.h"

/* OpenSSL 3 resolves EVP_sha256() through a provider on every
 * EVP_DigestInit (an "implicit fetch": a locked lookup in its method store).
 * OpenSSL's own advice for code that hashes many times is to fetch the
 * algorithm once and pass that around, which is what this does: the hit
 * path hashes twice per lookup. The fetched method lives as long as the
 * process. If the fetch fails (no provider offers it), the implicit path
 * is kept, and reports the problem where it happens. */
static const EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    sha256_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
#endif
    if (!sha256_md)
        sha256_md = EVP_sha256();
}

static const EVP_MD *sha256(void)
{
    pthread_once(&sha256_once, fetch_sha256);
    return sha256_md;
}

progcache__sha256 *progcache__sha256_new(void)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md) {
        progcache__error(PROGCACHE_ENOMEM, "out of memory creating a SHA-256 context");
        return NULL;
    }
    if (EVP_DigestInit_ex(md, sha256(), NULL) != 1) {
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

PROGCACHE_HOT
int progcache__sha256_oneshot(unsigned char out[PROGCACHE_SHA256_SIZE], const void *data,
                              size_t len)
{
    unsigned int n = 0;
    if (EVP_Digest(data, len, out, &n, sha256(), NULL) != 1 || n != PROGCACHE_SHA256_SIZE)
        return progcache__error(PROGCACHE_EIO, "OpenSSL SHA-256 failed");
    return PROGCACHE_OK;
}

/* The same one context EVP_Digest would make, fed twice. */
PROGCACHE_HOT
int progcache__sha256_two(unsigned char out[PROGCACHE_SHA256_SIZE], const void *a, size_t a_len,
                          const void *b, size_t b_len)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int n = 0;
    int ok = md && EVP_DigestInit_ex(md, sha256(), NULL) == 1 &&
             EVP_DigestUpdate(md, a, a_len) == 1 && EVP_DigestUpdate(md, b, b_len) == 1 &&
             EVP_DigestFinal_ex(md, out, &n) == 1 && n == PROGCACHE_SHA256_SIZE;
    EVP_MD_CTX_free(md);
    return ok ? PROGCACHE_OK : progcache__error(PROGCACHE_EIO, "OpenSSL SHA-256 failed");
}

PROGCACHE_HOT
void progcache__hex(char *out, const unsigned char *bytes, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * len] = '\0';
}

int progcache__hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int progcache__is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}
