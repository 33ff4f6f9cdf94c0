/* Internal: what the Redis store's three hiredis files share.
 *
 *   redis_conn.c   connections: the pool, connecting with timeouts, AUTH
 *                  and SELECT, running a command (SIGPIPE blocked, replies
 *                  bounded), telling failures apart, back-off, messages;
 *   redis_store.c  the store: get/put (with metadata), remove, clear,
 *                  count, total_size, the vtable, the counters;
 *   redis_lease.c  single-flight leases: Lua scripts and pub/sub.
 *
 * Only these include hiredis; they are built only when it was found
 * (src/CMakeLists.txt), and redis_stub.c stands in otherwise. */
#ifndef PROGCACHE_STORE_REDIS_STORE_H
#define PROGCACHE_STORE_REDIS_STORE_H

#include <hiredis/hiredis.h>
#include <pthread.h>

#include "error.h"
#include "progcache/remote.h"
#include "progcache/sys/store.h"
#include "store/redis/envelope.h"
#include "store/redis/put_queue.h"
#include "store/redis/redis_config.h"
#include "store/redis/redis_health.h"

#define PROGCACHE__REDIS_POOL_MAX 16
#define PROGCACHE__REDIS_HEX_LEN (2 * PROGCACHE__ENVELOPE_HASH_SIZE)
/* prefix + "lease:" + hex digest + NUL */
#define PROGCACHE__REDIS_NAME_SIZE (PROGCACHE__REDIS_MAX_PREFIX + 6 + PROGCACHE__REDIS_HEX_LEN + 1)

typedef struct progcache__redis_store {
    progcache_store base; /* first: a progcache_store * is a progcache__redis_store * */
    progcache__redis_config cfg;
    pthread_mutex_t pool_lock;
    redisContext *idle[PROGCACHE__REDIS_POOL_MAX];
    size_t num_idle;
    progcache__redis_health health; /* counters and back-off */
    progcache__put_queue *queue;    /* NULL with SYNC_PUT or READONLY */
} progcache__redis_store;

/* Why a call failed, for counting and for the message. */
typedef struct progcache__redis_failure {
    int timeout;
    int too_large; /* the reply was longer than the caller's limit */
    char what[256];
} progcache__redis_failure;

/* ---- redis_store.c ------------------------------------------------------ */

/* store as a Redis store, or NULL when it is NULL or another kind. */
progcache__redis_store *progcache__redis_store_of(const progcache_store *store);

/* ---- redis_conn.c ------------------------------------------------------- */

/* Tell the log callback, prefixed with "Redis <where>: ". */
void progcache__redis_log(const progcache__redis_store *s, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(3, 4);

/* 1 (and counted as skipped) while the store is backing off. */
int progcache__redis_off(progcache__redis_store *s);

/* A failed call, counted (back-off included) and told to the log.
 * reached: an error reply, from a server that is up and answering. */
void progcache__redis_note_failure(progcache__redis_store *s,
                                   const progcache__redis_failure *f, int reached);

/* PROGCACHE_EREMOTE with "<fn>: Redis <where>: <what failed>", or with
 * "not contacted, backing off". */
int progcache__redis_remote_error(const progcache__redis_store *s, const char *fn,
                                  const progcache__redis_failure *f);
int progcache__redis_off_error(const progcache__redis_store *s, const char *fn);

/* "<prefix><kind><hex>": kind "" (an entry), "lease:" or "done:". Returns
 * its length. */
size_t progcache__redis_name(char out[PROGCACHE__REDIS_NAME_SIZE],
                             const progcache__redis_store *s, const char *kind,
                             const char *hex);

/* Hex SHA-256 of key: Redis names are safe for any key bytes. */
int progcache__redis_key_hex(char hex[PROGCACHE__REDIS_HEX_LEN + 1], const void *key,
                             size_t key_len);

/* A new connection, authenticated and on the right database, not pooled;
 * NULL with f filled (not counted). */
redisContext *progcache__redis_connect(progcache__redis_store *s, progcache__redis_failure *f);

/* One command on c with SIGPIPE blocked. *err gets the errno of a failure.
 * limit: 0, or the largest reply read (a longer one is NULL with
 * f->too_large set; c is then out of step with the server). */
redisReply *progcache__redis_command(redisContext *c, int argc, const char **argv,
                                     const size_t *lens, size_t limit,
                                     progcache__redis_failure *f, int *err);

/*
 * Run a command on a pooled connection. Returns the reply (an error reply
 * is counted and turned into NULL), or NULL with the failure counted and
 * described in f. idempotent: may be sent twice (a pooled connection found
 * dead is retried once on a fresh one). limit: 0, or the largest reply
 * read; a longer one is NULL with f->too_large set, not counted as a
 * failure (the server is well, the value is not one to read). lens NULL:
 * strlen of each argument.
 */
redisReply *progcache__redis_call(progcache__redis_store *s, int argc, const char **argv,
                                  const size_t *lens, int idempotent, size_t limit,
                                  progcache__redis_failure *f);

/* Close every idle connection (after a dead one; on free). */
void progcache__redis_pool_drop(progcache__redis_store *s);

/* ---- redis_lease.c ------------------------------------------------------ */

extern const progcache_store_lease_ops progcache__redis_lease_ops;

#endif
