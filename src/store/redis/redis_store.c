/* The Redis store (progcache/remote.h): the only file that uses hiredis.
 *
 * Failure is a miss. A cache in front of a compiler must never be slower or
 * less available than compiling, so every remote failure (no server, a
 * timeout, a lost connection, a value that fails its checks) ends as a
 * miss or a dropped write, is counted, and is told to the log callback.
 * Calls are bounded by the connect and command timeouts, and after a few
 * failures in a row the store switches itself off for a while (back-off),
 * so a dead server costs one clock read per call, not a timeout.
 *
 * Connections: a hiredis context is not thread-safe, so each call takes one
 * from a small pool (one mutex, held only to pop or push) and gives it back
 * after; a new one is made when none is idle. A context that failed is
 * never reused: after a timeout the server may still answer the old
 * command, and that reply would be read as the answer to the next one.
 * When a connection dies (EOF, reset), the idle ones probably did too (a
 * restarted server), so they are all dropped, and an idempotent command
 * that found its pooled connection dead is tried once on a fresh one.
 *
 * SIGPIPE: hiredis writes with plain write(), which raises SIGPIPE on a
 * connection the server closed, and a library must not change the
 * process's signal dispositions. Each command runs with SIGPIPE blocked in
 * the calling thread; a SIGPIPE it raised is consumed before unblocking.
 *
 * Single-flight leases and their Lua scripts are at the end; the protocol
 * is described in progcache/remote.h and docs/REMOTE.md. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "sha256.h"
#include "progcache/remote.h"
#include "progcache/sys/store.h"
#include "store/redis/envelope.h"
#include "store/redis/put_queue.h"
#include "store/redis/redis_config.h"
#include "store/redis/redis_health.h"

#define POOL_MAX 16
/* Redis refuses bulk strings over proto-max-bulk-len, 512 MiB by default. */
#define MAX_VALUE ((size_t)512 << 20)
#define HEX_LEN (2 * PROGCACHE_SHA256_SIZE)
/* prefix + "lease:" + hex digest + NUL */
#define NAME_SIZE (PROGCACHE__REDIS_MAX_PREFIX + 6 + HEX_LEN + 1)
#define SCAN_COUNT "1000"
/* Longest sleep between two looks at a lease while subscribed: only a lost
 * notification makes a waiter rely on it. */
#define WAIT_STEP_MAX_MS 500

typedef struct redis_store {
    progcache_store base; /* first: a progcache_store * is a redis_store * */
    progcache__redis_config cfg;
    pthread_mutex_t pool_lock;
    redisContext *idle[POOL_MAX];
    size_t num_idle;
    progcache__redis_health health; /* counters and back-off */
    progcache__put_queue *queue;    /* NULL with SYNC_PUT or READONLY */
} redis_store;

/* Why a call failed, for counting and for the message. */
typedef struct failure {
    int timeout;
    int too_large; /* the reply was longer than the caller's limit */
    char what[256];
} failure;

static void redis_free(progcache_store *store);
static int redis_flush(progcache_store *store);
static const progcache_store_stats_ops redis_stats_ops;
static const progcache_store_lease_ops redis_lease_ops;

/* ---- small helpers ----------------------------------------------------- */

static uint64_t now_ms(void) { return progcache__redis_now_ms(); }

static struct timeval to_timeval(unsigned int ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

static void count(redis_store *s, progcache__redis_counter c)
{
    progcache__redis_count(&s->health, c);
}

static void slog(const redis_store *s, int level, const char *fmt, ...) PROGCACHE_PRINTF(3, 4);
static void slog(const redis_store *s, int level, const char *fmt, ...)
{
    if (!s->cfg.log)
        return;
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "Redis %s: ", s->cfg.where);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg)
        vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    s->cfg.log(s->cfg.log_ctx, level, msg);
}

static redis_store *as_redis(const progcache_store *store)
{
    return store && store->free == redis_free ? (redis_store *)store : NULL;
}

/* hex SHA-256 of the key: Redis names are safe for any key bytes. */
static int key_hash(char hex[HEX_LEN + 1], const void *key, size_t key_len)
{
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    int rc = progcache__sha256_oneshot(digest, key, key_len);
    if (!rc)
        progcache__hex(hex, digest, sizeof digest);
    return rc;
}

/* <prefix><kind><hex>, kind "" (entry), "lease:" or "done:". */
static size_t make_name(char out[NAME_SIZE], const redis_store *s, const char *kind,
                        const char *hex)
{
    int n = snprintf(out, NAME_SIZE, "%s%s%s", s->cfg.prefix, kind, hex);
    return (size_t)n;
}

/* The thread's last error, kept across work whose messages must not leak
 * out of a call that reports a plain miss. */
typedef struct saved_error {
    int code;
    char text[512];
} saved_error;

static void error_save(saved_error *e)
{
    e->code = progcache_error_code();
    if (e->code) /* usually 0: then a hit copies nothing */
        snprintf(e->text, sizeof e->text, "%s", progcache_error_last());
}

static void error_restore(const saved_error *e)
{
    if (e->code)
        progcache__error(e->code, "%s", e->text);
    else
        progcache_error_clear();
}

