/* Counters and back-off of the Redis store (rules in redis_health.h). */
#include "store/redis/redis_health.h"

#include "clock.h"

void progcache__redis_health_init(progcache__redis_health *h, unsigned int limit,
                                  unsigned int backoff_ms)
{
    for (int i = 0; i < PROGCACHE__RC_COUNT; i++)
        atomic_init(&h->counters[i], 0);
    atomic_init(&h->failures, 0);
    atomic_init(&h->off_until_ms, 0);
    atomic_init(&h->told, 0);
    atomic_init(&h->down, 0);
    h->limit = limit ? limit : 1;
    h->backoff_ms = backoff_ms;
}

uint64_t progcache__redis_now_ms(void) { return (uint64_t)progcache__clock_ms(); }

void progcache__redis_count(progcache__redis_health *h, progcache__redis_counter c)
{
    atomic_fetch_add_explicit(&h->counters[c], 1, memory_order_relaxed);
}

int progcache__redis_is_off(progcache__redis_health *h, uint64_t now_ms)
{
    uint64_t until = atomic_load_explicit(&h->off_until_ms, memory_order_relaxed);
    if (until == 0 || now_ms >= until)
        return 0;
    progcache__redis_count(h, PROGCACHE__RC_SKIPPED);
    return 1;
}

int progcache__redis_ok(progcache__redis_health *h)
{
    /* Loads first: the hit path then writes no shared cache line. */
    if (atomic_load_explicit(&h->failures, memory_order_relaxed))
        atomic_store_explicit(&h->failures, 0, memory_order_relaxed);
    if (atomic_load_explicit(&h->off_until_ms, memory_order_relaxed))
        atomic_store_explicit(&h->off_until_ms, 0, memory_order_relaxed);
    if (!atomic_load_explicit(&h->down, memory_order_relaxed) ||
        !atomic_exchange_explicit(&h->down, 0, memory_order_relaxed))
        return 0;
    atomic_fetch_and_explicit(&h->told, ~(unsigned int)PROGCACHE__CAUSES_OUTAGE,
                              memory_order_relaxed);
    return 1;
}

int progcache__redis_first(progcache__redis_health *h, progcache__redis_cause cause)
{
    unsigned int bit = 1u << cause;
    if (atomic_load_explicit(&h->told, memory_order_relaxed) & bit)
        return 0;
    return !(atomic_fetch_or_explicit(&h->told, bit, memory_order_relaxed) & bit);
}

unsigned int progcache__redis_failed(progcache__redis_health *h, int timeout, int reached,
                                     uint64_t now_ms)
{
    progcache__redis_count(h, PROGCACHE__RC_ERRORS);
    if (timeout)
        progcache__redis_count(h, PROGCACHE__RC_TIMEOUTS);
    if (reached)
        return 0;
    unsigned int n = atomic_fetch_add_explicit(&h->failures, 1, memory_order_relaxed) + 1;
    if (n < h->limit)
        return 0;
    atomic_store_explicit(&h->failures, h->limit - 1, memory_order_relaxed);
    atomic_store_explicit(&h->off_until_ms, now_ms + h->backoff_ms, memory_order_relaxed);
    atomic_store_explicit(&h->down, 1, memory_order_relaxed);
    progcache__redis_count(h, PROGCACHE__RC_BACKOFFS);
    return n;
}

void progcache__redis_counters_fill(progcache_redis_counters *out,
                                    const progcache__redis_health *h)
{
#define GET(c) atomic_load_explicit(&h->counters[c], memory_order_relaxed)
    out->hits = GET(PROGCACHE__RC_HITS);
    out->misses = GET(PROGCACHE__RC_MISSES);
    out->errors = GET(PROGCACHE__RC_ERRORS);
    out->timeouts = GET(PROGCACHE__RC_TIMEOUTS);
    out->stores = GET(PROGCACHE__RC_STORES);
    out->store_errors = GET(PROGCACHE__RC_STORE_ERRORS);
    out->rejected = GET(PROGCACHE__RC_REJECTED);
    out->skipped_backoff = GET(PROGCACHE__RC_SKIPPED);
    out->dropped = GET(PROGCACHE__RC_DROPPED);
    out->backoffs = GET(PROGCACHE__RC_BACKOFFS);
    if (out->version >= 2)
        out->newer = GET(PROGCACHE__RC_NEWER);
    if (out->version >= 3) {
        out->too_large = GET(PROGCACHE__RC_TOO_LARGE);
        out->bad_tag = GET(PROGCACHE__RC_BAD_TAG);
    }
    if (out->version >= 4) {
        out->over_bound = GET(PROGCACHE__RC_OVER_BOUND);
        out->deadlines = GET(PROGCACHE__RC_DEADLINES);
    }
#undef GET
}
