/* Single-flight compiles across threads and processes (see flight.h). */
#include "cache/flight.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_handle.h"
#include "cache/cache_stats.h"
#include "clock.h"
#include "error.h"
#include "fs.h"
#include "netfs.h"
#include "sha256.h"
#include "dir/dir.h"
#include "store/store_calls.h"


/* 1: locked; 0: someone else holds it; -1: locking is unavailable. */
static int try_lock(int fd, uint64_t slot)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)slot;
    fl.l_len = 1;
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
        return 1;
    return errno == EAGAIN || errno == EACCES ? 0 : -1;
}

/* A file system that refuses byte-range locks (NFS without a lock
 * manager, some FUSE file systems) refuses every one: counted each time,
 * said once per process (with the file store's lock). The caller compiles
 * without waiting: never a hang, and never a wait that passes silently. */
static void lock_refused(progcache *cache, int errnum)
{
    progcache__cache_record(cache, PROGCACHE_STAT_LOCK_FAILURES, 1);
    if (!progcache__fs_lock_warn_once())
        return;
    char why[160];
    const char *name = strerrorname_np(errnum);
    progcache__cache_log(cache, PROGCACHE_LOG_WARN, PROGCACHE__FS_NO_LOCKS_FMT, cache->path,
                         progcache__fs_strerror(why, sizeof why, errnum),
                         name ? name : "unknown errno");
}

static int open_lock_file(progcache *cache)
{
    if (!cache->path)
        return -1;
    /* A regular file only, opened without blocking: a FIFO there would
     * hang or, locked, coordinate nothing; made with the cache's mode, and
     * refused when another user's (a lock someone else holds would stall
     * every compile). Not made at all in another user's cache or one
     * opened read-only. Without the lock every process compiles for
     * itself; say so, once per handle. */
    struct stat st;
    char why[192];
    int fd = progcache__store_open_own(cache->tiers[cache->home], PROGCACHE__PLACE_FLIGHT,
                                       O_RDWR | O_CREAT, &st, why, sizeof why);
    if (fd < 0 && (errno == PROGCACHE__FS_ENOTREG || errno == EPERM) &&
        !__atomic_exchange_n(&cache->flight_warned, 1, __ATOMIC_RELAXED)) {
        int err = errno;
        char place[64];
        progcache__store_place_path(place, sizeof place, PROGCACHE__PLACE_FLIGHT);
        if (err == EPERM)
            progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                                 "cannot use %s/%s: %s; it is not used (remove it); processes "
                                 "missing the same key each compile it",
                                 cache->path, place, why);
        else
            progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                                 "cannot use %s/%s: it is %s, not a regular file (remove it); "
                                 "processes missing the same key each compile it",
                                 cache->path, place, progcache__fs_type_name(st.st_mode));
        errno = err;
    }
    return fd;
}

/* Whether this cache's directory is on a file system whose byte-range
 * locks may not reach the other clients (progcache__netfs_kind); said once
 * per process. */
