/* Internal: what the Redis store's three hiredis files share.
 *
 *   redis_conn.c   connections: the pool, connecting with timeouts, AUTH
 *                  and SELECT, running a command (SIGPIPE blocked, replies
 *                  bounded), telling failures apart, back-off, messages;
 *   redis_store.c  the store: get/put (with metadata), remove, clear,
 *                  count, total_size, the vtable, the counters;
 *   redis_lease.c  single-flight leases: Lua scripts and pub/sub;
 *   redis_reply.c  one command: its reply bounded, its deadline;
 *   redis_get.c    reading one value in parts within the value plus a
 *                  small constant (redis_get.h);
 *   redis_list.c   exists and foreach;
 *   redis_scan.c   walking the key space: clear, count, total_size;
 *   redis_probe.c  `progcache remote`: reachability, latency, the server's
 *                  memory policy, leases held now.
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
#include "remote/envelope.h"
#include "remote/put_queue.h"
#include "store/redis/redis_config.h"
#include "remote/remote_health.h"

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
    progcache__remote_health health; /* counters and back-off */
    progcache__remote_voice voice;   /* "Redis <where>", cfg.log */
    progcache__put_queue *queue;    /* NULL with SYNC_PUT or READONLY */
} progcache__redis_store;

/* Why a call failed, for counting and for the message. */
typedef struct progcache__redis_failure {
    int timeout;
    int deadline;   /* the part of timeout: the command's deadline ran out */
    int too_large;  /* the value a GET announced was longer than its limit */
    int over_bound; /* any other reply broke its bound (redis_reply.c) */
    int lost;       /* the connection was closed or reset: a retry may pass */
    progcache__remote_cause cause;
    char what[384];
} progcache__redis_failure;

/* The most one reply may cost (redis_reply.c): bytes of reply objects and,
 * apart, bytes waiting unparsed in the reader; elements of one array; how
 * deep arrays nest. value: a bulk string over the bound at the top is a
 * value too large (f->too_large: a GET), not a broken reply. */
typedef struct progcache__redis_limit {
    size_t bytes;
    size_t elements;
    unsigned int depth;
    int value;
} progcache__redis_limit;

/* PING, AUTH, SELECT, SET, DEL, SUBSCRIBE and its messages, the lease
 * scripts: 4 KiB, 8 elements, flat. */
extern const progcache__redis_limit progcache__redis_small;
/* A SCAN page and a script over one: 32 MiB, 131072 elements, 2 deep. */
extern const progcache__redis_limit progcache__redis_page;
/* INFO: 1 MiB of text. */
extern const progcache__redis_limit progcache__redis_info;

/* What a reply being read has cost so far (the reader's privdata). */
typedef struct progcache__redis_budget {
    const progcache__redis_limit *lim;
    size_t used;
    int broke;
    char why[200];
} progcache__redis_budget;

/* ---- redis_store.c ------------------------------------------------------ */

/* store as a Redis store, or NULL when it is NULL or another kind. */
progcache__redis_store *progcache__redis_store_of(const progcache_store *store);

/* ---- redis_list.c ------------------------------------------------------- */

/* The vtable's exists and foreach (version 3). */
int progcache__redis_exists(progcache_store *store, const void *key, size_t key_len);
int progcache__redis_foreach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                             void *ctx);

/* ---- redis_conn.c ------------------------------------------------------- */

/* The log hears the store through s->voice ("Redis <where>: ...") and
 * progcache__remote_tell/say (remote_health.h). */

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

/* ---- redis_reply.c ------------------------------------------------------ */

/* Make c's reader build replies within bounds, and c's socket
 * non-blocking (every wait is a poll with a deadline). 0 or -1. */
int progcache__redis_bound_reader(redisContext *c);

/* One command on c with SIGPIPE blocked, its reply within lim, the whole
 * exchange within cfg's deadline (command_timeout_ms plus the bytes moved
 * at min_rate). NULL with f filled (not counted): timeout/deadline,
 * too_large, over_bound, lost, or another failure; c is then out of step
 * with the server and must be freed. */
redisReply *progcache__redis_command(const progcache__redis_config *cfg, redisContext *c,
                                     int argc, const char **argv, const size_t *lens,
                                     const progcache__redis_limit *lim,
                                     progcache__redis_failure *f);

