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
#include <unistd.h>

#include "clock.h"
#include "sha256.h"

/* Longest sleep between two looks at a lease while subscribed: only a lost
 * notification makes a waiter rely on it. */
#define WAIT_STEP_MAX_MS 500

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;

/* A lease's value is "<token> <host>/<pid> <key16>": the random token that
 * proves ownership, then who holds it and the first 16 hex digits of the
 * key it computes, for the progress messages of waiters and `progcache
 * remote`. Ownership is the token alone (the first 32
 * characters), so a lease written by an older progcache (the token only)
 * compares the same way. */
#define TOKEN_LEN 32
#define HOLDER_MAX 200

/* PEXPIRE only if the lease still holds our token. */
static const char RENEW_SCRIPT[] =
    "if string.sub(redis.call('GET', KEYS[1]) or '', 1, 32) == ARGV[1] then\n"
    "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "end\n"
    "return 0\n";

/* DEL only if ours; PUBLISH either way: a value stored by an owner whose
 * lease had lapsed is still worth waking the waiters for. */
static const char RELEASE_SCRIPT[] =
    "local mine = 0\n"
    "if string.sub(redis.call('GET', KEYS[1]) or '', 1, 32) == ARGV[1] then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  mine = 1\n"
    "end\n"
    "redis.call('PUBLISH', ARGV[2], 'released')\n"
    "return mine\n";

/* Is the entry there, and how long does the lease still run (PTTL: -2 no
 * lease). One round trip. */
static const char STATE_SCRIPT[] =
    "return {redis.call('EXISTS', KEYS[1]), redis.call('PTTL', KEYS[2])}\n";

/* Who holds a lease, and for how long still. */
static const char HOLDER_SCRIPT[] =
    "return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}\n";

/* "host/pid" of this process, into out. */
static void self_name(char *out, size_t size)
{
    char host[HOLDER_MAX - 16];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown-host");
    host[sizeof host - 1] = '\0';
    /* One word: a space would end it. */
    for (char *p = host; *p; p++)
        if (*p == ' ' || (unsigned char)*p < 0x20)
            *p = '_';
    snprintf(out, size, "%s/%ld", host, (long)getpid());
}

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
    char value[TOKEN_LEN + 1 + HOLDER_MAX + 18];
    char me[HOLDER_MAX], key16[17];
    self_name(me, sizeof me);
    progcache__hex(key16, key, key_len < 8 ? key_len : 8);
    snprintf(value, sizeof value, "%s %s %s", out->token, me, key16);
    const char *argv[] = {"SET", name, value, "NX", "PX", px};
    size_t lens[] = {3, progcache__redis_name(name, s, "lease:", out->hash), strlen(value),
                     2, 2, strlen(px)};
    redisReply *r = progcache__redis_call(s, 6, argv, lens, 0, &progcache__redis_small, &f);
    if (!r)
        return progcache__redis_remote_error(s, fn, &f);
    out->held = r->type == REDIS_REPLY_STATUS && r->len == 2 && !memcmp(r->str, "OK", 2);
    if (!out->held && r->type != REDIS_REPLY_NIL) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        freeReplyObject(r);
        return progcache__error(PROGCACHE_EREMOTE,
                                "%s: Redis %s: SET NX of the lease answered %s, not OK or nil", fn,
                                s->cfg.where, shape);
    }
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
    redisReply *r = progcache__redis_call(s, 6, argv, lens, 0, &progcache__redis_small, &f);
    if (!r) {
        progcache__redis_remote_error(s, fn, &f);
        return -1;
    }
    if (r->type != REDIS_REPLY_INTEGER) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        freeReplyObject(r);
        progcache__error(PROGCACHE_EREMOTE, "%s: Redis %s: EVAL of the lease script answered %s, "
                                            "not an integer",
                         fn, s->cfg.where, shape);
        return -1;
    }
    long long v = r->integer;
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
 * polls). Not pooled: a subscribed connection takes no other commands. A
 * failure is counted and told: a server that answers SUBSCRIBE with
 * something else, or too much, is a broken server. */
