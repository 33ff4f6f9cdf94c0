/* Cross-node single-flight: after a process holds its host's lock for a
 * key (flight.c), it takes the key's lease in the shared Redis tier, or
 * waits for the node that holds it (docs/REMOTE.md). A held lease is
 * renewed by a small thread while the compile runs, so a long compile does
 * not lose it, and released after the store, which first flushes the
 * remote write so waiting nodes find the entry when they are told. */
#include "cache/flight.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "cache/cache.h"
#include "cache/cache_stats.h"
#include "clock.h"
#include "error.h"
#include "store/store.h"

/* A lease outlives a dead owner by at most this long; a live owner renews
 * it every third of it. */
#define LEASE_MS 30000u

struct progcache__remote_lease {
    progcache_store *store;
    progcache_store_lease lease;
    pthread_t renewer;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
};

static void *renew_main(void *arg)
{
    struct progcache__remote_lease *r = arg;
    pthread_mutex_lock(&r->lock);
    while (!r->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += LEASE_MS / 3000;
        if (pthread_cond_timedwait(&r->wake, &r->lock, &until) == ETIMEDOUT && !r->stop) {
            pthread_mutex_unlock(&r->lock);
            /* Lost (expired, taken over): nothing to do but finish the
             * compile; the other node's result or ours lands either way. */
            (void)progcache_store_lease_renew(r->store, &r->lease, LEASE_MS);
            pthread_mutex_lock(&r->lock);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static struct progcache__remote_lease *hold(progcache_store *store,
                                            const progcache_store_lease *lease)
{
    struct progcache__remote_lease *r = progcache__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->store = store;
    r->lease = *lease;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->wake, NULL);
    if (pthread_create(&r->renewer, NULL, renew_main, r) != 0)
        r->stop = -1; /* no renewer: the lease lasts LEASE_MS, usually plenty */
    return r;
}

int progcache__flight_remote(progcache__flight *f, int *owner, progcache_buf *out,
                             progcache_entry_meta *meta, progcache *cache, const void *key,
                             size_t key_len, unsigned int timeout_ms)
{
    progcache_store *store = progcache__cache_lease_tier(cache);
    if (!store)
        return PROGCACHE_OK;
    double start = progcache__clock_ms();
    for (;;) {
        progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
        if (progcache_store_lease_acquire(&lease, store, key, key_len, LEASE_MS) != PROGCACHE_OK)
            return PROGCACHE_OK; /* Redis unavailable: compile without the lease */
        if (lease.held) {
            f->remote = hold(store, &lease);
            if (!f->remote)
                (void)progcache_store_lease_release(store, &lease);
            return PROGCACHE_OK;
        }
        long long spent = (long long)(progcache__clock_ms() - start);
        if (spent >= (long long)timeout_ms)
            return PROGCACHE_OK;
        int rc = progcache_store_lease_wait(store, key, key_len, timeout_ms - (unsigned)spent);
        if (rc == PROGCACHE_ENOTFOUND)
            continue; /* the owner gave up or died: try to take over */
        if (rc != PROGCACHE_OK)
            return PROGCACHE_OK; /* timed out or Redis failed: compile alone */
        /* Another node stored it: read it through the tiers (filling the
         * local ones). A miss here (evicted in between) means compile. */
        rc = progcache__cache_get_quiet(out, meta, cache, key, key_len);
        if (rc == PROGCACHE_OK)
            *owner = 0;
        return rc == PROGCACHE_ENOTFOUND ? PROGCACHE_OK : rc;
    }
}

void progcache__flight_remote_end(progcache__flight *f)
{
    struct progcache__remote_lease *r = f->remote;
    if (!r)
        return;
    f->remote = NULL;
    pthread_mutex_lock(&r->lock);
    int running = r->stop == 0;
    r->stop = 1;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    if (running)
        pthread_join(r->renewer, NULL);
    (void)progcache_store_lease_release(r->store, &r->lease);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    progcache__free(r);
}
