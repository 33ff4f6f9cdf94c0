/* Internal: time, for timings, timeouts and back-off. */
#ifndef PROGCACHE_UTIL_CLOCK_H
#define PROGCACHE_UTIL_CLOCK_H

/* Milliseconds on the monotonic clock (sub-millisecond resolution): for
 * measuring intervals and bounding waits, never for dates. */
double progcache__clock_ms(void);

/* Sleep ms milliseconds, resuming after signals. */
void progcache__sleep_ms(unsigned int ms);

struct timespec;
/* *out = CLOCK_REALTIME now plus ms: the absolute deadline that
 * pthread_cond_timedwait takes (a condition variable's default clock). */
void progcache__clock_realtime_after(struct timespec *out, unsigned int ms);

#endif
