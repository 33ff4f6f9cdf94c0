/* Internal: the HTTP(S) and S3 tier (docs/REMOTE.md, "HTTP and S3"), as the
 * cache opens it: PROGCACHE_REMOTE=http://host:port/prefix/, https://...,
 * or s3://BUCKET/PREFIX?endpoint=URL&region=REGION. Each entry is one
 * object named by the 64 hex digits of SHA-256(key) under the prefix,
 * holding the remote envelope (remote/envelope.h). Built on
 * libcurl when the build found it (PROGCACHE_HAVE_CURL); without it the
 * tier's URLs are refused with a message saying how to get it. */
#ifndef PROGCACHE_STORE_HTTP_H
#define PROGCACHE_STORE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/sys/store.h"

/* 1 when the len bytes of scheme ("http", "https", "s3") are this tier's. */
int progcache__http_scheme(const char *scheme, size_t len);

/* Open the tier url names. secret (secret_len >= 16 bytes, or NULL): the
 * shared secret of the envelope's HMAC (PROGCACHE_REMOTE_SECRET_FILE).
 * min_rate: bytes per second a transfer's deadline allows (0: 1 MiB/s).
 * ca_file: the remote_ca setting (NULL: $PROGCACHE_REMOTE_CA, else the
 * system's CAs), read now, through one descriptor, with its checks;
 * ca_label names it in messages ("remote_ca (<dir>/progcache/config:2)").
 * @return PROGCACHE_OK; PROGCACHE_EINVAL (a bad URL, a credentials or CA
 *         file that cannot be read; built without libcurl), message set,
 *         never showing a credential. */
int progcache__http_store_new(progcache_store **out, const char *url,
                              const progcache_store_params *params, const void *secret,
                              size_t secret_len, uint64_t min_rate, const char *ca_file,
                              const char *ca_label);

#endif
