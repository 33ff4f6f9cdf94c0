/* Internal: time, for timings, timeouts and back-off. */
#ifndef PROGCACHE_UTIL_CLOCK_H
#define PROGCACHE_UTIL_CLOCK_H

/* Milliseconds on the monotonic clock (sub-millisecond resolution): for
 * measuring intervals and bounding waits, never for dates. */
double progcache__clock_ms(void);

/* Sleep ms milliseconds, resuming after signals. */
void progcache__sleep_ms(unsigned int ms);

#include <pthread.h>

/* A condition variable whose timed waits run on the monotonic clock (a
 * default one's run on the wall clock: a step of the date back would
 * stretch a 2 s wait by as much). 0, or an errno value. */
int progcache__cond_init_monotonic(pthread_cond_t *cond);

/* *out = CLOCK_MONOTONIC now plus ms: the absolute deadline that
 * pthread_cond_timedwait takes on a progcache__cond_init_monotonic one. */
void progcache__clock_monotonic_after(struct timespec *out, unsigned int ms);

#endif
