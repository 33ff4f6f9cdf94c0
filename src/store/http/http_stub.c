/* The HTTP/S3 tier without libcurl: its URLs are refused, saying how to
 * get the tier (http.h). Compiles to nothing when the build found libcurl. */
#include "store/http/http.h"

#ifndef PROGCACHE_HAVE_CURL
#include "error.h"
#include "url_mask.h"

int progcache__http_store_new(progcache_store **out, const char *url,
                              const progcache_store_params *params, const void *secret,
                              size_t secret_len, uint64_t min_rate, const char *ca_file,
                              const char *ca_label)
{
    char shown[256];
    *out = NULL;
    progcache__url_mask(shown, sizeof shown, url);
    return progcache__error(PROGCACHE_EINVAL,
                            "the remote tier %s: this progcache was built without libcurl, so "
                            "it has no HTTP or S3 tier; install libcurl (Debian: "
                            "libcurl4-openssl-dev) and rebuild, or use a redis:// tier",
                            shown);
}
#endif
