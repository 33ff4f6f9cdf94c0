/* A Redis host name resolved within the connect deadline (redis_store.h).
 *
 * hiredis resolves a host by name with getaddrinfo(), which blocks for as
 * long as the resolver likes (a DNS server that never answers: the
 * resolver's timeout times its attempts times its servers, 30 s or more),
 * outside any timeout hiredis was given. So the store resolves the name
 * itself, with glibc's getaddrinfo_a (the lookup runs in a thread of
 * glibc's), waits for it with gai_suspend until the connect deadline, and
 * hands hiredis a numeric address, which it does not resolve again.
 *
 * A lookup that did not finish in time is cancelled; one that cannot be
 * cancelled (it is running) finishes in glibc's thread, which then frees
 * it through the completion notification: the request is shared between
 * the caller and that notification and freed by whichever is last. */
#include "store/redis/redis_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"

typedef struct lookup {
    struct gaicb req;
    struct addrinfo hints;
    atomic_int refs; /* the caller, and glibc's notification */
    char host[];
} lookup;

static void drop(lookup *l)
{
    if (atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    if (l->req.ar_result)
        freeaddrinfo(l->req.ar_result);
    progcache__free(l);
}

static void on_done(union sigval v)
{
    drop(v.sival_ptr);
}

int progcache__redis_resolve(progcache__redis_addrs *out, const char *host, int port,
                             unsigned int timeout_ms, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    struct in6_addr probe;
    if (inet_pton(AF_INET, host, &probe) == 1 || inet_pton(AF_INET6, host, &probe) == 1) {
        snprintf(out->addr[0], sizeof out->addr[0], "%s", host); /* numeric already */
        out->n = 1;
        return 0;
    }
    size_t len = strlen(host);
    lookup *l = progcache__calloc(1, sizeof *l + len + 1);
    if (!l) {
        snprintf(why, why_size, "out of memory resolving %s", host);
        return -1;
    }
    memcpy(l->host, host, len + 1);
    l->hints.ai_family = AF_UNSPEC;
    l->hints.ai_socktype = SOCK_STREAM;
    l->req.ar_name = l->host;
    l->req.ar_request = &l->hints;
    atomic_init(&l->refs, 2);
    struct gaicb *list[] = {&l->req};
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = on_done;
    sev.sigev_value.sival_ptr = l;
    int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, &sev);
    if (rc != 0) {
        snprintf(why, why_size, "cannot resolve %s: %s", host, gai_strerror(rc));
        progcache__free(l); /* not queued: no notification comes */
        return -1;
    }
    uint64_t deadline = progcache__redis_now_ms() + timeout_ms;
    for (;;) {
        rc = gai_error(&l->req);
        if (rc != EAI_INPROGRESS)
            break;
        uint64_t now = progcache__redis_now_ms();
        if (now >= deadline)
            break;
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
        const struct gaicb *wait[] = {&l->req};
        gai_suspend(wait, 1, &ts); /* EAI_AGAIN (timed out), EAI_INTR: looked at above */
    }
    if (rc == EAI_INPROGRESS) {
        /* Cancelled while queued: glibc will never notify, so both
         * references are the caller's. Running: the notification frees it. */
        if (gai_cancel(&l->req) == EAI_CANCELED)
            drop(l);
        drop(l);
        snprintf(why, why_size,
                 "host %s: could not resolve within %u ms (connect_timeout_ms; is the DNS "
                 "server reachable?)",
                 host, timeout_ms);
        return 1;
    }
    if (rc != 0) {
        snprintf(why, why_size, "cannot resolve host %s: %s", host,
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        drop(l);
        return -1;
    }
    for (const struct addrinfo *a = l->req.ar_result; a && out->n < PROGCACHE__REDIS_ADDRS;
         a = a->ai_next) {
        const void *at = a->ai_family == AF_INET
                             ? (const void *)&((const struct sockaddr_in *)a->ai_addr)->sin_addr
                             : (const void *)&((const struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
        if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
            inet_ntop(a->ai_family, at, out->addr[out->n], sizeof out->addr[0]))
            out->n++;
    }
    drop(l);
    (void)port;
    if (!out->n) {
        snprintf(why, why_size, "cannot resolve host %s: no IPv4 or IPv6 address", host);
        return -1;
    }
    return 0;
}
