/* Leases of the S3 tier (progcache/sys/store.h, "Leases"): single-flight
 * across machines without Redis, where the server offers conditional
 * create (`If-None-Match: *` on PUT: AWS S3 and others since 2024).
 *
 * A lease is the object `lease-<hex>` under the prefix (not 64 hex digits,
 * so never listed as an entry) holding "token expires_ms holder": created
 * only if absent, so one machine of many wins; an expired one (its owner
 * died) is deleted by the next that finds it, which then tries once more.
 * Renew and release check the token first (a read, then a write: a race
 * with a takeover costs at most one extra compile, never a wrong value).
 * Waiting polls the entry and the lease. A plain HTTP server (nginx's
 * WebDAV) ignores If-None-Match, so the HTTP tier offers no leases: its
 * nodes compile for themselves (docs/REMOTE.md). */
#include "store/http/http_store.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "error.h"
#include "sha256.h"

typedef progcache__http_store http_store;
typedef progcache__http_failure failure;

#define LEASE_BODY_MAX 512

static uint64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* base + prefix + 64 hex digits of SHA-256(key) (or hash given). */
static char *url_of(const http_store *s, const char *prefix, const char hash[65])
{
    size_t bl = strlen(s->cfg.base), pl = strlen(prefix);
    char *url = progcache__malloc(bl + pl + 65);
    if (url) {
        memcpy(url, s->cfg.base, bl);
        memcpy(url + bl, prefix, pl);
        memcpy(url + bl + pl, hash, 65);
    }
    return url;
}

static int hash_of(char hash[65], const void *key, size_t key_len)
{
    unsigned char d[PROGCACHE_SHA256_SIZE];
    int rc = progcache__sha256_oneshot(d, key, key_len);
    if (!rc)
        progcache__hex(hash, d, sizeof d);
    return rc;
}

static int remote_error(http_store *s, const char *fn, const failure *f)
{
    progcache__http_failed(s, f);
    return progcache__error(PROGCACHE_EREMOTE, "%s: the remote tier %s: %s", fn, s->cfg.where,
                            f->what);
}

/* Read the lease at url: 1 with token and expiry, 0 when there is none,
 * or a negative code. */
static int read_lease(http_store *s, const char *url, char token[33], uint64_t *expires,
                      const char *fn)
{
    failure f;
    progcache_buf body = PROGCACHE_BUF_INIT;
    long status = progcache__http_request(s, "GET", url, NULL, 0, &body, LEASE_BODY_MAX, NULL,
                                          &f);
    int rc;
    if (status == 404) {
        rc = 0;
    } else if (status != 200) {
        rc = remote_error(s, fn, &f);
    } else {
        unsigned long long e = 0;
        char t[33] = "";
        rc = body.size && sscanf((const char *)body.data, "%32s %llu", t, &e) == 2 ? 1 : 0;
        memcpy(token, t, sizeof t);
        *expires = e; /* a lease that cannot be read is an expired one */
        if (!rc) {
            *expires = 0;
            rc = 1;
        }
    }
    progcache_buf_free(&body);
    return rc;
}

/* PUT the lease (only if absent when create is set). 1: written; 0: one
 * exists (create); negative: an error. */
static int write_lease(http_store *s, const char *url, const char *token, unsigned int lease_ms,
                       int create, const char *fn)
{
    char body[LEASE_BODY_MAX], host[128] = "?";
    failure f;
    gethostname(host, sizeof host - 1);
    int n = snprintf(body, sizeof body, "%s %llu %s/%ld\n", token,
                     (unsigned long long)(wall_ms() + lease_ms), host, (long)getpid());
    long status = progcache__http_request(s, "PUT", url, body, (size_t)n, NULL, 0,
                                          create ? "If-None-Match: *" : NULL, &f);
    if (status >= 200 && status < 300)
        return 1;
    if (create && (status == 412 || status == 409))
        return 0;
    return remote_error(s, fn, &f);
}

static int lease_acquire(progcache_store_lease *out, progcache_store *store, const void *key,
                         size_t key_len, unsigned int lease_ms)
{
    static const char fn[] = "progcache_store_lease_acquire";
    http_store *s = (http_store *)store;
    unsigned char rnd[16];
    memset(out, 0, sizeof *out);
    if (progcache__remote_is_off(&s->health, progcache__remote_now_ms()))
        return progcache__error(PROGCACHE_EREMOTE, "%s: the remote tier %s is backing off", fn,
                                s->cfg.where);
    if (hash_of(out->hash, key, key_len) || RAND_bytes(rnd, sizeof rnd) != 1)
        return progcache__error(PROGCACHE_EREMOTE, "%s: no random token", fn);
    progcache__hex(out->token, rnd, sizeof rnd);
    char *url = url_of(s, "lease-", out->hash);
    if (!url)
        return progcache__error(PROGCACHE_ENOMEM, "%s: out of memory", fn);
    int rc = 0;
    for (int attempt = 0; attempt < 2 && rc == 0; attempt++) {
        if ((rc = write_lease(s, url, out->token, lease_ms, 1, fn)) != 0)
            break;
        char token[33];
        uint64_t expires = 0;
        rc = read_lease(s, url, token, &expires, fn);
        if (rc == 1 && expires > wall_ms()) {
            rc = 0; /* held by another machine, alive */
            break;
        }
        if (rc == 1) { /* its owner died: take it over, once */
            failure f;
            long st = progcache__http_request(s, "DELETE", url, NULL, 0, NULL, 0, NULL, &f);
            rc = st >= 200 && st < 300 ? 0 : st == 404 ? 0 : remote_error(s, fn, &f);
        }
    }
    progcache__free(url);
    if (rc < 0)
        return rc;
    out->held = rc == 1;
    return PROGCACHE_OK;
}