/* One deadline for an operation of several commands (the parts of a
 * GET): when it started, and the bytes its commands moved so far. */
typedef struct progcache__redis_clock {
    uint64_t start;
    size_t moved;
} progcache__redis_clock;

/* Start clock now, with nothing moved. */
void progcache__redis_clock_start(progcache__redis_clock *clock);

/* progcache__redis_command within clock's deadline (command_timeout_ms
 * from clock->start, plus every byte the operation moved at min_rate),
 * adding this command's bytes to clock->moved. clock NULL: a deadline of
 * its own (progcache__redis_command). */
redisReply *progcache__redis_command_timed(const progcache__redis_config *cfg, redisContext *c,
                                           int argc, const char **argv, const size_t *lens,
                                           const progcache__redis_limit *lim,
                                           progcache__redis_clock *clock,
                                           progcache__redis_failure *f);

/* "an array of 3 elements", "the status \"OK\"", "nil": what a reply was,
 * for the messages about replies of the wrong shape. */
void progcache__redis_describe(char *out, size_t size, const redisReply *r);

/* On a subscribed connection: wait up to ms for messages, each within b's
 * limit (b lives as long as the connection is read). 1: one or more came
 * (read and freed); 0: none; -1: the connection failed or broke the bound. */
int progcache__redis_await(redisContext *c, progcache__redis_budget *b, unsigned int ms);

/*
 * Run a command on a pooled connection. Returns the reply (an error reply
 * is counted and turned into NULL), or NULL with the failure counted and
 * described in f. idempotent: may be sent twice (a pooled connection found
 * dead is retried once on a fresh one). lim: the reply's bound; a GET's
 * value over it is NULL with f->too_large set, not counted as a failure
 * (the server is well, the value is not one to read). lens NULL:
 * strlen of each argument.
 */
redisReply *progcache__redis_call(progcache__redis_store *s, int argc, const char **argv,
                                  const size_t *lens, int idempotent,
                                  const progcache__redis_limit *lim,
                                  progcache__redis_failure *f);

/* progcache__redis_call with the operation's clock (NULL: its own). A
 * retry on a fresh connection stays within the same deadline. */
redisReply *progcache__redis_call_timed(progcache__redis_store *s, int argc, const char **argv,
                                        const size_t *lens, int idempotent,
                                        const progcache__redis_limit *lim,
                                        progcache__redis_clock *clock,
                                        progcache__redis_failure *f);

/* Close every idle connection (after a dead one; on free). */
void progcache__redis_pool_drop(progcache__redis_store *s);

/* ---- redis_scan.c ------------------------------------------------------- */

/* Called with each SCAN batch of names (a REDIS_REPLY_ARRAY, not empty).
 * Returns PROGCACHE_OK to go on, or an error: PROGCACHE_EREMOTE with f
 * filled by the call that failed. */
typedef int (*progcache__redis_batch_fn)(void *ctx, progcache__redis_store *s,
                                         const redisReply *names,
                                         progcache__redis_failure *f);

/* Walk every name "<prefix><kind>*" (kind "": everything under the prefix),
 * a batch at a time. PROGCACHE_OK; PROGCACHE_EREMOTE with a message naming
 * fn; what batch returned. */
int progcache__redis_scan(progcache__redis_store *s, const char *kind,
                          progcache__redis_batch_fn batch, void *ctx, const char *fn);

/* Whether k is "<prefix><kind><hex SHA-256>": an entry (kind "") or a
 * lease ("lease:") of this store. */
int progcache__redis_is_name(const progcache__redis_store *s, const char *kind,
                             const redisReply *k);

/* Delete every name under the prefix (clear). */
int progcache__redis_delete_all(progcache__redis_store *s, const char *fn);

/* Entries under the prefix and the sum of their payload sizes. */
int progcache__redis_measure(progcache__redis_store *s, uint64_t *count, uint64_t *total,
                             const char *fn);

/* ---- redis_lease.c ------------------------------------------------------ */

extern const progcache_store_lease_ops progcache__redis_lease_ops;

/* Fill out's holder and ttl_ms, and key16, from a lease's value
 * ("<token> <holder> <key16>"; an older progcache wrote the token alone)
 * and its PTTL. */
void progcache__redis_lease_parse(progcache_store_lease_info *out, char key16[17],
                                  const char *value, size_t len, long long pttl);

#endif
