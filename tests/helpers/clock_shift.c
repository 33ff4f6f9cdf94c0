/* LD_PRELOAD shim: a process whose wall clock steps while it runs, without
 * touching the machine's clock (tests/nfs/test_lease_clock.c). The offset,
 * in whole seconds (signed decimal), is read from the file named by
 * PROGCACHE_TEST_CLOCK_SHIFT at every call, so a test changes it at run
 * time by rewriting that file; no file, or no variable: no offset.
 * clock_gettime(CLOCK_REALTIME and its coarse form), gettimeofday and time
 * are shifted; the monotonic clocks, and what the kernel does with time
 * (a futex's absolute deadline, a file's mtime), are not: that is how a
 * step of the date looks to a program. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long shift_seconds(void)
{
    const char *path = getenv("PROGCACHE_TEST_CLOCK_SHIFT");
    if (!path || !*path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char text[32];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    return strtol(text, NULL, 10);
}

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static clock_gettime_fn real;
    if (!real)
        real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += shift_seconds();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
