/* Single-flight across the clients of a network file system (flight.h;
 * docs/SHARED.md, "Network file systems"). Byte-range locks on NFS without
 * a lock manager, on sshfs and other FUSE mounts, on Lustre with
 * localflock, exclude only the processes of one client; a lease file works
 * on all of them, as ccache's lock files do on NFS:
 *
 *  - <root>/progcache/flight.d/<16 hex of the key's digest>.lock, created
 *    with O_CREAT | O_EXCL (atomic on NFSv3 and later, on FUSE and on every
 *    cluster file system): one process of all the clients gets it;
 *  - its holder refreshes it (a new line written and the mtime set, every
 *    third of PROGCACHE__LEASE_MS) from a small thread while it compiles,
 *    and removes it after the store;
 *  - a waiter watches it: it opens it again each time (open is where NFS
 *    revalidates, close-to-open) and compares what it sees (mtime, size,
 *    contents) with what it saw before, on its own monotonic clock, so
 *    clocks that differ between nodes do not matter. Unchanged for a whole
 *    lease: the holder is dead or cut off; the waiter renames the file
 *    aside, checks that the file it moved is still the one it watched (else
 *    it links it back), removes it and creates its own.
 * Every duration here is on the monotonic clock: the refresher's waits too
 * (a condition variable on CLOCK_MONOTONIC), so a step of the holder's date
 * (NTP, a VM resumed) neither stops its refreshes nor hurries a take-over.
 * The only wall-clock time is the file's mtime, set to the file server's
 * clock (UTIME_NOW), which no node compares with its own.
 * A holder stalled past a lease (a frozen VM) can thus be overtaken and
 * two nodes compile the key: each stores the same artifact, nothing wrong
 * is ever served, only one compile is wasted. */
#include "cache/flight.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cache/cache_handle.h"
#include "cache/cache_stats.h"
#include "clock.h"
#include "error.h"
#include "fs.h"
#include "dir/dir.h"
#include "store/store_calls.h"


struct progcache__flight_lease {
    int dirfd;
    char name[32];
    char token[17]; /* ours, in the file: only our own file is removed */
    unsigned long long beats;
    pthread_t refresher;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
};

typedef progcache__lease_seen lease_seen;

/* The file's contents: who holds it (for a person looking) and a beat
 * count that changes at every refresh. */
static int write_beat(struct progcache__flight_lease *l, int fd)
{
    char host[64] = "?", line[128];
    (void)gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    int n = snprintf(line, sizeof line, "progcache lease %s host=%s pid=%ld beat=%llu\n",
                     l->token, host, (long)getpid(), l->beats++);
    if (n < 0 || (size_t)n >= sizeof line)
        n = (int)sizeof line - 1;
    if (pwrite(fd, line, (size_t)n, 0) != n || ftruncate(fd, n) != 0)
        return -1;
    /* UTIME_NOW is the server's clock on NFS (SET_TO_SERVER_TIME); fsync
     * sends the write now rather than at close. */
    const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    (void)futimens(fd, now);
    return fsync(fd);
}

static void *refresh_main(void *arg)
{
    struct progcache__flight_lease *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        struct timespec until;
        progcache__clock_monotonic_after(&until, PROGCACHE__LEASE_MS / 3);
        if (pthread_cond_timedwait(&l->wake, &l->lock, &until) == ETIMEDOUT && !l->stop) {
            pthread_mutex_unlock(&l->lock);
            /* By name, not by a held descriptor: a file taken over is
             * another's now, and must not be touched. */
            int fd = progcache__fs_open_beneath(l->dirfd, l->name, O_RDWR | O_CLOEXEC, 0);
            char text[128] = {0};
            if (fd >= 0 && pread(fd, text, sizeof text - 1, 0) > 0 &&
                !strncmp(text + 16, l->token, 16))
                (void)write_beat(l, fd);
            if (fd >= 0)
                close(fd);
            pthread_mutex_lock(&l->lock);
        }
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* Observe the file as it is now. 1: seen; 0: gone; -1: cannot read. */
static int look(int dirfd, const char *name, lease_seen *now)
{
    struct stat st;
    int fd = progcache__fs_open_regular(dirfd, name, O_RDONLY, 0, &st);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    memset(now->text, 0, sizeof now->text);
    ssize_t n = pread(fd, now->text, sizeof now->text - 1, 0);
    close(fd);
    if (n < 0)
        return -1;
    now->mtime = st.st_mtim;
    now->size = st.st_size;
    return 1;
}

static int same(const lease_seen *a, const lease_seen *b)
{
    return a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->size == b->size && !strcmp(a->text, b->text);
}

/* The file has not changed for a lease: move it aside, make sure what was
 * moved is what was watched, and remove it. 1 when it is gone. */
static int take_over(int dirfd, const char *name, const lease_seen *stale)
{
    char aside[64];
    if (progcache__fs_rename_aside(dirfd, name, dirfd, "stale-", aside, sizeof aside) != 0)
        return errno == ENOENT;
    lease_seen now;
    int gone = look(dirfd, aside, &now) == 1 && same(&now, stale);
    if (!gone)
        (void)progcache__fs_linkat(dirfd, aside, dirfd, name); /* refreshed just now */
    (void)unlinkat(dirfd, aside, 0);
    return gone;
}

/* 1: created, *out is ours; 0: exists; -1: cannot be used (errno). */
static int create(struct progcache__flight_lease **out, int dirfd, const char *name)
{
    int fd = progcache__fs_open_beneath(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0)
        return errno == EEXIST ? 0 : -1;
    /* 0640 whatever the umask: a team's members read each other's leases
     * (the directory is the cache's, 02770, or 0700 and reached by nobody
     * else). */
    (void)fchmod(fd, 0640);
    struct progcache__flight_lease *l = progcache__calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        (void)unlinkat(dirfd, name, 0);
        errno = ENOMEM;
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(l->token, sizeof l->token, "%08lx%08lx", (unsigned long)getpid() & 0xffffffffUL,
             (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)) & 0xffffffffUL);
    l->dirfd = dirfd;
    snprintf(l->name, sizeof l->name, "%s", name);
    (void)write_beat(l, fd);
    close(fd);
    int cond = progcache__cond_init_monotonic(&l->wake);
    pthread_mutex_init(&l->lock, NULL);
    if (cond != 0 || pthread_create(&l->refresher, NULL, refresh_main, l) != 0) {
        /* No refresher: the lease would look stale after a lease; better
         * to coordinate nothing than to be overtaken mid-compile. */
        if (cond == 0)
            pthread_cond_destroy(&l->wake);
        pthread_mutex_destroy(&l->lock);
        (void)unlinkat(dirfd, name, 0);
        progcache__free(l);
        errno = EAGAIN;
        return -1;
    }
    *out = l;
    return 1;
}

