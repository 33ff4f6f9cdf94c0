/* Internal: the Redis store's counters and its back-off ("circuit
 * breaker"), kept apart from the hiredis code so that the rules can be
 * tested with a clock the test controls.
 *
 * The rules: a call that failed to reach the server (no connection, a
 * timeout, a lost connection) adds one to the failures in a row; a call
 * that succeeded resets them. When they reach the limit, the store is off
 * for backoff_ms: calls return at once and are counted as skipped. The
 * count is then left one short of the limit, so the first failure after
 * the period switches the store off again at once, until a call succeeds.
 * Error replies count as errors but not as failures in a row: the server
 * is up and answering. Everything is lock-free (relaxed atomics): the
 * counters are statistics, and a race at the limit costs at most one extra
 * attempt or one extra back-off. */
#ifndef PROGCACHE_STORE_REDIS_HEALTH_H
#define PROGCACHE_STORE_REDIS_HEALTH_H

#include <stdatomic.h>
#include <stdint.h>

#include "progcache/remote.h"

typedef enum progcache__redis_counter {
    PROGCACHE__RC_HITS,
    PROGCACHE__RC_MISSES,
    PROGCACHE__RC_ERRORS,
    PROGCACHE__RC_TIMEOUTS,
    PROGCACHE__RC_STORES,
    PROGCACHE__RC_STORE_ERRORS,
    PROGCACHE__RC_REJECTED,
    PROGCACHE__RC_SKIPPED,
    PROGCACHE__RC_DROPPED,
    PROGCACHE__RC_BACKOFFS,
    PROGCACHE__RC_NEWER,
    PROGCACHE__RC_COUNT
} progcache__redis_counter;

typedef struct progcache__redis_health {
    _Atomic uint64_t counters[PROGCACHE__RC_COUNT];
    atomic_uint failures;          /* failed calls in a row */
    _Atomic uint64_t off_until_ms; /* end of the back-off; 0: never armed */
    unsigned int limit;            /* failures that switch the store off (>= 1) */
    unsigned int backoff_ms;
} progcache__redis_health;

void progcache__redis_health_init(progcache__redis_health *h, unsigned int limit,
                                  unsigned int backoff_ms);

/* Milliseconds on the monotonic clock (the now_ms the store passes). */
uint64_t progcache__redis_now_ms(void);

void progcache__redis_count(progcache__redis_health *h, progcache__redis_counter c);

/* 1 while backing off at now_ms (and the call is counted as skipped). */
int progcache__redis_is_off(progcache__redis_health *h, uint64_t now_ms);

/* A call that reached the server. */
void progcache__redis_ok(progcache__redis_health *h);

/* A failed call (timeout: it ran out of time; reached: the server answered
 * with an error, so it does not count towards back-off). Returns the
 * failures in a row when this call switched the store off, else 0. */
unsigned int progcache__redis_failed(progcache__redis_health *h, int timeout, int reached,
                                     uint64_t now_ms);

/* Copy the counters into out: the fields of out->version (1 or more). */
void progcache__redis_counters_fill(progcache_redis_counters *out,
                                    const progcache__redis_health *h);

#endif
