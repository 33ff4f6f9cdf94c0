/* Single-flight leases on a Redis server (the protocol is in
 * progcache/store.h and docs/REMOTE.md): a lease is a string with an
 * expiry holding its owner's random token; renew and release compare the
 * token on the server, in Lua, so that nobody extends or deletes a lease
 * that is no longer theirs; release publishes on a channel that waiters
 * are subscribed to, so they wake at once instead of polling. */
#include "store/redis/redis_store.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "sha256.h"

/* Longest sleep between two looks at a lease while subscribed: only a lost
 * notification makes a waiter rely on it. */
#define WAIT_STEP_MAX_MS 500

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;

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
    *s = progcache__redis_store_of(store);
    if (!*s)
        return progcache__error(PROGCACHE_EINVAL, "%s: not a Redis store (NULL or another kind)",
                                fn);
    if (progcache__redis_off(*s))
        return progcache__redis_off_error(*s, fn);
    return PROGCACHE_OK;
}

static int lease_acquire(progcache_store_lease *out, progcache_store *store, const void *key,
                         size_t key_len, unsigned int lease_ms)
{
    static const char fn[] = "progcache_store_lease_acquire";
    redis_store *s;
    char name[PROGCACHE__REDIS_NAME_SIZE], px[16];
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
    if ((rc = progcache__redis_key_hex(out->hash, key, key_len)))
        return rc;
    if (getrandom(token, sizeof token, 0) != (ssize_t)sizeof token)
        return progcache__error_errno(PROGCACHE_EIO, errno, "%s: no random bytes", fn);
    progcache__hex(out->token, token, sizeof token);
    snprintf(px, sizeof px, "%u", lease_ms);
    const char *argv[] = {"SET", name, out->token, "NX", "PX", px};
    size_t lens[] = {3, progcache__redis_name(name, s, "lease:", out->hash), strlen(out->token),
                     2, 2, strlen(px)};
    redisReply *r = progcache__redis_call(s, 6, argv, lens, 0, 0, &f);
    if (!r)
        return progcache__redis_remote_error(s, fn, &f);
    out->held = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return PROGCACHE_OK;
}

/* Run a lease script on (lease name, token, arg); the integer it returns,
 * or -1 with the error set. */
static long long lease_script(redis_store *s, const char *script, const progcache_store_lease *l,
                              const char *arg, const char *fn)
{
    char name[PROGCACHE__REDIS_NAME_SIZE];
    failure f;
    const char *argv[] = {"EVAL", script, "1", name, l->token, arg};
    size_t lens[] = {4, strlen(script), 1, progcache__redis_name(name, s, "lease:", l->hash),
                     strlen(l->token), strlen(arg)};
    redisReply *r = progcache__redis_call(s, 6, argv, lens, 0, 0, &f);
    if (!r) {
        progcache__redis_remote_error(s, fn, &f);
        return -1;
    }
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    return v;
}

static int lease_renew(progcache_store *store, progcache_store_lease *lease,
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

static int lease_release(progcache_store *store, progcache_store_lease *lease)
{
    static const char fn[] = "progcache_store_lease_release";
    redis_store *s;
    char channel[PROGCACHE__REDIS_NAME_SIZE];
    if (!lease)
        return progcache__error(PROGCACHE_EINVAL, "%s: lease is NULL", fn);
    if (!lease->held)
        return PROGCACHE_ENOTFOUND;
    lease->held = 0;
    /* The value first, then the news: a waiter woken must find it. */
    if (progcache__redis_store_of(store))
        progcache__put_queue_flush(progcache__redis_store_of(store)->queue);
    int rc = lease_args(&s, store, fn);
    if (rc)
        return rc;
    progcache__redis_name(channel, s, "done:", lease->hash);
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
    redisContext *c = progcache__redis_connect(s, &f);
    if (!c) {
        progcache__redis_note_failure(s, &f, 0);
        return NULL;
    }
    const char *argv[] = {"SUBSCRIBE", channel};
    redisReply *r = progcache__redis_command(c, 2, argv, NULL, 0, &f, &err);
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

static int lease_wait(progcache_store *store, const void *key, size_t key_len,
                      unsigned int timeout_ms)
{
    static const char fn[] = "progcache_store_lease_wait";
    redis_store *s;
    char hex[PROGCACHE__REDIS_HEX_LEN + 1], entry[PROGCACHE__REDIS_NAME_SIZE],
        lease[PROGCACHE__REDIS_NAME_SIZE], channel[PROGCACHE__REDIS_NAME_SIZE];
    failure f;
    if (!key || !key_len)
        return progcache__error(PROGCACHE_EINVAL, "%s: the key is empty", fn);
    int rc = lease_args(&s, store, fn);
    if (rc || (rc = progcache__redis_key_hex(hex, key, key_len)))
        return rc;
    progcache__redis_name(channel, s, "done:", hex);
    const char *argv[] = {"EVAL", STATE_SCRIPT, "2", entry, lease};
    size_t lens[] = {4, sizeof STATE_SCRIPT - 1, 1, progcache__redis_name(entry, s, "", hex),
                     progcache__redis_name(lease, s, "lease:", hex)};
    uint64_t deadline = progcache__redis_now_ms() + timeout_ms;
    unsigned int poll_step = 10;
    /* Subscribed before the first look, so a release between the look
     * and the wait still wakes us. */
    redisContext *sub = subscribe(s, channel);
    for (;;) {
        redisReply *r = progcache__redis_call(s, 5, argv, lens, 1, 0, &f);
        if (!r) {
            rc = progcache__redis_remote_error(s, fn, &f);
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
        uint64_t now = progcache__redis_now_ms();
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
            progcache__sleep_ms(step);
            poll_step = poll_step * 2 < 250 ? poll_step * 2 : 250;
        } else if (await_message(sub, step) < 0) {
            redisFree(sub);
            sub = NULL;
        }
    }
    redisFree(sub);
    return rc;
}

const progcache_store_lease_ops progcache__redis_lease_ops = {
    PROGCACHE_STORE_LEASE_OPS_VERSION, lease_acquire, lease_renew, lease_release, lease_wait};
