/* A host name resolved within the connect deadline (remote_resolve.h).
 *
 * hiredis (the Redis tier) resolves a host by name with getaddrinfo(), which blocks for as
 * long as the resolver likes (a DNS server that never answers: the
 * resolver's timeout times its attempts times its servers, 30 s or more),
 * outside any timeout hiredis was given. So the store resolves the name
 * itself, in a thread of its own, waits for it until the connect deadline,
 * and hands hiredis a numeric address, which it does not resolve again.
 *
 * Why not glibc's getaddrinfo_a: its worker threads are started inside
 * glibc, where a sanitizer's thread interceptors do not see them, and a
 * ThreadSanitizer build (the library's CI, or a user's program) crashes in
 * their first malloc. A thread made here with pthread_create is an
 * ordinary one. It runs with every signal blocked (a program's handlers
 * never run on it), detached; one whose lookup outlived the deadline
 * finishes on its own and frees the lookup: the lookup is shared by the
 * caller and the thread, and freed by whichever leaves it last. */
#include "remote/remote_resolve.h"

#include <pthread.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"

typedef struct lookup {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    int done, rc, err;   /* getaddrinfo's return and errno */
    struct addrinfo *result;
    int refs; /* the caller and the thread, under lock */
    char host[];
} lookup;

/* Drop one reference (lock held, released here); the last frees. */
static void leave(lookup *l)
{
    int last = --l->refs == 0;
    pthread_mutex_unlock(&l->lock);
    if (!last)
        return;
    if (l->result)
        freeaddrinfo(l->result);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    progcache__free(l);
}

static void *resolve_thread(void *arg)
{
    lookup *l = arg;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(l->host, NULL, &hints, &res);
    int err = errno;
    pthread_mutex_lock(&l->lock);
    l->rc = rc;
    l->err = err;
    l->result = res;
    l->done = 1;
    pthread_cond_signal(&l->cond);
    leave(l);
    return NULL;
}

static lookup *lookup_new(const char *host)
{
    size_t len = strlen(host);
    lookup *l = progcache__calloc(1, sizeof *l + len + 1);
    if (!l)
        return NULL;
    memcpy(l->host, host, len + 1);
    int ok = progcache__cond_init_monotonic(&l->cond) == 0;
    if (ok && pthread_mutex_init(&l->lock, NULL) != 0) {
        pthread_cond_destroy(&l->cond);
        ok = 0;
    }
    if (!ok) {
        progcache__free(l);
        return NULL;
    }
    l->refs = 2;
    return l;
}

/* Start the lookup's thread, detached, with every signal blocked. */
static int start(lookup *l)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, &attr, resolve_thread, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

static void copy_addresses(progcache__remote_addrs *out, const struct addrinfo *list)
{
    for (const struct addrinfo *a = list; a && out->n < PROGCACHE__REMOTE_ADDRS; a = a->ai_next) {
        const void *at = NULL;
        if (a->ai_family == AF_INET)
            at = &((const struct sockaddr_in *)(const void *)a->ai_addr)->sin_addr;
        else if (a->ai_family == AF_INET6)
            at = &((const struct sockaddr_in6 *)(const void *)a->ai_addr)->sin6_addr;
        if (at && inet_ntop(a->ai_family, at, out->addr[out->n], sizeof out->addr[0]))
            out->n++;
    }
}

int progcache__remote_resolve(progcache__remote_addrs *out, const char *host,
                              unsigned int timeout_ms, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    unsigned char probe[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, host, probe) == 1 || inet_pton(AF_INET6, host, probe) == 1) {
        snprintf(out->addr[0], sizeof out->addr[0], "%s", host); /* numeric already */
        out->n = 1;
        return 0;
    }
    lookup *l = lookup_new(host);
    if (!l || start(l) != 0) {
        snprintf(why, why_size, "cannot resolve host %s: %s", host,
                 l ? "no thread could be started for it" : "out of memory");
        if (l) {
            pthread_mutex_lock(&l->lock);
            l->refs = 1; /* no thread holds it */
            leave(l);
        }
        return -1;
    }
    struct timespec until;
    progcache__clock_monotonic_after(&until, timeout_ms);
    pthread_mutex_lock(&l->lock);
    while (!l->done && pthread_cond_timedwait(&l->cond, &l->lock, &until) != ETIMEDOUT) {
    }
    int result = 0;
    if (!l->done) {
        snprintf(why, why_size,
                 "host %s: could not resolve within %u ms (connect_timeout_ms; is the DNS "
                 "server reachable?)",
                 host, timeout_ms);
        result = 1;
    } else if (l->rc != 0) {
        snprintf(why, why_size, "cannot resolve host %s: %s", host,
                 l->rc == EAI_SYSTEM ? strerror(l->err) : gai_strerror(l->rc));
        result = -1;
    } else {
        copy_addresses(out, l->result);
        if (!out->n) {
            snprintf(why, why_size, "cannot resolve host %s: no IPv4 or IPv6 address", host);
            result = -1;
        }
    }
    leave(l); /* the thread, when still resolving, frees it when it is done */
    return result;
}
