/* The Redis store's connections (redis_store.h): the pool, connecting,
 * running a command, and what a failure is.
 *
 * Failure is a miss. A cache in front of a compiler must never be slower or
 * less available than compiling, so every remote failure (no server, a
 * timeout, a lost connection) is counted, told to the log callback, and
 * ends as a miss or a dropped write in the callers. Calls are bounded by
 * the connect and command timeouts, and after a few failures in a row the
 * store switches itself off for a while (back-off, remote/remote_health.h), so a
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
#include "remote/remote_resolve.h"

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
    return progcache__remote_is_off(&s->health, progcache__remote_now_ms());
}

void progcache__redis_note_failure(progcache__redis_store *s,
                                   const progcache__redis_failure *f, int reached)
{
    progcache__remote_fault fault = {f->timeout ? PROGCACHE__CAUSE_TIMEOUT : f->cause,
                                     f->timeout,
                                     f->deadline,
                                     reached,
                                     f->over_bound,
                                     f->what};
    progcache__remote_fault_note(&s->health, &s->voice, &fault);
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

/* ---- connections -------------------------------------------------------- */

/* Send AUTH or SELECT on a new connection; 0 when the server said OK. */
static int handshake(redisContext *c, int argc, const char **argv,
                     progcache__redis_failure *f, const progcache__redis_store *s,
                     const char *what)
{
    redisReply *r = progcache__redis_command(&s->cfg, c, argc, argv, NULL,
                                             &progcache__redis_small, f);
    if (!r)
        return -1;
    int ok = r->type == REDIS_REPLY_STATUS && r->len == 2 && !memcmp(r->str, "OK", 2);
    const char *hint = argv[0][0] == 'A' ? " (check the password and user in the URL)"
                                         : " (check the database number in the URL)";
    f->cause = PROGCACHE__CAUSE_AUTH;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(f->what, sizeof f->what, "%s refused: %s%s", what, r->str, hint);
    } else if (!ok) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        f->cause = PROGCACHE__CAUSE_PROTOCOL;
        snprintf(f->what, sizeof f->what, "%s answered %s, not OK", what, shape);
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Connect over TCP to host, resolved here within the connect timeout
 * (remote/remote_resolve.c), each of its addresses tried in turn within what is
 * left of it. NULL with f filled, or a context (c->err set when every
 * address failed; *err the errno of the last). */
static redisContext *connect_tcp(const progcache__redis_store *s, progcache__redis_failure *f,
                                 int *err)
{
    const progcache__redis_url *u = &s->cfg.url;
    unsigned int limit = s->cfg.connect_timeout_ms;
    uint64_t t0 = progcache__remote_now_ms();
    progcache__remote_addrs addrs;
    char why[sizeof f->what - 32];
    int rc = progcache__remote_resolve(&addrs, u->host, limit, why, sizeof why);
    if (rc) {
        f->timeout = rc == 1;
        snprintf(f->what, sizeof f->what, "cannot connect: %s", why);
        return NULL;
    }
    redisContext *c = NULL;
    for (size_t i = 0; i < addrs.n; i++) {
        uint64_t spent = progcache__remote_now_ms() - t0;
        if (c && spent >= limit)
            break;
        redisFree(c); /* NULL-safe: the previous address's failure */
        c = redisConnectWithTimeout(addrs.addr[i], u->port,
                                    to_timeval(spent < limit ? limit - (unsigned int)spent : 1));
        *err = errno;
        if (!c || !c->err)
            break;
    }
    if (!c)
        snprintf(f->what, sizeof f->what, "out of memory connecting");
    return c;
}

redisContext *progcache__redis_connect(progcache__redis_store *s, progcache__redis_failure *f)
{
    const progcache__redis_url *u = &s->cfg.url;
    struct timeval ct = to_timeval(s->cfg.connect_timeout_ms);
    uint64_t t0 = progcache__remote_now_ms();
    int err = 0;
    f->timeout = f->deadline = f->over_bound = f->lost = 0;
    f->cause = PROGCACHE__CAUSE_CONNECT;
    f->what[0] = '\0';
    redisContext *c = u->path ? redisConnectUnixWithTimeout(u->path, ct) : connect_tcp(s, f, &err);
    if (u->path)
        err = errno;
    if (!c) {
        if (!f->what[0])
            snprintf(f->what, sizeof f->what, "out of memory connecting");
        return NULL;
    }
    if (c->err) {
        f->timeout = is_timeout(c, err, progcache__remote_now_ms() - t0, s->cfg.connect_timeout_ms);
        snprintf(f->what, sizeof f->what, "cannot connect: %s", c->errstr);
        goto fail;
    }
    if (progcache__redis_bound_reader(c) != 0) {
        snprintf(f->what, sizeof f->what, "cannot make the socket non-blocking: %s",
                 strerror(errno));
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
                                  const size_t *lens, int idempotent,
                                  const progcache__redis_limit *lim,
                                  progcache__redis_failure *f)
{
    return progcache__redis_call_timed(s, argc, argv, lens, idempotent, lim, NULL, f);
}

redisReply *progcache__redis_call_timed(progcache__redis_store *s, int argc, const char **argv,
                                        const size_t *lens, int idempotent,
                                        const progcache__redis_limit *lim,
                                        progcache__redis_clock *clock,
                                        progcache__redis_failure *f)
{
    f->too_large = 0;
    for (int attempt = 0;; attempt++) {
        int reused = 0;
        redisContext *c = take(s, &reused, f);
        if (!c) {
            progcache__redis_note_failure(s, f, 0);
            return NULL;
        }
        redisReply *r =
            progcache__redis_command_timed(&s->cfg, c, argc, argv, lens, lim, clock, f);
        if (r) {
            give(s, c);
            if (r->type != REDIS_REPLY_ERROR) {
                progcache__remote_note_ok(&s->health, &s->voice);
                return r;
            }
            f->timeout = 0;
            f->cause = PROGCACHE__CAUSE_REFUSED;
            snprintf(f->what, sizeof f->what, "%s refused: %s", argv[0], r->str);
            freeReplyObject(r);
            progcache__redis_note_failure(s, f, 1);
            return NULL;
        }
        redisFree(c); /* out of step with the server, or dead */
        if (f->too_large)
            return NULL; /* the rest of the value is still on its way */
        if (f->lost) {
            progcache__redis_pool_drop(s);
            if (idempotent && reused && attempt == 0)
                continue;
        }
        progcache__redis_note_failure(s, f, 0);
        return NULL;
    }
}