/* ---- failure accounting and back-off ----------------------------------- */

/* 1 (and counted) while the store is backing off. */
static int switched_off(redis_store *s)
{
    return progcache__redis_is_off(&s->health, now_ms());
}

static void note_success(redis_store *s) { progcache__redis_ok(&s->health); }

/* A failed call, counted and told to the log. reached: an error reply,
 * from a server that is up and answering (no back-off for that). */
static void note_failure(redis_store *s, const failure *f, int reached)
{
    unsigned int n = progcache__redis_failed(&s->health, f->timeout, reached, now_ms());
    if (!n)
        slog(s, PROGCACHE_LOG_WARN, "%s", f->what);
    else
        slog(s, PROGCACHE_LOG_WARN,
             "%s; %u failures in a row: not contacting the server for %u ms (gets miss, "
             "puts are dropped)",
             f->what, n, s->cfg.backoff_ms);
}

/* ---- connections -------------------------------------------------------- */

static int is_timeout(const redisContext *c, int err, uint64_t elapsed_ms, unsigned int limit)
{
#ifdef REDIS_ERR_TIMEOUT
    if (c->err == REDIS_ERR_TIMEOUT)
        return 1;
#endif
    if (c->err != REDIS_ERR_IO)
        return 0;
    /* SO_RCVTIMEO makes a read fail with EAGAIN; a timed-out connect poll
     * reports ETIMEDOUT. The elapsed time catches hiredis versions that
     * leave another errno behind, except errors that are never timeouts. */
    if (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT)
        return 1;
    if (err == ECONNREFUSED || err == ECONNRESET || err == EPIPE || err == ENOENT ||
        err == EACCES || err == ENETUNREACH || err == EHOSTUNREACH)
        return 0;
    return elapsed_ms + 1 >= limit;
}

/* redisCommandArgv for a command whose reply is one value of at most limit
 * bytes (GET): the reply is read chunk by chunk, and once more than limit
 * bytes (plus the "$<len>\r\n...\r\n" framing) wait unparsed, reading
 * stops with f->too_large set. So a huge value costs limit bytes of memory
 * at most, not its size. The connection is then out of step with the
 * server and must be dropped. */
static redisReply *bounded_command(redisContext *c, int argc, const char **argv,
                                   const size_t *lens, size_t limit, failure *f)
{
    void *reply = NULL;
    int done = 0;
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
        return NULL;
    do
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return NULL;
    while (!done);
    for (;;) {
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
            return NULL;
        if (reply)
            return reply;
        if (c->reader->len - c->reader->pos > limit + 64) {
            f->too_large = 1;
            return NULL;
        }
        if (redisBufferRead(c) != REDIS_OK)
            return NULL;
    }
}

/* One command with SIGPIPE blocked (see the top of the file). *err gets
 * the errno of a failure. limit: 0, or the bound of bounded_command. */
static redisReply *command(redisContext *c, int argc, const char **argv, const size_t *lens,
                           size_t limit, failure *f, int *err)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    redisReply *r = limit ? bounded_command(c, argc, argv, lens, limit, f)
                          : redisCommandArgv(c, argc, argv, lens);
    *err = errno;
    if (!r && !sigismember(&old, SIGPIPE)) {
        sigset_t pending;
        struct timespec zero = {0, 0};
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE))
            sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* Send AUTH or SELECT on a new connection; 0 when the server said OK. */
