/* Internal: single-flight compiles. When many threads or processes miss the
 * same key at once, one computes it and the others wait for its result.
 *
 * The lock is an OFD byte-range lock (fcntl F_OFD_SETLK) on one byte of
 * <root>/progcache/flight, at an offset derived from the key's hash: one
 * file for every key, so lock files never accumulate; different keys lock
 * different bytes, so they never wait for each other; the kernel drops the
 * lock when its holder dies, so a crashed compiler never blocks anyone; and
 * OFD locks belong to the open file, not the process, so two threads of one
 * process exclude each other too (each flight opens the file itself).
 * Where the cache directory is on a network file system, whose byte-range
 * locks may exclude only one client's processes, lease files take their
 * place (flight_lease.c; docs/SHARED.md). */
#ifndef PROGCACHE_CACHE_FLIGHT_H
#define PROGCACHE_CACHE_FLIGHT_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "error.h" /* PROGCACHE_PRINTF */
#include "progcache/cache.h"

typedef struct progcache__flight {
    int fd;        /* the lock file, or -1 when no lock is held */
    /* A held lease file (flight_lease.c), or NULL: used instead of the
     * byte-range lock where those do not reach the other clients of a
     * network file system. */
    struct progcache__flight_lease *lease;
    uint64_t slot; /* the byte locked */
    struct progcache__remote_lease *remote; /* a held Redis lease, or NULL */
    /* Told about a wait (progress every few seconds at INFO, a bound that
     * ran out at WARN); set by the caller before begin. NULL: the cache's
     * log callback. */
    progcache_log_fn log;
    void *log_ctx;
} progcache__flight;

#define PROGCACHE__FLIGHT_INIT {-1, NULL, 0, NULL, NULL, NULL}

/* Default bound on waiting for another compile, local or remote (docs/
 * REMOTE.md, "Waiting for another node"): a holder that dies frees its
 * waiters at once (on this host: the kernel drops its lock) or within a
 * lease (on another node: PROGCACHE__LEASE_MS), so the bound only matters
 * for a holder that is alive and stuck, or compiles for longer than this. */
#define PROGCACHE__FLIGHT_WAIT_MS 60000u

/* A remote lease lasts this long unless renewed; its holder renews it
 * every third of it while it compiles. So a holder that dies is replaced
 * within this time. */
#define PROGCACHE__LEASE_MS 6000u

/* A waiter tells the log how long it has been waiting this often. */
#define PROGCACHE__WAIT_REPORT_MS 2000u

/*
 * Before computing a missed key: either take the key's lock, or wait until
 * whoever holds it has stored the value.
 *  - *owner = 1: compute, store, then progcache__flight_end(). The lock is
 *    held when f->fd >= 0; it is not when the cache has no directory, the
 *    lock file cannot be used, or the wait ran past timeout_ms (then the
 *    caller computes on its own, as it would without single-flight).
 *  - *owner = 0: the value appeared while waiting and is in out: a hit.
 * *waited_ms is the time spent waiting for another holder (0 when the
 * lock was free at once). timeout_ms bounds each wait: for another node's
 * compile; for another process of this host, twice that when the cache
 * has a remote tier with leases (that process may itself wait the bound
 * for another node before it compiles).
 * Returns PROGCACHE_OK, or an error from reading the cache.
 */
int progcache__flight_begin(progcache__flight *f, int *owner, double *waited_ms,
                            progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                            const void *key, size_t key_len, unsigned int timeout_ms);

/* Release the lock and the remote lease (NULL-safe; a no-op when none is
 * held). */
void progcache__flight_end(progcache__flight *f);

/* Cross-node part (flight_remote.c), called by progcache__flight_begin
 * once it holds the host's lock and the key is still missing: take the
 * key's lease in the cache's Redis tier, or wait for the node holding it
 * (then *owner = 0 and out holds the value). No Redis tier, or Redis
 * unavailable: returns at once, *owner untouched. The wait ends
 * timeout_ms after started_ms (progcache__clock_ms), when the caller began
 * to wait for the key. */
int progcache__flight_remote(progcache__flight *f, int *owner, progcache_buf *out,
                             progcache_entry_meta *meta, progcache *cache, const void *key,
                             size_t key_len, unsigned int timeout_ms, double started_ms);

/* Pass a formatted message to f's log callback, else the cache's. */
void progcache__flight_log(const progcache__flight *f, const progcache *cache, int level,
                           const char *fmt, ...) PROGCACHE_PRINTF(4, 5);
void progcache__flight_remote_end(progcache__flight *f);

/* Lease files (flight_lease.c), for caches on a network file system
 * (progcache__netfs_kind). What a waiter last saw of the holder's file and
 * since when (progcache__clock_ms) it has not changed; start zeroed. */
typedef struct progcache__lease_seen {
    int valid;
    struct timespec mtime;
    off_t size;
    char text[128];
    double since;
} progcache__lease_seen;
/* <root>/progcache/flight.d, opened (created if missing), or -1. */
int progcache__flight_lease_dir(const progcache *cache);
/* Take the lease of the key whose digest starts with digest in dirfd, or
 * watch its holder (taking over a file unchanged for PROGCACHE__LEASE_MS).
 * 1: held (f->lease; it owns dirfd from now on); 0: another holds it;
 * -1: lease files cannot be used here. */
int progcache__flight_lease_try(progcache__flight *f, progcache *cache, int dirfd,
                                const unsigned char digest[8], progcache__lease_seen *seen);
/* Who holds a lease, from its file's line (host= and pid=), for messages:
 * "process P on host H", or "process P on this host, H"; one line whatever
 * the file holds. */
#define PROGCACHE__LEASE_HOLDER_SIZE 128
void progcache__flight_lease_holder(char *out, size_t size, const progcache__lease_seen *seen);
/* Stop refreshing and remove the lease file, if it is still ours. */
void progcache__flight_lease_end(progcache__flight *f);

#endif
