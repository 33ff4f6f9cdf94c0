/* The Redis store's connections (redis_store.h): the pool, connecting,
 * running a command, and what a failure is.
 *
 * Failure is a miss. A cache in front of a compiler must never be slower or
 * less available than compiling, so every remote failure (no server, a
 * timeout, a lost connection) is counted, told to the log callback, and
 * ends as a miss or a dropped write in the callers. Calls are bounded by
 * the connect and command timeouts, and after a few failures in a row the
 * store switches itself off for a while (back-off, redis_health.h), so a
 * dead server costs one clock read per call, not a timeout.
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
 * the calling thread; a SIGPIPE it raised is consumed before unblocking. */
#include "store/redis/redis_store.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sha256.h"


static struct timeval to_timeval(unsigned int ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* ---- names and messages ------------------------------------------------- */

void progcache__redis_log(const progcache__redis_store *s, int level, const char *fmt, ...)
{
    if (!s->cfg.log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    progcache__log(s->cfg.log, s->cfg.log_ctx, level, "Redis %s: %s", s->cfg.where, msg);
}

int progcache__redis_key_hex(char hex[PROGCACHE__REDIS_HEX_LEN + 1], const void *key,
                             size_t key_len)
{
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    int rc = progcache__sha256_oneshot(digest, key, key_len);
    if (!rc)
        progcache__hex(hex, digest, sizeof digest);
    return rc;
}

size_t progcache__redis_name(char out[PROGCACHE__REDIS_NAME_SIZE],
                             const progcache__redis_store *s, const char *kind,
                             const char *hex)
{
    int n = snprintf(out, PROGCACHE__REDIS_NAME_SIZE, "%s%s%s", s->cfg.prefix, kind, hex);
    return (size_t)n;
}

int progcache__redis_remote_error(const progcache__redis_store *s, const char *fn,
                                  const progcache__redis_failure *f)
{
    return progcache__error(PROGCACHE_EREMOTE, "%s: Redis %s: %s", fn, s->cfg.where, f->what);
}

int progcache__redis_off_error(const progcache__redis_store *s, const char *fn)
{
    return progcache__error(PROGCACHE_EREMOTE,
                            "%s: Redis %s: not contacted, the store is backing off after "
                            "failures (see the log callback for them)",
                            fn, s->cfg.where);
}

/* ---- failure accounting and back-off ----------------------------------- */

int progcache__redis_off(progcache__redis_store *s)
{
    return progcache__redis_is_off(&s->health, progcache__redis_now_ms());
}

void progcache__redis_note_failure(progcache__redis_store *s,
                                   const progcache__redis_failure *f, int reached)
{
    unsigned int n = progcache__redis_failed(&s->health, f->timeout, reached, progcache__redis_now_ms());
    if (!n)
        progcache__redis_log(s, PROGCACHE_LOG_WARN, "%s", f->what);
    else
        progcache__redis_log(s, PROGCACHE_LOG_WARN,
                             "%s; %u failures in a row: not contacting the server for %u ms "
                             "(gets miss, puts are dropped)",
                             f->what, n, s->cfg.backoff_ms);
}

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

/* ---- one command -------------------------------------------------------- */

/* redisCommandArgv for a command whose reply is one value of at most limit
 * bytes (GET): the reply is read chunk by chunk, and once more than limit
 * bytes (plus the "$<len>\r\n...\r\n" framing) wait unparsed, reading
 * stops with f->too_large set. So a huge value costs limit bytes of memory
 * at most, not its size. The connection is then out of step with the
 * server and must be dropped. */
static redisReply *bounded_command(redisContext *c, int argc, const char **argv,
                                   const size_t *lens, size_t limit,
                                   progcache__redis_failure *f)
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

redisReply *progcache__redis_command(redisContext *c, int argc, const char **argv,
                                     const size_t *lens, size_t limit,
                                     progcache__redis_failure *f, int *err)
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

/* ---- connections -------------------------------------------------------- */

/* Send AUTH or SELECT on a new connection; 0 when the server said OK. */
static int handshake(redisContext *c, int argc, const char **argv,
                     progcache__redis_failure *f, const progcache__redis_store *s,
                     const char *what)
{
    int err = 0;
    uint64_t t0 = progcache__redis_now_ms();
    redisReply *r = progcache__redis_command(c, argc, argv, NULL, 0, f, &err);
    if (!r) {
        f->timeout = is_timeout(c, err, progcache__redis_now_ms() - t0, s->cfg.command_timeout_ms);
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

redisContext *progcache__redis_connect(progcache__redis_store *s, progcache__redis_failure *f)
{
    const progcache__redis_url *u = &s->cfg.url;
    struct timeval ct = to_timeval(s->cfg.connect_timeout_ms);
    uint64_t t0 = progcache__redis_now_ms();
    redisContext *c = u->path ? redisConnectUnixWithTimeout(u->path, ct)
                              : redisConnectWithTimeout(u->host, u->port, ct);
    int err = errno;
    f->timeout = 0;
    if (!c) {
        snprintf(f->what, sizeof f->what, "out of memory connecting");
        return NULL;
    }
    if (c->err) {
        f->timeout = is_timeout(c, err, progcache__redis_now_ms() - t0, s->cfg.connect_timeout_ms);
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

static redisContext *take(progcache__redis_store *s, int *reused, progcache__redis_failure *f)
{
    redisContext *c = NULL;
    pthread_mutex_lock(&s->pool_lock);
    if (s->num_idle)
        c = s->idle[--s->num_idle];
    pthread_mutex_unlock(&s->pool_lock);
    *reused = c != NULL;
    return c ? c : progcache__redis_connect(s, f);
}

static void give(progcache__redis_store *s, redisContext *c)
{
    pthread_mutex_lock(&s->pool_lock);
    if (s->num_idle < PROGCACHE__REDIS_POOL_MAX) {
        s->idle[s->num_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&s->pool_lock);
    redisFree(c); /* NULL-safe */
}

void progcache__redis_pool_drop(progcache__redis_store *s)
{
    redisContext *gone[PROGCACHE__REDIS_POOL_MAX];
    pthread_mutex_lock(&s->pool_lock);
    size_t n = s->num_idle;
    memcpy(gone, s->idle, n * sizeof *gone);
    s->num_idle = 0;
    pthread_mutex_unlock(&s->pool_lock);
    for (size_t i = 0; i < n; i++)
        redisFree(gone[i]);
}

redisReply *progcache__redis_call(progcache__redis_store *s, int argc, const char **argv,
                                  const size_t *lens, int idempotent, size_t limit,
                                  progcache__redis_failure *f)
{
    f->too_large = 0;
    for (int attempt = 0;; attempt++) {
        int reused = 0, err = 0;
        redisContext *c = take(s, &reused, f);
        if (!c) {
            progcache__redis_note_failure(s, f, 0);
            return NULL;
        }
        uint64_t t0 = progcache__redis_now_ms();
        redisReply *r = progcache__redis_command(c, argc, argv, lens, limit, f, &err);
        if (f->too_large) {
            redisFree(c); /* the rest of the reply is still on its way */
            return NULL;
        }
        if (r) {
            give(s, c);
            if (r->type != REDIS_REPLY_ERROR) {
                progcache__redis_ok(&s->health);
                return r;
            }
            f->timeout = 0;
            snprintf(f->what, sizeof f->what, "%s refused: %s", argv[0], r->str);
            freeReplyObject(r);
            progcache__redis_note_failure(s, f, 1);
            return NULL;
        }
        f->timeout = is_timeout(c, err, progcache__redis_now_ms() - t0, s->cfg.command_timeout_ms);
        snprintf(f->what, sizeof f->what, "%s failed: %s%s", argv[0], c->errstr,
                 f->timeout ? " (command timeout)" : "");
        redisFree(c);
        if (!f->timeout) {
            progcache__redis_pool_drop(s);
            if (idempotent && reused && attempt == 0)
                continue;
        }
        progcache__redis_note_failure(s, f, 0);
        return NULL;
    }
}