static int handshake(redisContext *c, int argc, const char **argv, failure *f,
                     const redis_store *s, const char *what)
{
    int err = 0;
    uint64_t t0 = now_ms();
    redisReply *r = command(c, argc, argv, NULL, 0, f, &err);
    if (!r) {
        f->timeout = is_timeout(c, err, now_ms() - t0, s->cfg.command_timeout_ms);
        snprintf(f->what, sizeof f->what, "%s failed: %s", what, c->errstr);
        return -1;
    }
    int ok = r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(f->what, sizeof f->what, "%s refused: %s", what,
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* A new connection, authenticated and on the right database. */
static redisContext *connect_new(redis_store *s, failure *f)
{
    const progcache__redis_url *u = &s->cfg.url;
    struct timeval ct = to_timeval(s->cfg.connect_timeout_ms);
    uint64_t t0 = now_ms();
    redisContext *c = u->path ? redisConnectUnixWithTimeout(u->path, ct)
                              : redisConnectWithTimeout(u->host, u->port, ct);
    int err = errno;
    f->timeout = 0;
    if (!c) {
        snprintf(f->what, sizeof f->what, "out of memory connecting");
        return NULL;
    }
    if (c->err) {
        f->timeout = is_timeout(c, err, now_ms() - t0, s->cfg.connect_timeout_ms);
        snprintf(f->what, sizeof f->what, "cannot connect: %s", c->errstr);
        goto fail;
    }
    if (redisSetTimeout(c, to_timeval(s->cfg.command_timeout_ms)) != REDIS_OK) {
        snprintf(f->what, sizeof f->what, "cannot set the command timeout: %s", c->errstr);
        goto fail;
    }
    if (u->password) {
        const char *auth[] = {"AUTH", u->user ? u->user : u->password, u->password};
        if (handshake(c, u->user ? 3 : 2, auth, f, s, "AUTH"))
            goto fail;
    }
    if (u->db) {
        char db[16];
        snprintf(db, sizeof db, "%u", u->db);
        const char *select[] = {"SELECT", db};
        if (handshake(c, 2, select, f, s, "SELECT"))
            goto fail;
    }
    return c;

fail:
    redisFree(c);
    return NULL;
}

static redisContext *take(redis_store *s, int *reused, failure *f)
{
    redisContext *c = NULL;
    pthread_mutex_lock(&s->pool_lock);
    if (s->num_idle)
        c = s->idle[--s->num_idle];
    pthread_mutex_unlock(&s->pool_lock);
    *reused = c != NULL;
    return c ? c : connect_new(s, f);
}

static void give(redis_store *s, redisContext *c)
{
    pthread_mutex_lock(&s->pool_lock);
    if (s->num_idle < POOL_MAX) {
        s->idle[s->num_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&s->pool_lock);
    redisFree(c); /* NULL-safe */
}

static void drop_idle(redis_store *s)
{
    redisContext *gone[POOL_MAX];
    pthread_mutex_lock(&s->pool_lock);
    size_t n = s->num_idle;
    memcpy(gone, s->idle, n * sizeof *gone);
    s->num_idle = 0;
    pthread_mutex_unlock(&s->pool_lock);
    for (size_t i = 0; i < n; i++)
        redisFree(gone[i]);
}

/* Run a command on a pooled connection. Returns the reply (an error reply
 * is counted and turned into NULL), or NULL with the failure counted and
 * described in f. idempotent: may be sent twice (see the top of file).
 * limit: 0, or the largest reply read (bounded_command); a longer one is
 * NULL with f->too_large set, not counted as a failure: the server is
 * well, the value is not one to read. */
static redisReply *call_bounded(redis_store *s, int argc, const char **argv, const size_t *lens,
                                int idempotent, size_t limit, failure *f)
{
    f->too_large = 0;
    for (int attempt = 0;; attempt++) {
        int reused = 0, err = 0;
        redisContext *c = take(s, &reused, f);
        if (!c) {
            note_failure(s, f, 0);
            return NULL;
        }
        uint64_t t0 = now_ms();
        redisReply *r = command(c, argc, argv, lens, limit, f, &err);
        if (f->too_large) {
            redisFree(c); /* the rest of the reply is still on its way */
            return NULL;
        }
        if (r) {
            give(s, c);
            if (r->type != REDIS_REPLY_ERROR) {
                note_success(s);
                return r;
            }
            f->timeout = 0;
            snprintf(f->what, sizeof f->what, "%s refused: %s", argv[0], r->str);
            freeReplyObject(r);
            note_failure(s, f, 1);
            return NULL;
        }
        f->timeout = is_timeout(c, err, now_ms() - t0, s->cfg.command_timeout_ms);
        snprintf(f->what, sizeof f->what, "%s failed: %s%s", argv[0], c->errstr,
                 f->timeout ? " (command timeout)" : "");
        redisFree(c);
        if (!f->timeout) {
            drop_idle(s);
            if (idempotent && reused && attempt == 0)
                continue;
        }
        note_failure(s, f, 0);
        return NULL;
    }
}

static redisReply *call(redis_store *s, int argc, const char **argv, const size_t *lens,
                        int idempotent, failure *f)
{
    return call_bounded(s, argc, argv, lens, idempotent, 0, f);
}

/* ---- get and put -------------------------------------------------------- */

/* A value over the bound: a miss, counted as rejected and logged. size:
 * the payload's bytes, or 0 when reading stopped past limit. */
static void too_large(redis_store *s, const char *name, size_t size, size_t limit)
{
    count(s, PROGCACHE__RC_REJECTED);
    char have[64];
    if (size)
        snprintf(have, sizeof have, "holds %zu bytes", size);
    else
        snprintf(have, sizeof have, "is more than %zu bytes", limit);
    slog(s, PROGCACHE_LOG_WARN,
         "rejected the value of %s: it %s, more than max_artifact_size (%llu bytes) allows; "
         "treated as a miss (raise max_artifact_size to read it)",
         name, have, (unsigned long long)s->cfg.max_artifact_size);
}

static int redis_get(progcache_buf *out, progcache_store *store, const void *key,
                     size_t key_len)
{
    redis_store *s = (redis_store *)store;
    char hex[HEX_LEN + 1], name[NAME_SIZE];
    progcache__envelope_id id;
    failure f;
    if (switched_off(s))
        return PROGCACHE_ENOTFOUND;
    int rc = progcache__envelope_id_init(&id, key, key_len);
    if (rc)
        return rc;
    progcache__hex(hex, id.hash, sizeof id.hash);
    const char *argv[] = {"GET", name};
    size_t lens[] = {3, make_name(name, s, "", hex)};
    /* No value larger than the largest artifact plus its envelope and the
     * largest records is read into memory (docs/REMOTE.md, "Limits"). */
    uint64_t max = s->cfg.max_artifact_size;
    uint64_t extra = PROGCACHE__ENVELOPE_MAX_HEADER + PROGCACHE_RECORDS_MAX;
    size_t limit = max > SIZE_MAX / 2 - extra ? SIZE_MAX / 2 : (size_t)(max + extra);
    redisReply *r = call_bounded(s, 2, argv, lens, 1, limit, &f);
    if (!r && f.too_large) {
        too_large(s, name, 0, limit);
        return PROGCACHE_ENOTFOUND;
    }
    if (!r)
        return PROGCACHE_ENOTFOUND;
    rc = PROGCACHE_ENOTFOUND;
    if (r->type == REDIS_REPLY_NIL) {
        count(s, PROGCACHE__RC_MISSES);
    } else if (r->type != REDIS_REPLY_STRING) {
        count(s, PROGCACHE__RC_ERRORS);
        slog(s, PROGCACHE_LOG_WARN, "%s is not a string value; treated as a miss", name);
    } else {
        progcache__envelope e;
        saved_error saved;
        error_save(&saved);
        int open = progcache__envelope_open(&e, r->str, r->len, &id, s->cfg.hmac);
        if (open == PROGCACHE_ENOTFOUND) {
            count(s, PROGCACHE__RC_MISSES);
            count(s, PROGCACHE__RC_NEWER);
            slog(s, PROGCACHE_LOG_WARN,
                 "ignored the value of %s: %s; treated as a miss (upgrade progcache here to "
                 "read it)",
                 name, progcache_error_last());
            error_restore(&saved);
        } else if (open != PROGCACHE_OK) {
            count(s, PROGCACHE__RC_REJECTED);
            slog(s, PROGCACHE_LOG_WARN, "rejected the value of %s: %s", name,
                 progcache_error_last());
            error_restore(&saved);
        } else if (e.size > max) {
            too_large(s, name, e.size, limit);
        } else if ((rc = progcache__buf_reserve(out, e.size)) == PROGCACHE_OK) {
            if (e.size)
                memcpy(out->data, e.payload, e.size);
            progcache__buf_set_size(out, e.size);
            count(s, PROGCACHE__RC_HITS);
        }
    }
    freeReplyObject(r);
    return rc;
}

/* Write one value now; failures are counted, never returned. Also the put
 * queue's writer. */
static void write_value(void *ctx, const progcache__put_item *item)
{
    redis_store *s = ctx;
    const void *key = item->key, *data = item->data;
    size_t key_len = item->key_len, size = item->size;
    unsigned char header[PROGCACHE__ENVELOPE_MAX_HEADER];
    char hex[HEX_LEN + 1], name[NAME_SIZE], ttl[16];
    size_t header_len = 0;
    unsigned char *value = NULL;
    failure f;
    saved_error saved;

    if (switched_off(s))
        return;
    error_save(&saved);
    if (size > MAX_VALUE - PROGCACHE__ENVELOPE_MAX_HEADER) {
        count(s, PROGCACHE__RC_STORE_ERRORS);
        slog(s, PROGCACHE_LOG_WARN, "a value of %zu bytes is larger than Redis accepts; not "
                                    "stored", size);
        goto done;
    }
    progcache__envelope env = {PROGCACHE__ENVELOPE_VERSION, item->kind, item->records,
                               item->records_len, data, size};
    progcache__envelope_id id;
    if (item->records_len ||
        progcache__envelope_id_init(&id, key, key_len) ||
        progcache__envelope_seal(header, &header_len, &env, &id, s->cfg.hmac) ||
        !(value = progcache__malloc(header_len + size))) {
        count(s, PROGCACHE__RC_STORE_ERRORS);
        slog(s, PROGCACHE_LOG_WARN, "could not prepare a value of %zu bytes: %s", size,
             progcache_error_last());
        goto done;
    }
    progcache__hex(hex, id.hash, sizeof id.hash);
    memcpy(value, header, header_len);
    if (size)
        memcpy(value + header_len, data, size);
    snprintf(ttl, sizeof ttl, "%u", s->cfg.ttl_seconds);
    const char *argv[] = {"SET", name, (const char *)value, "EX", ttl};
    size_t lens[] = {3, make_name(name, s, "", hex), header_len + size, 2, strlen(ttl)};
    redisReply *r = call(s, s->cfg.ttl_seconds ? 5 : 3, argv, lens, 1, &f);
    if (r && r->type == REDIS_REPLY_STATUS)
        count(s, PROGCACHE__RC_STORES);
    else
        count(s, PROGCACHE__RC_STORE_ERRORS);
    freeReplyObject(r); /* NULL-safe */

done:
    progcache__free(value);
    error_restore(&saved);
}

static int redis_put(progcache_store *store, const void *key, size_t key_len,
                     const void *data, size_t size)
{
    redis_store *s = (redis_store *)store;
    progcache__put_item item = {key, key_len, data, size, PROGCACHE_KIND_UNKNOWN, NULL, 0};
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return PROGCACHE_OK;
    if (size > s->cfg.max_artifact_size) {
        /* Refused before it is copied into the queue; readers would
         * refuse it anyway. */
        count(s, PROGCACHE__RC_STORE_ERRORS);
        slog(s, PROGCACHE_LOG_WARN,
             "a value of %zu bytes is more than max_artifact_size (%llu bytes); not stored",
             size, (unsigned long long)s->cfg.max_artifact_size);
        return PROGCACHE_OK;
    }
    if (s->queue) {
        if (switched_off(s))
            return PROGCACHE_OK;
        saved_error saved;
        error_save(&saved);
        int rc = progcache__put_queue_push(s->queue, &item);
        if (rc == PROGCACHE_ENOMEM) {
            count(s, PROGCACHE__RC_DROPPED);
            slog(s, PROGCACHE_LOG_WARN, "%s", progcache_error_last());
        }
        error_restore(&saved);
        if (rc != PROGCACHE_EREMOTE) /* EREMOTE: no queue thread; write here */
            return PROGCACHE_OK;
    }
    write_value(s, &item);
    return PROGCACHE_OK;
}

/* ---- remove, clear, count ----------------------------------------------- */

static int remote_error(const redis_store *s, const char *fn, const failure *f)
{
    return progcache__error(PROGCACHE_EREMOTE, "%s: Redis %s: %s", fn, s->cfg.where, f->what);
}

static int off_error(const redis_store *s, const char *fn)
{
    return progcache__error(PROGCACHE_EREMOTE,
                            "%s: Redis %s: not contacted, the store is backing off after "
                            "failures (see the log callback for them)",
                            fn, s->cfg.where);
}

static int redis_remove(progcache_store *store, const void *key, size_t key_len)
{
    redis_store *s = (redis_store *)store;
    char hex[HEX_LEN + 1], name[NAME_SIZE];
    failure f;
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return PROGCACHE_ENOTFOUND;
    if (s->queue)
        progcache__put_queue_flush(s->queue); /* no queued put may resurrect it */
    if (switched_off(s))
        return off_error(s, "progcache_store_remove");
    int rc = key_hash(hex, key, key_len);
    if (rc)
        return rc;
    const char *argv[] = {"DEL", name};
    size_t lens[] = {3, make_name(name, s, "", hex)};
    redisReply *r = call(s, 2, argv, lens, 1, &f);
    if (!r)
        return remote_error(s, "progcache_store_remove", &f);
    rc = r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
    freeReplyObject(r);
    return rc;
}

/* A glob pattern matching every name under the prefix: the prefix with
 * glob characters escaped, then '*'. */
static void prefix_pattern(char out[2 * PROGCACHE__REDIS_MAX_PREFIX + 2], const redis_store *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->cfg.prefix_len; i++) {
        char ch = s->cfg.prefix[i];
        if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\')
            out[n++] = '\\';
        out[n++] = ch;
    }
    out[n++] = '*';
    out[n] = '\0';
}

static int is_entry_name(const redis_store *s, const redisReply *k)
{
    if (k->type != REDIS_REPLY_STRING || k->len != s->cfg.prefix_len + HEX_LEN)
        return 0;
    for (size_t i = s->cfg.prefix_len; i < k->len; i++)
        if (!((k->str[i] >= '0' && k->str[i] <= '9') || (k->str[i] >= 'a' && k->str[i] <= 'f')))
            return 0;
    return 1;
}

/* Count and sum payload sizes of the entries among names, reading only
 * each envelope's 16-byte header, on the server. */
static const char SIZE_SCRIPT[] =
    "local n, t = 0, 0\n"
    "for _, k in ipairs(KEYS) do\n"
    "  local h = redis.call('GETRANGE', k, 0, 15)\n"
    "  if #h == 16 and string.sub(h, 1, 4) == 'pcEV' then\n"
    "    local v = 0\n"
    "    for i = 16, 9, -1 do v = v * 256 + string.byte(h, i) end\n"
    "    n, t = n + 1, t + v\n"
    "  end\n"
    "end\n"
    "return {n, t}\n";

/* What one SCAN batch does: delete every name (clear), or count entries. */
typedef enum { SCAN_DELETE, SCAN_MEASURE } scan_mode;

static int batch(redis_store *s, scan_mode mode, const redisReply *keys, uint64_t *n,
                 uint64_t *total, failure *f)
{
    size_t argc = 0, cap = keys->elements + 3;
    const char **argv = progcache__calloc(cap, sizeof *argv);
    size_t *lens = progcache__calloc(cap, sizeof *lens);
    char numkeys[24];
    int rc = PROGCACHE_OK;
    if (!argv || !lens) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory scanning Redis");
        goto done;
    }
    if (mode == SCAN_DELETE) {
        argv[argc] = "UNLINK";
        lens[argc++] = 6;
    } else {
        argv[argc] = "EVAL";
        lens[argc++] = 4;
        argv[argc] = SIZE_SCRIPT;
        lens[argc++] = sizeof SIZE_SCRIPT - 1;
        argc++; /* numkeys, filled in below */
    }
    size_t first = argc;
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (mode == SCAN_DELETE ? k->type == REDIS_REPLY_STRING : is_entry_name(s, k)) {
            argv[argc] = k->str;
            lens[argc++] = k->len;
        }
    }
    if (argc == first)
        goto done;
    if (mode == SCAN_MEASURE) {
        snprintf(numkeys, sizeof numkeys, "%zu", argc - first);
        argv[2] = numkeys;
        lens[2] = strlen(numkeys);
    }
    redisReply *r = call(s, (int)argc, argv, lens, 1, f);
    if (!r) {
        rc = PROGCACHE_EREMOTE;
        goto done;
    }
    if (mode == SCAN_MEASURE && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        *n += (uint64_t)r->element[0]->integer;
        *total += (uint64_t)r->element[1]->integer;
    }
    freeReplyObject(r);

done:
    progcache__free(argv);
    progcache__free(lens);
    return rc;
}

