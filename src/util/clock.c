/* The monotonic clock: every timing and bounded wait in progcache reads it
 * here (wall-clock time would jump with NTP and date changes). */
#include "clock.h"

#include <errno.h>
#include <time.h>

#include "error.h" /* PROGCACHE_HOT */

PROGCACHE_HOT
double progcache__clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void progcache__sleep_ms(unsigned int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int progcache__cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

void progcache__clock_monotonic_after(struct timespec *out, unsigned int ms)
{
    clock_gettime(CLOCK_MONOTONIC, out);
    long long ns = out->tv_nsec + (long long)(ms % 1000) * 1000000LL;
    out->tv_sec += ms / 1000 + ns / 1000000000LL;
    out->tv_nsec = (long)(ns % 1000000000LL);
}
