/* A remote tier's counters, back-off and voice (rules in remote_health.h). */
#include "remote/remote_health.h"

#include <stdarg.h>
#include <stdio.h>

#include "clock.h"

void progcache__remote_health_init(progcache__remote_health *h, unsigned int limit,
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

uint64_t progcache__remote_now_ms(void) { return (uint64_t)progcache__clock_ms(); }

void progcache__remote_count(progcache__remote_health *h, progcache__remote_counter c)
{
    atomic_fetch_add_explicit(&h->counters[c], 1, memory_order_relaxed);
}

int progcache__remote_is_off(progcache__remote_health *h, uint64_t now_ms)
{
    uint64_t until = atomic_load_explicit(&h->off_until_ms, memory_order_relaxed);
    if (until == 0 || now_ms >= until)
        return 0;
    progcache__remote_count(h, PROGCACHE__RC_SKIPPED);
    return 1;
}

int progcache__remote_ok(progcache__remote_health *h)
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

int progcache__remote_first(progcache__remote_health *h, progcache__remote_cause cause)
{
    unsigned int bit = 1u << cause;
    if (atomic_load_explicit(&h->told, memory_order_relaxed) & bit)
        return 0;
    return !(atomic_fetch_or_explicit(&h->told, bit, memory_order_relaxed) & bit);
}

unsigned int progcache__remote_failed(progcache__remote_health *h, int timeout, int reached,
                                     uint64_t now_ms)
{
    progcache__remote_count(h, PROGCACHE__RC_ERRORS);
    if (timeout)
        progcache__remote_count(h, PROGCACHE__RC_TIMEOUTS);
    if (reached)
        return 0;
    unsigned int n = atomic_fetch_add_explicit(&h->failures, 1, memory_order_relaxed) + 1;
    if (n < h->limit)
        return 0;
    atomic_store_explicit(&h->failures, h->limit - 1, memory_order_relaxed);
    atomic_store_explicit(&h->off_until_ms, now_ms + h->backoff_ms, memory_order_relaxed);
    atomic_store_explicit(&h->down, 1, memory_order_relaxed);
    progcache__remote_count(h, PROGCACHE__RC_BACKOFFS);
    return n;
}

void progcache__remote_counters_fill(progcache_redis_counters *out,
                                    const progcache__remote_health *h)
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

void progcache__remote_store_counters(progcache_store_counters *out,
                                      const progcache__remote_health *h)
{
    progcache_redis_counters c = PROGCACHE_REDIS_COUNTERS_INIT;
    progcache__remote_counters_fill(&c, h);
    out->hits = c.hits;
    out->misses = c.misses;
    out->errors = c.errors + c.skipped_backoff + c.dropped;
    out->stores = c.stores;
    out->rejected = c.rejected;
    out->timeouts = c.timeouts;
    out->backoffs = c.backoffs;
    out->store_errors = c.store_errors;
    out->dropped = c.dropped;
    out->newer = c.newer;
    out->too_large = c.too_large;
    out->bad_tag = c.bad_tag;
    out->over_bound = c.over_bound;
    out->deadlines = c.deadlines;
}

/* ---- telling the log ---------------------------------------------------- */

static void say(const progcache__remote_voice *v, int level, const char *suffix,
                const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    progcache__log(v->log, v->log_ctx, level, "%s %s: %s%s", v->label, v->where, msg, suffix);
}

void progcache__remote_say(const progcache__remote_voice *v, int level, const char *fmt, ...)
{
    if (!v->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    say(v, level, "", fmt, ap);
    va_end(ap);
}

static void vtell(progcache__remote_health *h, const progcache__remote_voice *v,
                  progcache__remote_cause cause, const char *fmt, va_list ap)
{
    if (!v->log)
        return;
    int first = progcache__remote_first(h, cause);
    say(v, first ? PROGCACHE_LOG_WARN : PROGCACHE_LOG_DEBUG,
        first ? " (told once: repeats are counted in progcache stats, not logged)" : "", fmt, ap);
}

void progcache__remote_tell(progcache__remote_health *h, const progcache__remote_voice *v,
                            progcache__remote_cause cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vtell(h, v, cause, fmt, ap);
    va_end(ap);
}

void progcache__remote_fault_note(progcache__remote_health *h, const progcache__remote_voice *v,
                                  const progcache__remote_fault *f)
{
    unsigned int n =
        progcache__remote_failed(h, f->timeout, f->reached, progcache__remote_now_ms());
    if (f->over_bound)
        progcache__remote_count(h, PROGCACHE__RC_OVER_BOUND);
    if (f->deadline)
        progcache__remote_count(h, PROGCACHE__RC_DEADLINES);
    progcache__remote_tell(h, v, f->cause, "%s", f->what);
    if (n)
        progcache__remote_tell(h, v, PROGCACHE__CAUSE_BACKOFF,
                               "%u failures in a row: the remote tier is off for %u ms (gets "
                               "miss, puts are dropped, every process compiles for itself), "
                               "then tried again",
                               n, h->backoff_ms);
}

void progcache__remote_note_ok(progcache__remote_health *h, const progcache__remote_voice *v)
{
    if (progcache__remote_ok(h))
        progcache__remote_say(v, PROGCACHE_LOG_INFO,
                              "reachable again; the remote tier is back in use");
}

void progcache__remote_not_stored(progcache__remote_health *h, const progcache__remote_voice *v,
                                  progcache__remote_cause cause, const char *fmt, ...)
{
    progcache__remote_count(h, PROGCACHE__RC_STORE_ERRORS);
    if (cause == PROGCACHE__CAUSE_TOO_LARGE)
        progcache__remote_count(h, PROGCACHE__RC_TOO_LARGE);
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    progcache__remote_tell(h, v, cause, "%s; not stored", why);
}
