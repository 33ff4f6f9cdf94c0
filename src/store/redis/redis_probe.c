/* Checking a Redis tier from the outside (`progcache remote`): can a
 * program reach it with this configuration, how fast, what it holds, how
 * the server evicts, and which compiles hold leases now.
 *
 * The probe connects on a connection of its own, as the store would (the
 * same URL, timeouts, AUTH and SELECT), and ignores the store's back-off:
 * it is asked for an answer now. */
#include "store/redis/redis_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "options.h"
#include "clock.h"

#define DEFAULT_PINGS 5
#define MAX_PINGS 1000

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;

/* "<field>:<value>\r\n" of an INFO reply into out; "" when absent. */
static void info_field(char *out, size_t size, const char *info, const char *name)
{
    out[0] = '\0';
    size_t n = strlen(name);
    for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == ':') {
            size_t len = strcspn(p + n + 1, "\r\n");
            snprintf(out, size, "%.*s", (int)len, p + n + 1);
            return;
        }
    }
}

/* INFO <section> on c into status's fields (left empty on any failure: an
 * ACL may forbid INFO, and that does not make the tier unusable). */
static void read_info(progcache_redis_status *out, const redis_store *s, redisContext *c)
{
    const char *argv[] = {"INFO", "all"};
    failure f;
    redisReply *r = progcache__redis_command(&s->cfg, c, 2, argv, NULL, &progcache__redis_info, &f);
    if (!r || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return;
    }
    char v[64];
    info_field(out->server_version, sizeof out->server_version, r->str, "redis_version");
    info_field(v, sizeof v, r->str, "maxmemory");
    out->maxmemory = strtoull(v, NULL, 10);
    info_field(v, sizeof v, r->str, "used_memory");
    out->used_memory = strtoull(v, NULL, 10);
    info_field(out->maxmemory_policy, sizeof out->maxmemory_policy, r->str, "maxmemory_policy");
    out->policy_ok = strncmp(out->maxmemory_policy, "allkeys-", 8) == 0;
    freeReplyObject(r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* PING n times; the round trips in out. 0, or -1 with f filled. */
static int ping(progcache_redis_status *out, const redis_store *s, redisContext *c,
                unsigned int n, failure *f)
{
    double t[MAX_PINGS];
    for (unsigned int i = 0; i < n; i++) {
        const char *argv[] = {"PING"};
        double t0 = progcache__clock_ms();
        redisReply *r =
            progcache__redis_command(&s->cfg, c, 1, argv, NULL, &progcache__redis_small, f);
        t[i] = progcache__clock_ms() - t0;
        int ok = r && r->type == REDIS_REPLY_STATUS && r->len == 4 && !memcmp(r->str, "PONG", 4);
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        if (r && r->type == REDIS_REPLY_ERROR)
            snprintf(f->what, sizeof f->what, "PING refused: %s", r->str);
        else if (r && !ok)
            snprintf(f->what, sizeof f->what, "PING answered %s, not PONG", shape);
        freeReplyObject(r);
        if (!ok)
            return -1;
    }
    qsort(t, n, sizeof t[0], cmp_double);
    out->pings = n;
    out->ping_min_ms = t[0];
    out->ping_max_ms = t[n - 1];
    out->ping_median_ms = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    return 0;
}

static int count_batch(void *ctx, redis_store *s, const redisReply *names, failure *f)
{
    (void)f;
    for (size_t i = 0; i < names->elements; i++)
        *(uint64_t *)ctx += (uint64_t)progcache__redis_is_name(s, "lease:", names->element[i]);
    return PROGCACHE_OK;
}

int progcache_redis_status_get(progcache_redis_status *out, progcache_store *store,
                               unsigned int pings)
{
    static const char fn[] = "progcache_redis_status_get";
    redis_store *s = progcache__redis_store_of(store);
    if (!out || !s)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s", fn,
                                !out ? "out is NULL" : "not a Redis store (NULL or another kind)");
    int bad = progcache__version_check(out, PROGCACHE_REDIS_STATUS_VERSION, fn, "out",
                                       "progcache_redis_status");
    if (bad)
        return bad;
    memset(out, 0, sizeof *out);
    out->version = PROGCACHE_REDIS_STATUS_VERSION;
    snprintf(out->where, sizeof out->where, "%.*s", (int)sizeof out->where - 1, s->cfg.where);
    snprintf(out->prefix, sizeof out->prefix, "%s", s->cfg.prefix);
    out->auth = s->cfg.url.password != NULL;
    snprintf(out->user, sizeof out->user, "%s", s->cfg.url.user ? s->cfg.url.user : "");
    out->secret = s->cfg.hmac != NULL;
    pings = pings ? pings : DEFAULT_PINGS;
    if (pings > MAX_PINGS)
        pings = MAX_PINGS;

    failure f = {0};
    redisContext *c = progcache__redis_connect(s, &f);
    if (c && ping(out, s, c, pings, &f) == 0) {
        out->reachable = 1;
        read_info(out, s, c);
    }
    redisFree(c); /* NULL-safe */
    if (!out->reachable) {
        snprintf(out->error, sizeof out->error, "%s%s", f.what,
                 f.timeout ? " (the connect or command timeout ran out)" : "");
        return progcache__error(PROGCACHE_EREMOTE, "Redis %s: %s", s->cfg.where, out->error);
    }
    int rc = progcache__redis_measure(s, &out->entries, &out->bytes, fn);
    if (!rc)
        rc = progcache__redis_scan(s, "lease:", count_batch, &out->leases, fn);
    if (rc)
        snprintf(out->error, sizeof out->error, "%s", progcache_error_last());
    return rc;
}

/* ---- leases held now ---------------------------------------------------- */

/* The value and PTTL of each lease named, in one round trip. */
static const char LEASES_SCRIPT[] =
    "local out = {}\n"
    "for _, k in ipairs(KEYS) do\n"
    "  out[#out + 1] = redis.call('GET', k) or ''\n"
    "  out[#out + 1] = redis.call('PTTL', k)\n"
    "end\n"
    "return out\n";

typedef struct lease_walk {
    progcache_redis_lease_fn fn;
    void *ctx;
} lease_walk;

static int lease_batch(void *ctx, redis_store *s, const redisReply *names, failure *f)
{
    lease_walk *w = ctx;
    size_t n = 0;
    const char **argv = progcache__calloc(names->elements + 3, sizeof *argv);
    size_t *lens = progcache__calloc(names->elements + 3, sizeof *lens);
    const redisReply **kept = progcache__calloc(names->elements + 1, sizeof *kept);
    char numkeys[24];
    int rc = PROGCACHE_OK;
    if (!argv || !lens || !kept) {
        rc = progcache__error(PROGCACHE_ENOMEM, "out of memory listing leases");
        goto done;
    }
    for (size_t i = 0; i < names->elements; i++)
        if (progcache__redis_is_name(s, "lease:", names->element[i])) {
            kept[n] = names->element[i];
            argv[3 + n] = kept[n]->str;
            lens[3 + n] = kept[n]->len;
            n++;
        }
    if (!n)
        goto done;
    snprintf(numkeys, sizeof numkeys, "%zu", n);
    argv[0] = "EVAL";
    lens[0] = 4;
    argv[1] = LEASES_SCRIPT;
    lens[1] = sizeof LEASES_SCRIPT - 1;
    argv[2] = numkeys;
    lens[2] = strlen(numkeys);
    redisReply *r = progcache__redis_call(s, (int)(3 + n), argv, lens, 1, &progcache__redis_page, f);
    if (!r) {
        rc = PROGCACHE_EREMOTE;
        goto done;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 * n) {
        size_t skip = s->cfg.prefix_len + strlen("lease:");
        for (size_t i = 0; i < n; i++) {
            const redisReply *v = r->element[2 * i], *t = r->element[2 * i + 1];
            if (v->type != REDIS_REPLY_STRING || !v->len || t->type != REDIS_REPLY_INTEGER)
                continue; /* released or expired since the SCAN */
            progcache_store_lease_info info = PROGCACHE_STORE_LEASE_INFO_INIT;
            char key16[17], hash[PROGCACHE__REDIS_HEX_LEN + 1];
            progcache__redis_lease_parse(&info, key16, v->str, v->len, t->integer);
            memcpy(hash, kept[i]->str + skip, PROGCACHE__REDIS_HEX_LEN);
            hash[PROGCACHE__REDIS_HEX_LEN] = '\0';
            w->fn(w->ctx, hash, key16, &info);
        }
    }
    freeReplyObject(r);
done:
    progcache__free(argv);
    progcache__free(lens);
    progcache__free(kept);
    return rc;
}

int progcache_redis_leases(progcache_store *store, progcache_redis_lease_fn fn, void *ctx)
{
    static const char name[] = "progcache_redis_leases";
    redis_store *s = progcache__redis_store_of(store);
    if (!s || !fn)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s", name,
                                !fn ? "fn is NULL" : "not a Redis store (NULL or another kind)");
    lease_walk w = {fn, ctx};
    return progcache__redis_scan(s, "lease:", lease_batch, &w, name);
}