static redisContext *subscribe(redis_store *s, const char *channel)
{
    failure f;
    redisContext *c = progcache__redis_connect(s, &f);
    if (!c) {
        progcache__redis_note_failure(s, &f, 0);
        return NULL;
    }
    const char *argv[] = {"SUBSCRIBE", channel};
    redisReply *r =
        progcache__redis_command(&s->cfg, c, 2, argv, NULL, &progcache__redis_small, &f);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3;
    if (r && !ok) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        f.cause = PROGCACHE__CAUSE_PROTOCOL;
        snprintf(f.what, sizeof f.what, "SUBSCRIBE answered %s, not a confirmation", shape);
    }
    freeReplyObject(r);
    if (!ok) {
        progcache__redis_note_failure(s, &f, r != NULL);
        redisFree(c);
        return NULL;
    }
    return c;
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
    uint64_t deadline = progcache__remote_now_ms() + timeout_ms;
    unsigned int poll_step = 10;
    /* Subscribed before the first look, so a release between the look
     * and the wait still wakes us. */
    redisContext *sub = subscribe(s, channel);
    progcache__redis_budget message = {&progcache__redis_small, 0, 0, ""};
    for (;;) {
        redisReply *r = progcache__redis_call(s, 5, argv, lens, 1, &progcache__redis_small, &f);
        if (!r) {
            rc = progcache__redis_remote_error(s, fn, &f);
            break;
        }
        long long exists = 0, pttl = -2;
        int shaped = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                     r->element[0]->type == REDIS_REPLY_INTEGER &&
                     r->element[1]->type == REDIS_REPLY_INTEGER;
        if (shaped) {
            exists = r->element[0]->integer;
            pttl = r->element[1]->integer;
        } else {
            char shape[128];
            progcache__redis_describe(shape, sizeof shape, r);
            rc = progcache__error(PROGCACHE_EREMOTE,
                                  "%s: Redis %s: EVAL of the lease state answered %s, not two "
                                  "integers",
                                  fn, s->cfg.where, shape);
        }
        freeReplyObject(r);
        if (!shaped)
            break;
        if (exists) {
            rc = PROGCACHE_OK;
            break;
        }
        if (pttl == -2) {
            rc = PROGCACHE_ENOTFOUND;
            break;
        }
        uint64_t now = progcache__remote_now_ms();
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
        } else if (progcache__redis_await(sub, &message, step) < 0) {
            /* Lost, not RESP, or a message over its bound: told, and
             * polled from now on. */
            f.timeout = f.deadline = f.too_large = f.lost = 0;
            f.over_bound = message.broke;
            f.cause = message.broke ? PROGCACHE__CAUSE_BOUND : PROGCACHE__CAUSE_LOST;
            if (message.broke)
                snprintf(f.what, sizeof f.what,
                         "SUBSCRIBE sent a message of %s; the connection was dropped",
                         message.why);
            else
                snprintf(f.what, sizeof f.what, "the subscription failed: %s",
                         sub->errstr[0] ? sub->errstr : "I/O error");
            progcache__redis_note_failure(s, &f, 0);
            redisFree(sub);
            sub = NULL;
        }
    }
    redisFree(sub);
    return rc;
}

/* Copy value's field [from, to) into out (size bytes), printable ASCII
 * only: it is shown on terminals. */
static void field(char *out, size_t size, const char *from, const char *to)
{
    size_t n = (size_t)(to - from) < size - 1 ? (size_t)(to - from) : size - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = from[i] >= 0x20 && from[i] <= 0x7e ? from[i] : '?';
    out[n] = '\0';
}

void progcache__redis_lease_parse(progcache_store_lease_info *out, char key16[17],
                                  const char *value, size_t len, long long pttl)
{
    out->holder[0] = key16[0] = '\0';
    out->ttl_ms = pttl >= 0 ? pttl : -1;
    if (len <= TOKEN_LEN + 1 || value[TOKEN_LEN] != ' ')
        return; /* the token alone: an older progcache's lease */
    const char *end = value + len, *holder = value + TOKEN_LEN + 1;
    const char *space = memchr(holder, ' ', (size_t)(end - holder));
    field(out->holder, sizeof out->holder, holder, space ? space : end);
    if (space)
        field(key16, 17, space + 1, end);
}

static int lease_holder(progcache_store_lease_info *out, progcache_store *store,
                        const void *key, size_t key_len)
{
    static const char fn[] = "progcache_store_lease_holder";
    redis_store *s;
    char hex[PROGCACHE__REDIS_HEX_LEN + 1], name[PROGCACHE__REDIS_NAME_SIZE];
    failure f;
    int rc = lease_args(&s, store, fn);
    if (rc || (rc = progcache__redis_key_hex(hex, key, key_len)))
        return rc;
    const char *argv[] = {"EVAL", HOLDER_SCRIPT, "1", name};
    size_t lens[] = {4, sizeof HOLDER_SCRIPT - 1, 1, progcache__redis_name(name, s, "lease:", hex)};
    redisReply *r = progcache__redis_call(s, 4, argv, lens, 1, &progcache__redis_small, &f);
    if (!r)
        return progcache__redis_remote_error(s, fn, &f);
    rc = PROGCACHE_ENOTFOUND;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_INTEGER) {
        char key16[17];
        progcache__redis_lease_parse(out, key16, r->element[0]->str, r->element[0]->len,
                                     r->element[1]->integer);
        rc = PROGCACHE_OK;
    }
    freeReplyObject(r);
    return rc;
}

const progcache_store_lease_ops progcache__redis_lease_ops = {
    PROGCACHE_STORE_LEASE_OPS_VERSION, lease_acquire, lease_renew, lease_release, lease_wait,
    lease_holder};