/* 1 when the lease at url is still this token's, 0 when not, or a code. */
static int still_ours(http_store *s, const char *url, const progcache_store_lease *lease,
                      const char *fn)
{
    char token[33];
    uint64_t expires;
    int rc = read_lease(s, url, token, &expires, fn);
    return rc == 1 ? strcmp(token, lease->token) == 0 : rc;
}

static int lease_renew(progcache_store *store, progcache_store_lease *lease,
                       unsigned int lease_ms)
{
    static const char fn[] = "progcache_store_lease_renew";
    http_store *s = (http_store *)store;
    char *url = url_of(s, "lease-", lease->hash);
    if (!url)
        return progcache__error(PROGCACHE_ENOMEM, "%s: out of memory", fn);
    int rc = still_ours(s, url, lease, fn);
    if (rc == 1)
        rc = write_lease(s, url, lease->token, lease_ms, 0, fn) == 1 ? PROGCACHE_OK
                                                                     : PROGCACHE_EREMOTE;
    else if (rc == 0) {
        lease->held = 0;
        rc = PROGCACHE_ENOTFOUND;
    }
    progcache__free(url);
    return rc;
}

static int lease_release(progcache_store *store, progcache_store_lease *lease)
{
    static const char fn[] = "progcache_store_lease_release";
    http_store *s = (http_store *)store;
    progcache__put_queue_flush(s->queue); /* the value first, then the news */
    char *url = url_of(s, "lease-", lease->hash);
    lease->held = 0;
    if (!url)
        return progcache__error(PROGCACHE_ENOMEM, "%s: out of memory", fn);
    int rc = still_ours(s, url, lease, fn);
    if (rc == 1) {
        failure f;
        long st = progcache__http_request(s, "DELETE", url, NULL, 0, NULL, 0, NULL, &f);
        rc = (st >= 200 && st < 300) || st == 404 ? PROGCACHE_OK : remote_error(s, fn, &f);
    } else if (rc == 0) {
        rc = PROGCACHE_ENOTFOUND;
    }
    progcache__free(url);
    return rc;
}

static int lease_wait(progcache_store *store, const void *key, size_t key_len,
                      unsigned int timeout_ms)
{
    static const char fn[] = "progcache_store_lease_wait";
    http_store *s = (http_store *)store;
    char hash[65];
    if (hash_of(hash, key, key_len))
        return progcache__error(PROGCACHE_EREMOTE, "%s: no SHA-256", fn);
    char *entry = url_of(s, "", hash), *lease = url_of(s, "lease-", hash);
    int rc = entry && lease ? PROGCACHE_ETIMEOUT
                            : progcache__error(PROGCACHE_ENOMEM, "%s: out of memory", fn);
    double end = progcache__clock_ms() + timeout_ms;
    unsigned int pause_ms = 20;
    while (rc == PROGCACHE_ETIMEOUT) {
        failure f;
        long st = progcache__http_request(s, "HEAD", entry, NULL, 0, NULL, 0, NULL, &f);
        if (st == 200) {
            rc = PROGCACHE_OK;
            break;
        }
        if (st != 404) {
            rc = remote_error(s, fn, &f);
            break;
        }
        char token[33];
        uint64_t expires = 0;
        int held = read_lease(s, lease, token, &expires, fn);
        if (held < 0 || held == 0 || expires <= wall_ms()) {
            rc = held < 0 ? held : PROGCACHE_ENOTFOUND;
            break;
        }
        double left = end - progcache__clock_ms();
        if (left <= 0)
            break;
        struct timespec ts = {0, (long)(pause_ms < left ? pause_ms : left) * 1000000L};
        nanosleep(&ts, NULL);
        if (pause_ms < 200)
            pause_ms *= 2;
    }
    if (rc == PROGCACHE_ETIMEOUT)
        progcache__error(PROGCACHE_ETIMEOUT, "%s: the lease of %.16s... is still held after %u ms",
                         fn, hash, timeout_ms);
    progcache__free(entry);
    progcache__free(lease);
    return rc;
}

const progcache_store_lease_ops progcache__http_lease_ops = {
    PROGCACHE_STORE_LEASE_OPS_VERSION, lease_acquire, lease_renew, lease_release, lease_wait,
    NULL};