static int scan_all(redis_store *s, scan_mode mode, uint64_t *n, uint64_t *total,
                    const char *fn)
{
    char cursor[32] = "0", pattern[2 * PROGCACHE__REDIS_MAX_PREFIX + 2];
    failure f;
    *n = *total = 0;
    if (switched_off(s))
        return off_error(s, fn);
    prefix_pattern(pattern, s);
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT};
        redisReply *r = call(s, 6, argv, NULL, 1, &f);
        if (!r)
            return remote_error(s, fn, &f);
        int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                 r->element[0]->type == REDIS_REPLY_STRING &&
                 r->element[0]->len < sizeof cursor && r->element[1]->type == REDIS_REPLY_ARRAY;
        int rc = ok ? batch(s, mode, r->element[1], n, total, &f) : PROGCACHE_OK;
        if (ok)
            memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        freeReplyObject(r);
        if (!ok)
            return progcache__error(PROGCACHE_EREMOTE, "%s: Redis %s: unexpected SCAN reply",
                                    fn, s->cfg.where);
        if (rc == PROGCACHE_EREMOTE)
            return remote_error(s, fn, &f);
        if (rc)
            return rc;
    } while (strcmp(cursor, "0") != 0);
    return PROGCACHE_OK;
}

static int redis_clear(progcache_store *store)
{
    redis_store *s = (redis_store *)store;
    uint64_t n, total;
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return PROGCACHE_OK;
    if (s->queue)
        progcache__put_queue_flush(s->queue);
    return scan_all(s, SCAN_DELETE, &n, &total, "progcache_store_clear");
}

