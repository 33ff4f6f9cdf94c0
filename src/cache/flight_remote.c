/* Cross-node single-flight: after a process holds its host's lock for a
 * key (flight.c), it takes the key's lease in the shared remote tier, or
 * waits for the node that holds it (docs/REMOTE.md, "Waiting for another
 * node").
 *
 * The lease is short (PROGCACHE__LEASE_MS) and renewed by a small thread
 * every third of it while the compile runs: a holder that dies stops
 * renewing, so its waiters see the lease vanish within seconds and one of
 * them takes over. A holder that lives but is stuck keeps renewing; the
 * waiter's own bound (wait_timeout_ms) ends that wait, and it compiles on
 * its own. While it waits, the waiter tells the log who it waits for and
 * for how long, every PROGCACHE__WAIT_REPORT_MS.
 *
 * The lease is released after the store, which first flushes the remote
 * write, so waiting nodes find the entry when they are told. A process
 * that takes a lease looks once more before compiling: the previous holder
 * may have stored the value and released the lease between this process's
 * miss and its acquire. */
#include "cache/flight.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "cache/cache_handle.h"
#include "cache/cache_stats.h"
#include "clock.h"
#include "error.h"
#include "sha256.h"
#include "store/store_calls.h"

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
        progcache__clock_monotonic_after(&until, PROGCACHE__LEASE_MS / 3);
        if (pthread_cond_timedwait(&r->wake, &r->lock, &until) == ETIMEDOUT && !r->stop) {
            pthread_mutex_unlock(&r->lock);
            /* Lost (expired, taken over, flushed): nothing to do but finish
             * the compile; the other node's result or ours lands either
             * way. A failure to reach the store is told by the store. */
            (void)progcache_store_lease_renew(r->store, &r->lease, PROGCACHE__LEASE_MS);
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
    /* Renewals on the monotonic clock: a step of the date must not stop
     * them (the lease would expire under a live holder). */
    if (progcache__cond_init_monotonic(&r->wake) != 0) {
        progcache__free(r);
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    if (pthread_create(&r->renewer, NULL, renew_main, r) != 0)
        r->stop = -1; /* no renewer: the lease lasts PROGCACHE__LEASE_MS */
    return r;
}

/* Who holds key's lease, for messages: "host/pid", or "another node". */
static void holder_name(char *out, size_t size, progcache_store *store, const void *key,
                        size_t key_len)
{
    progcache_store_lease_info info = PROGCACHE_STORE_LEASE_INFO_INIT;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    if (progcache_store_lease_holder(&info, store, key, key_len) == PROGCACHE_OK &&
        info.holder[0])
        snprintf(out, size, "%s", info.holder);
    else if (!out[0])
        snprintf(out, size, "another node");
    progcache__error_restore(&saved);
}

int progcache__flight_remote(progcache__flight *f, int *owner, progcache_buf *out,
                             progcache_entry_meta *meta, progcache *cache, const void *key,
                             size_t key_len, unsigned int timeout_ms, double started_ms)
{
    progcache_store *store = progcache__cache_lease_tier(cache);
    if (!store)
        return PROGCACHE_OK;
    char hex[17], holder[256] = "";
    progcache__hex(hex, key, key_len < 8 ? key_len : 8);
    double start = started_ms, next_report = progcache__clock_ms() + PROGCACHE__WAIT_REPORT_MS;
    int waited = 0, vanished = 0, refresh = 1;
    for (;;) {
        progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
        if (progcache_store_lease_acquire(&lease, store, key, key_len, PROGCACHE__LEASE_MS) !=
            PROGCACHE_OK)
            return PROGCACHE_OK; /* unreachable (the store told the log): compile alone */
        if (lease.held) {
            /* A holder may have stored it and released just before. */
            int rc = progcache__cache_get_quiet(out, meta, cache, key, key_len);
            if (rc != PROGCACHE_ENOTFOUND) {
                (void)progcache_store_lease_release(store, &lease);
                if (rc == PROGCACHE_OK)
                    *owner = 0;
                return rc;
            }
            if (vanished) {
                progcache__cache_record(cache, PROGCACHE_STAT_REMOTE_TAKEOVERS, 1);
                progcache__flight_log(f, cache, PROGCACHE_LOG_WARN,
                                      "progcache: %s stopped holding the compile of key %s... "
                                      "without storing it (it died, or failed) after %.1f s of "
                                      "waiting; compiling here",
                                      holder[0] ? holder : "another node",
                                      hex, (progcache__clock_ms() - start) / 1000.0);
            }
            f->remote = hold(store, &lease);
            if (!f->remote)
                (void)progcache_store_lease_release(store, &lease);
            return PROGCACHE_OK;
        }
        if (!waited) {
            waited = 1;
            progcache__cache_record(cache, PROGCACHE_STAT_REMOTE_WAITS, 1);
        }
        if (refresh) { /* a new holder: the first, or one that took over */
            refresh = 0;
            holder_name(holder, sizeof holder, store, key, key_len);
        }
        double now = progcache__clock_ms();
        if (now - start >= (double)timeout_ms) {
            progcache__cache_record(cache, PROGCACHE_STAT_WAIT_TIMEOUTS, 1);
            progcache__flight_log(f, cache, PROGCACHE_LOG_WARN,
                                  "progcache: gave up waiting for %s compiling key %s... after "
                                  "%.1f s (the bound: wait_timeout_ms or PROGCACHE_WAIT_TIMEOUT, "
                                  "%u ms); compiling here",
                                  holder, hex, (now - start) / 1000.0, timeout_ms);
            return PROGCACHE_OK;
        }
        if (now >= next_report) {
            holder_name(holder, sizeof holder, store, key, key_len);
            progcache__flight_log(f, cache, PROGCACHE_LOG_INFO,
                                  "progcache: waiting for %s compiling key %s... %.0f s", holder,
                                  hex, (now - start) / 1000.0);
            next_report += PROGCACHE__WAIT_REPORT_MS;
        }
        /* Wait in slices, to report between them. */
        double until = start + timeout_ms < next_report ? start + timeout_ms : next_report;
        unsigned int slice = until > now ? (unsigned int)(until - now) + 1 : 1;
        int rc = progcache_store_lease_wait(store, key, key_len, slice);
        if (rc == PROGCACHE_ETIMEOUT)
            continue;
        if (rc == PROGCACHE_ENOTFOUND) {
            vanished = refresh = 1; /* no lease and no entry: take over */
            continue;
        }
        if (rc != PROGCACHE_OK)
            return PROGCACHE_OK; /* the store failed (and told the log): compile alone */
        /* Another node stored it: read it through the tiers (filling the
         * local ones). A miss here (evicted, flushed) means compile. */
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