static int use_lease(progcache *cache)
{
    static int said;
    if (!cache->path)
        return 0;
    int root = open(cache->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return 0;
    const char *why;
    int lease = progcache__netfs_kind(root, &why);
    close(root);
    static int said_bad;
    const char *force = progcache__netfs_bad_setting();
    /* Worded as every malformed variable is (store/file/file_settings.c) */
    if (force && !__atomic_exchange_n(&said_bad, 1, __ATOMIC_RELAXED))
        progcache__cache_log(cache, PROGCACHE_LOG_WARN,
                             "PROGCACHE_FLIGHT_LOCK=\"%.40s\": not lease, range or auto; ignored "
                             "(auto: lease files on a network file system)",
                             force);
    if (lease && cache->log && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        progcache__cache_log(cache, PROGCACHE_LOG_INFO,
                             "progcache: %s is on %s: processes of every client that miss the "
                             "same key wait for one compile through lease files in "
                             "progcache/flight.d/ (docs/SHARED.md)",
                             cache->path, why);
    return lease;
}

/* Close what a waiter opened and does not hand over to f. */
static void close_unowned(int fd, int lease_dir)
{
    if (fd >= 0)
        close(fd);
    if (lease_dir >= 0)
        close(lease_dir);
}

void progcache__flight_log(const progcache__flight *f, const progcache *cache, int level,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (f->log)
        progcache__logv(f->log, f->log_ctx, level, fmt, ap);
    else
        progcache__logv(cache->log, cache->log_ctx, level, fmt, ap);
    va_end(ap);
}

int progcache__flight_begin(progcache__flight *f, int *owner, double *waited_ms,
                            progcache_buf *out, progcache_entry_meta *meta, progcache *cache,
                            const void *key, size_t key_len, unsigned int timeout_ms)
{
    f->fd = -1;
    f->remote = NULL;
    *owner = 1;
    *waited_ms = 0;
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    if (progcache__sha256_oneshot(digest, key, key_len) != PROGCACHE_OK)
        return PROGCACHE_OK; /* compute without coordination */
    uint64_t slot = 0;
    for (int i = 0; i < 8; i++)
        slot = slot << 8 | digest[i];
    slot &= (UINT64_C(1) << 62) - 1; /* a positive off_t */

    /* On a network file system byte-range locks may exclude only this
     * client's processes: lease files there (flight_lease.c). */
    int lease_dir = -1, fd = -1;
    progcache__lease_seen seen;
    memset(&seen, 0, sizeof seen);
    if (use_lease(cache))
        lease_dir = progcache__flight_lease_dir(cache);
    else
        fd = open_lock_file(cache);
    if (fd < 0 && lease_dir < 0)
        return PROGCACHE_OK;
    double start = progcache__clock_ms();
    /* The holder on this host may itself wait the bound for another node
     * before it compiles: its waiters here give it that much more, or
     * every process of the host would compile at once when it gives up. */
    double bound = (double)timeout_ms * (progcache__cache_lease_tier(cache) ? 2 : 1);
    double next_report = start + PROGCACHE__WAIT_REPORT_MS;
    unsigned int pause = 1;
    int contended = 0;
    for (;;) {
        int locked = lease_dir >= 0
                         ? progcache__flight_lease_try(f, cache, lease_dir, digest, &seen)
                         : try_lock(fd, slot);
        if (locked != 0) {
            if (locked < 0) {
                if (lease_dir < 0)
                    lock_refused(cache, errno);
                close_unowned(fd, lease_dir);
                return PROGCACHE_OK;
            }
            if (lease_dir < 0) {
                f->fd = fd;
                f->slot = slot;
            }
            /* The holder before us may have stored the value between our
             * miss and our lock: look once more before computing. (Quiet:
             * the caller already counted its miss.) */
            int rc = progcache__cache_get_quiet(out, meta, cache, key, key_len);
            if (rc == PROGCACHE_ENOTFOUND) {
                /* This host's turn: now the other nodes sharing a remote
                 * tier, for what is left of the bound. Waiting for them
                 * counts as waiting too. */
                double before = progcache__clock_ms();
                rc = progcache__flight_remote(f, owner, out, meta, cache, key, key_len,
                                              timeout_ms, start);
                if (*owner == 0 || progcache__clock_ms() - before > 1.0)
                    contended = 1;
            } else if (rc == PROGCACHE_OK) {
                *owner = 0;
            }
            if (contended)
                *waited_ms = progcache__clock_ms() - start;
            if (*owner == 0 || rc != PROGCACHE_OK)
                progcache__flight_end(f);
            return rc == PROGCACHE_ENOTFOUND ? PROGCACHE_OK : rc;
        }
        /* Someone is computing this key: poll for its result, backing off
         * from 1 ms to 25 ms (a compile takes tens of ms at the least). */
        double now = progcache__clock_ms();
        char hex[17], holder[PROGCACHE__LEASE_HOLDER_SIZE];
        if (now - start > bound || now >= next_report) {
            progcache__hex(hex, key, key_len < 8 ? key_len : 8);
            /* A lease file names its holder, who may be on another node; a
             * byte-range lock's holder is a process of this host. */
            if (lease_dir >= 0)
                progcache__flight_lease_holder(holder, sizeof holder, &seen);
            else
                snprintf(holder, sizeof holder, "another process on this host");
        }
        if (now - start > bound) {
            close_unowned(fd, lease_dir);
            *waited_ms = now - start;
            progcache__cache_record(cache, PROGCACHE_STAT_WAIT_TIMEOUTS, 1);
            progcache__flight_log(f, cache, PROGCACHE_LOG_WARN,
                                  "progcache: gave up waiting for %s compiling key %s... after "
                                  "%.1f s (the bound, wait_timeout_ms or PROGCACHE_WAIT_TIMEOUT)"
                                  "; compiling here",
                                  holder, hex, (now - start) / 1000.0);
            return PROGCACHE_OK;
        }
        if (now >= next_report) {
            progcache__flight_log(f, cache, PROGCACHE_LOG_INFO,
                                  "progcache: waiting for %s compiling key %s... %.0f s", holder,
                                  hex, (now - start) / 1000.0);
            next_report += PROGCACHE__WAIT_REPORT_MS;
        }
        contended = 1;
        progcache__sleep_ms(pause);
        pause = pause * 2 > 25 ? 25 : pause * 2;
        int rc = progcache__cache_get_local(out, meta, cache, key, key_len);
        if (rc != PROGCACHE_ENOTFOUND) {
            close_unowned(fd, lease_dir);
            *waited_ms = progcache__clock_ms() - start;
            if (rc == PROGCACHE_OK)
                *owner = 0;
            return rc;
        }
    }
}

void progcache__flight_end(progcache__flight *f)
{
    if (!f)
        return;
    /* The remote lease first: other nodes may look as soon as it is gone,
     * and this host's waiters only after that. */
    progcache__flight_remote_end(f);
    progcache__flight_lease_end(f);
    if (f->fd < 0)
        return;
    /* Closing the descriptor drops its OFD locks. */
    close(f->fd);
    f->fd = -1;
}