static int redis_count(uint64_t *out, progcache_store *store)
{
    uint64_t total;
    return scan_all((redis_store *)store, SCAN_MEASURE, out, &total, "progcache_store_count");
}

static int redis_total_size(uint64_t *out, progcache_store *store)
{
    uint64_t n;
    return scan_all((redis_store *)store, SCAN_MEASURE, &n, out,
                    "progcache_store_total_size");
}

/* ---- create and free ---------------------------------------------------- */

static void redis_free(progcache_store *store)
{
    redis_store *s = (redis_store *)store;
    progcache__put_queue_free(s->queue); /* writes what is queued first */
    drop_idle(s);
    pthread_mutex_destroy(&s->pool_lock);
    progcache__redis_config_release(&s->cfg);
    progcache__free(s);
}

int progcache_store_redis_new(progcache_store **out, const progcache_redis_options *opts)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_redis_new: out is NULL");
    *out = NULL;
    redis_store *s = progcache__calloc(1, sizeof *s);
    if (!s)
        return progcache__error(PROGCACHE_ENOMEM, "progcache_store_redis_new: out of memory");
    int rc = progcache__redis_config_init(&s->cfg, opts);
    if (rc) {
        progcache__free(s);
        return rc;
    }
    progcache__redis_health_init(&s->health, s->cfg.failures_before_backoff,
                                 s->cfg.backoff_ms);
    if (pthread_mutex_init(&s->pool_lock, NULL) != 0) {
        progcache__redis_config_release(&s->cfg);
        progcache__free(s);
        return progcache__error(PROGCACHE_ENOMEM, "progcache_store_redis_new: no mutex");
    }
    if (!(s->cfg.flags & (PROGCACHE_REDIS_SYNC_PUT | PROGCACHE_REDIS_READONLY)) &&
        (rc = progcache__put_queue_new(&s->queue, write_value, s, s->cfg.max_queue_bytes))) {
        pthread_mutex_destroy(&s->pool_lock);
        progcache__redis_config_release(&s->cfg);
        progcache__free(s);
        return rc;
    }
    s->base.version = PROGCACHE_STORE_VERSION;
    s->base.name = "redis";
    s->base.get = redis_get;
    s->base.put = redis_put;
    s->base.remove = redis_remove;
    s->base.clear = redis_clear;
    s->base.count = redis_count;
    s->base.total_size = redis_total_size;
    s->base.free = redis_free;
    s->base.flags = PROGCACHE_STORE_SHARED;
    s->base.flush = redis_flush;
    s->base.stats = &redis_stats_ops;
    s->base.lease = &redis_lease_ops;
    *out = &s->base;
    return PROGCACHE_OK;
}