/* One field of the lease line, "NAME=value", into out: printable ASCII
 * only, up to a space (the line is another's and may be anything). */
static void field(char *out, size_t size, const char *text, const char *name)
{
    out[0] = '\0';
    const char *p = strstr(text, name);
    if (!p)
        return;
    p += strlen(name);
    size_t n = 0;
    while (p[n] > ' ' && p[n] < 0x7f && n + 1 < size) {
        out[n] = p[n];
        n++;
    }
    out[n] = '\0';
}

void progcache__flight_lease_holder(char *out, size_t size, const progcache__lease_seen *seen)
{
    char host[64], pid[24], here[64] = "";
    field(host, sizeof host, seen->text, " host=");
    field(pid, sizeof pid, seen->text, " pid=");
    if (!host[0] || !pid[0] || strncmp(seen->text, "progcache lease ", 16) != 0) {
        snprintf(out, size, "a holder whose lease file does not say who it is");
        return;
    }
    (void)gethostname(here, sizeof here - 1);
    here[sizeof here - 1] = '\0';
    snprintf(out, size, "process %s on %s%s", pid, strcmp(host, here) ? "host " : "this host, ",
             host);
}

int progcache__flight_lease_dir(const progcache *cache)
{
    /* The file store hands out its own directories, with its modes. */
    return progcache__store_open_own_dir(cache->tiers[cache->home], PROGCACHE__PLACE_FLIGHT_D);
}

int progcache__flight_lease_try(progcache__flight *f, progcache *cache, int dirfd,
                                const unsigned char digest[8], progcache__lease_seen *seen)
{
    char name[32];
    snprintf(name, sizeof name, "%02x%02x%02x%02x%02x%02x%02x%02x.lock", digest[0], digest[1],
             digest[2], digest[3], digest[4], digest[5], digest[6], digest[7]);
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = create(&f->lease, dirfd, name);
        if (rc != 0) {
            if (rc == 1)
                progcache__cache_record(cache, PROGCACHE_STAT_FLIGHT_LEASES, 1);
            return rc;
        }
        lease_seen now;
        int got = look(dirfd, name, &now);
        if (got == 0)
            continue; /* released between our create and our look */
        if (got < 0)
            return -1;
        double t = progcache__clock_ms();
        if (!seen->valid || !same(seen, &now)) {
            now.valid = 1;
            now.since = t;
            *seen = now;
            return 0;
        }
        double unchanged = t - seen->since;
        if (unchanged < PROGCACHE__LEASE_MS)
            return 0;
        char holder[PROGCACHE__LEASE_HOLDER_SIZE];
        progcache__flight_lease_holder(holder, sizeof holder, seen);
        seen->valid = 0;
        if (!take_over(dirfd, name, &now))
            return 0;
        progcache__cache_record(cache, PROGCACHE_STAT_FLIGHT_TAKEOVERS, 1);
        char place[64];
        progcache__store_place_path(place, sizeof place, PROGCACHE__PLACE_FLIGHT_D);
        progcache__flight_log(f, cache, PROGCACHE_LOG_WARN,
                              "progcache: took over %s/%s/%s: its holder, %s, did not refresh "
                              "it for %.1f s (dead, or cut off from the file server); "
                              "compiling here",
                              cache->path, place, name, holder, unchanged / 1000.0);
    }
    return 0;
}

void progcache__flight_lease_end(progcache__flight *f)
{
    struct progcache__flight_lease *l = f->lease;
    if (!l)
        return;
    f->lease = NULL;
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->refresher, NULL);
    /* Only our own file: after a take-over the name is someone else's. */
    char text[128] = {0};
    int fd = progcache__fs_open_beneath(l->dirfd, l->name, O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0) {
        if (pread(fd, text, sizeof text - 1, 0) > 0 && !strncmp(text + 16, l->token, 16))
            (void)unlinkat(l->dirfd, l->name, 0);
        close(fd);
    }
    close(l->dirfd);
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->lock);
    progcache__free(l);
}
