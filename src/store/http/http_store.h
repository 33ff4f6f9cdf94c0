/* Internal: the HTTP/S3 store's state, shared by its files: http_store.c
 * (the vtable), http_xfer.c (one request through libcurl), http_list.c
 * (listing). The machinery every remote tier needs comes from src/remote/:
 * the envelope and its HMAC (envelope.h), the put queue (put_queue.h),
 * counters, back-off and the told-once voice (remote_health.h). */
#ifndef PROGCACHE_STORE_HTTP_STORE_H
#define PROGCACHE_STORE_HTTP_STORE_H

#include <pthread.h>
#include <sys/types.h>

#include "buf.h"
#include "error.h"
#include "store/http/http_config.h"
#include "remote/envelope.h"
#include "remote/put_queue.h"
#include "remote/remote_health.h"

#define PROGCACHE__HTTP_POOL 8 /* idle libcurl handles kept (their connections) */

typedef struct progcache__http_store {
    progcache_store base;
    progcache__http_config cfg;
    progcache__remote_health health;
    progcache__remote_voice voice; /* "remote tier <where>", cfg.log */
    progcache__put_queue *queue;
    progcache__envelope_key *hmac;
    pthread_mutex_t pool_lock;
    void *pool[PROGCACHE__HTTP_POOL]; /* CURL * */
    int pool_n;
    pid_t pid; /* the process that made the pool: a fork() child leaves it */
} progcache__http_store;

/* What a request that did not reach an answer was. */
typedef struct progcache__http_failure {
    progcache__remote_cause cause;
    int timeout; /* ran out of its deadline */
    int reached; /* the server answered (an error status): no back-off */
    char what[512];
} progcache__http_failure;

/*
 * One request: method ("GET", "HEAD", "PUT", "DELETE") on url. body
 * (body_len bytes) is sent for PUT; out (may be NULL) receives the reply's
 * body, at most bound bytes: a longer one (whatever Content-Length says)
 * stops the transfer. extra: one more header line, or NULL. The deadline
 * is the tier's timeout plus the bytes moved at min_rate.
 * @return the HTTP status (200..599), f filled by
 *         progcache__http_status_failure when it is 300 or more; or 0 with
 *         f filled (no answer, or an answer over its bound). Nothing is
 *         counted: the caller counts and tells.
 */
long progcache__http_request(progcache__http_store *s, const char *method, const char *url,
                             const void *body, size_t body_len, progcache_buf *out,
                             uint64_t bound, const char *extra, progcache__http_failure *f);

/* A failed request: counted (errors, timeouts, deadlines, over_bound),
 * told, back-off armed when it is one failure too many. */
void progcache__http_failed(progcache__http_store *s, const progcache__http_failure *f);

/* A status that is not the operation's success: filled into f (reached for
 * 4xx; 5xx counts towards back-off). body: the reply (S3 names its error
 * code there), or NULL. */
void progcache__http_status_failure(progcache__http_failure *f, const char *op, long status,
                                    const progcache_buf *body);

/* S3's leases by conditional create (http_lease.c). */
extern const progcache_store_lease_ops progcache__http_lease_ops;

/* Call fn for every object under the prefix (http_list.c). */
int progcache__http_foreach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                            void *ctx);

#endif