static int redis_flush(progcache_store *store)
{
    progcache__put_queue_flush(as_redis(store)->queue); /* NULL-safe */
    return PROGCACHE_OK;
}

/* The five counts the cache folds into its home tier's statistics. Calls
 * skipped while backing off and puts dropped from a full queue are
 * failures of the tier as much as errors are. */
static int redis_counters(progcache_store_counters *out, const progcache_store *store)
{
    progcache_redis_counters c = PROGCACHE_REDIS_COUNTERS_INIT;
    progcache__redis_counters_fill(&c, &as_redis(store)->health);
    out->hits = c.hits;
    out->misses = c.misses;
    out->errors = c.errors + c.skipped_backoff + c.dropped;
    out->stores = c.stores;
    out->rejected = c.rejected;
    return PROGCACHE_OK;
}

int progcache_redis_counters_get(progcache_redis_counters *out, const progcache_store *store)
{
    redis_store *s = as_redis(store);
    if (!out || !s)
        return progcache__error(PROGCACHE_EINVAL, "progcache_redis_counters_get: %s",
                                !out ? "out is NULL" : "not a Redis store (NULL or another kind)");
    if (out->version == 0 || out->version > PROGCACHE_REDIS_COUNTERS_VERSION)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_redis_counters_get: out->version is %u; initialize "
                                "it with PROGCACHE_REDIS_COUNTERS_INIT",
                                out->version);
    progcache__redis_counters_fill(out, &s->health);
    return PROGCACHE_OK;
}

