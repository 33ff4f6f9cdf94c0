/* Internal: what the HTTP/S3 tier is told (a URL, the environment) made
 * into what its transfers need (http_config.c). No libcurl here: the
 * build without it still parses, so its refusal names a valid URL. */
#ifndef PROGCACHE_STORE_HTTP_CONFIG_H
#define PROGCACHE_STORE_HTTP_CONFIG_H

#include <stdint.h>

#include "progcache/sys/store.h"

#include "buf.h"

typedef struct progcache__http_config {
    char *base;         /* object URLs: base + 64 hex digits; ends in '/' */
    char *where;        /* the URL as messages show it: no query, no credential */
    char *ca_file;      /* remote_ca or PROGCACHE_REMOTE_CA, or NULL: the system's CAs */
    progcache_buf ca;   /* its bytes, read when the tier was opened (remote_file.h) */
    char *userpwd;      /* basic "user:password", or S3's "key-id:secret"; or NULL */
    char *bearer;       /* a bearer token, or NULL */
    char *sigv4;        /* "aws:amz:REGION:s3" for S3, else NULL */
    char *token_header; /* "x-amz-security-token: ..." (AWS_SESSION_TOKEN), or NULL */
    int s3;             /* the URL was s3:// (listing: ListObjectsV2) */
    char *root;         /* S3: the bucket's URL, for ListObjectsV2 */
    char *prefix;       /* S3: the key prefix ("" or ending in '/') */
    unsigned int timeout_ms; /* connect, and each operation's fixed part */
    uint64_t max_artifact_size;
    uint64_t min_rate; /* bytes per second an operation's deadline allows */
    progcache_log_fn log;
    void *log_ctx;
} progcache__http_config;

/* Parse url and read the credentials it needs, and the CA: ca_file (the
 * remote_ca setting), else $PROGCACHE_REMOTE_CA, else none. PROGCACHE_OK or
 * PROGCACHE_EINVAL/ENOMEM with a message naming where, never a secret. */
int progcache__http_config_init(progcache__http_config *c, const char *url,
                                const progcache_store_params *params, uint64_t min_rate,
                                const char *ca_file, const char *ca_label);

/* Wipe the credentials and free everything. NULL-safe, idempotent. */
void progcache__http_config_release(progcache__http_config *c);

#endif
