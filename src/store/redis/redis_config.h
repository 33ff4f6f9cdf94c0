/* Internal: the Redis store's configuration, checked and resolved from
 * progcache_redis_options (URL parsed, defaults applied, secret prepared).
 * Needs no hiredis, so it is always built and tested. */
#ifndef PROGCACHE_STORE_REDIS_CONFIG_H
#define PROGCACHE_STORE_REDIS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/remote.h"
#include "remote/envelope.h"

#define PROGCACHE__REDIS_DEFAULT_PREFIX "progcache:"
#define PROGCACHE__REDIS_MAX_PREFIX 200
#define PROGCACHE__REDIS_DEFAULT_PORT 6379
/* Room for the description of any address: a socket path as long as a
 * path can be (PATH_MAX), a host name and a user name. */
#define PROGCACHE__REDIS_WHERE_SIZE (4096 + 512)

/* A parsed server address. Strings are owned (progcache__malloc). */
typedef struct progcache__redis_url {
    char *host;     /* TCP host (brackets of an IPv6 address removed), or NULL */
    int port;       /* TCP port */
    char *path;     /* unix socket path, or NULL */
    char *user;     /* ACL user, or NULL */
    char *password; /* NULL: no AUTH */
    unsigned int db;
} progcache__redis_url;

/* Parse url (forms in progcache/remote.h). On failure the message quotes
 * the url with any password masked and says what to write instead.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL or PROGCACHE_ENOMEM. */
int progcache__redis_url_parse(progcache__redis_url *out, const char *url);

/* Free the strings and zero u. NULL-safe. */
void progcache__redis_url_release(progcache__redis_url *u);

/* "redis://user:***@host:port/db" or "unix:/path?db=N": the address for
 * messages, never the password. */
void progcache__redis_url_describe(char *out, size_t size, const progcache__redis_url *u);

typedef struct progcache__redis_config {
    progcache__redis_url url;
    char where[PROGCACHE__REDIS_WHERE_SIZE]; /* progcache__redis_url_describe(url) */
    char prefix[PROGCACHE__REDIS_MAX_PREFIX + 1];
    size_t prefix_len;
    unsigned int connect_timeout_ms;
    unsigned int command_timeout_ms;
    unsigned int ttl_seconds;
    unsigned int flags;
    unsigned int failures_before_backoff;
    unsigned int backoff_ms;
    uint64_t max_queue_bytes;
    uint64_t max_artifact_size; /* the largest payload written or read */
    uint64_t min_rate;          /* bytes/s a command's deadline allows (redis_reply.c) */
    progcache__envelope_key *hmac; /* NULL: no secret */
    progcache_log_fn log;
    void *log_ctx;
} progcache__redis_config;

/* Check opts and fill out with every default applied.
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (message names the field) or
 *         PROGCACHE_ENOMEM; out needs progcache__redis_config_release
 *         only on success. */
int progcache__redis_config_init(progcache__redis_config *out,
                                 const progcache_redis_options *opts);

void progcache__redis_config_release(progcache__redis_config *cfg);

#endif