/* ---- single-flight leases ------------------------------------------------ */

/* PEXPIRE only if the lease still holds our token. */
static const char RENEW_SCRIPT[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "end\n"
    "return 0\n";

/* DEL only if ours; PUBLISH either way: a value stored by an owner whose
 * lease had lapsed is still worth waking the waiters for. */
static const char RELEASE_SCRIPT[] =
    "local mine = 0\n"
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  mine = 1\n"
    "end\n"
    "redis.call('PUBLISH', ARGV[2], 'released')\n"
    "return mine\n";

/* Is the entry there, and how long does the lease still run (PTTL: -2 no
 * lease). One round trip. */
static const char STATE_SCRIPT[] =
    "return {redis.call('EXISTS', KEYS[1]), redis.call('PTTL', KEYS[2])}\n";

static int lease_args(redis_store **s, progcache_store *store, const char *fn)
{
    *s = as_redis(store);
    if (!*s)
        return progcache__error(PROGCACHE_EINVAL, "%s: not a Redis store (NULL or another kind)",
                                fn);
    if (switched_off(*s))
        return off_error(*s, fn);
    return PROGCACHE_OK;
}

static int redis_lease_acquire(progcache_store_lease *out, progcache_store *store,
                                  const void *key, size_t key_len, unsigned int lease_ms)
{
    static const char fn[] = "progcache_store_lease_acquire";
    redis_store *s;
    char name[NAME_SIZE], px[16];
    unsigned char token[16];
    failure f;
    if (!out || !key || !key_len || !lease_ms)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s", fn,
                                !out ? "out is NULL"
                                     : lease_ms ? "the key is empty" : "lease_ms is 0");
    memset(out, 0, sizeof *out);
    int rc = lease_args(&s, store, fn);
    if (rc)
        return rc;
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return progcache__error(PROGCACHE_EREMOTE, "%s: the Redis store is read-only, so this "
                                                   "node stores nothing and takes no lease", fn);
    if ((rc = key_hash(out->hash, key, key_len)))
        return rc;
    if (getrandom(token, sizeof token, 0) != (ssize_t)sizeof token)
        return progcache__error_errno(PROGCACHE_EIO, errno, "%s: no random bytes", fn);
    progcache__hex(out->token, token, sizeof token);
    snprintf(px, sizeof px, "%u", lease_ms);
    const char *argv[] = {"SET", name, out->token, "NX", "PX", px};
    size_t lens[] = {3, make_name(name, s, "lease:", out->hash), strlen(out->token), 2, 2,
                     strlen(px)};
    redisReply *r = call(s, 6, argv, lens, 0, &f);
    if (!r)
        return remote_error(s, fn, &f);
    out->held = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return PROGCACHE_OK;
}

/* Run a lease script on (lease name, token, arg); the integer it returns,
 * or -1 with the error set. */
static long long lease_script(redis_store *s, const char *script, const progcache_store_lease *l,
                              const char *arg, const char *fn)
{
    char name[NAME_SIZE];
    failure f;
    const char *argv[] = {"EVAL", script, "1", name, l->token, arg};
    size_t lens[] = {4, strlen(script), 1, make_name(name, s, "lease:", l->hash),
                     strlen(l->token), strlen(arg)};
    redisReply *r = call(s, 6, argv, lens, 0, &f);
    if (!r) {
        remote_error(s, fn, &f);
        return -1;
    }
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    return v;
}

static int redis_lease_renew(progcache_store *store, progcache_store_lease *lease,
                                unsigned int lease_ms)
{
    static const char fn[] = "progcache_store_lease_renew";
    redis_store *s;
    char px[16];
    if (!lease || !lease->held || !lease_ms)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s", fn,
                                !lease_ms ? "lease_ms is 0" : "no lease is held");
    int rc = lease_args(&s, store, fn);
    if (rc)
        return rc;
    snprintf(px, sizeof px, "%u", lease_ms);
    long long v = lease_script(s, RENEW_SCRIPT, lease, px, fn);
    if (v < 0)
        return PROGCACHE_EREMOTE;
    if (v == 0)
        lease->held = 0;
    return v ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}

static int redis_lease_release(progcache_store *store, progcache_store_lease *lease)
{
    static const char fn[] = "progcache_store_lease_release";
    redis_store *s;
    char channel[NAME_SIZE];
    if (!lease)
        return progcache__error(PROGCACHE_EINVAL, "%s: lease is NULL", fn);
    if (!lease->held)
        return PROGCACHE_ENOTFOUND;
    lease->held = 0;
    if (as_redis(store))
        progcache__put_queue_flush(as_redis(store)->queue);
    int rc = lease_args(&s, store, fn);
    if (rc)
        return rc;
    make_name(channel, s, "done:", lease->hash);
    long long v = lease_script(s, RELEASE_SCRIPT, lease, channel, fn);
    if (v < 0)
        return PROGCACHE_EREMOTE;
    return v ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}

/* A connection of its own subscribed to channel, or NULL (then the waiter
 * polls). Not pooled: a subscribed connection takes no other commands. */
static redisContext *subscribe(redis_store *s, const char *channel)
{
    failure f;
    int err = 0;
    redisContext *c = connect_new(s, &f);
    if (!c) {
        note_failure(s, &f, 0);
        return NULL;
    }
    const char *argv[] = {"SUBSCRIBE", channel};
    redisReply *r = command(c, 2, argv, NULL, 0, &f, &err);
    int ok = r && r->type == REDIS_REPLY_ARRAY;
    freeReplyObject(r);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Wait up to ms for a message on a subscribed connection. 1: a message
 * came; 0: none; -1: the connection failed. */
static int await_message(redisContext *c, unsigned int ms)
{
    void *reply = NULL;
    int got = 0;
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
        return -1;
    if (!reply) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int n = poll(&p, 1, (int)ms);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n <= 0)
            return 0;
        if (redisBufferRead(c) != REDIS_OK || redisGetReplyFromReader(c, &reply) != REDIS_OK)
            return -1;
    }
    while (reply) {
        got = 1;
        freeReplyObject(reply);
        reply = NULL;
        if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
            return -1;
    }
    return got;
}

static void sleep_ms(unsigned int ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int redis_lease_wait(progcache_store *store, const void *key, size_t key_len,
                               unsigned int timeout_ms)
{
    static const char fn[] = "progcache_store_lease_wait";
    redis_store *s;
    char hex[HEX_LEN + 1], entry[NAME_SIZE], lease[NAME_SIZE], channel[NAME_SIZE];
    failure f;
    if (!key || !key_len)
        return progcache__error(PROGCACHE_EINVAL, "%s: the key is empty", fn);
    int rc = lease_args(&s, store, fn);
    if (rc || (rc = key_hash(hex, key, key_len)))
        return rc;
    make_name(channel, s, "done:", hex);
    const char *argv[] = {"EVAL", STATE_SCRIPT, "2", entry, lease};
    size_t lens[] = {4, sizeof STATE_SCRIPT - 1, 1, make_name(entry, s, "", hex),
                     make_name(lease, s, "lease:", hex)};
    uint64_t deadline = now_ms() + timeout_ms;
    unsigned int poll_step = 10;
    /* Subscribed before the first look, so a release between the look
     * and the wait still wakes us. */
    redisContext *sub = subscribe(s, channel);
    for (;;) {
        redisReply *r = call(s, 5, argv, lens, 1, &f);
        if (!r) {
            rc = remote_error(s, fn, &f);
            break;
        }
        long long exists = 0, pttl = -2;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
            exists = r->element[0]->integer;
            pttl = r->element[1]->integer;
        }
        freeReplyObject(r);
        if (exists) {
            rc = PROGCACHE_OK;
            break;
        }
        if (pttl == -2) {
            rc = PROGCACHE_ENOTFOUND;
            break;
        }
        uint64_t now = now_ms();
        if (now >= deadline) {
            rc = PROGCACHE_ETIMEOUT;
            progcache__error(rc, "%s: waited %u ms for another node to store the entry", fn,
                             timeout_ms);
            break;
        }
        unsigned int step = sub ? WAIT_STEP_MAX_MS : poll_step;
        if (pttl >= 0 && (uint64_t)pttl + 2 < step)
            step = (unsigned int)pttl + 2; /* look again just after it expires */
        if (deadline - now < step)
            step = (unsigned int)(deadline - now);
        if (!sub) {
            sleep_ms(step);
            poll_step = poll_step * 2 < 250 ? poll_step * 2 : 250;
        } else if (await_message(sub, step) < 0) {
            redisFree(sub);
            sub = NULL;
        }
    }
    redisFree(sub);
    return rc;
}

static const progcache_store_stats_ops redis_stats_ops = {
    PROGCACHE_STORE_STATS_OPS_VERSION, NULL, NULL, NULL, redis_counters};

static const progcache_store_lease_ops redis_lease_ops = {
    PROGCACHE_STORE_LEASE_OPS_VERSION, redis_lease_acquire, redis_lease_renew,
    redis_lease_release, redis_lease_wait};
