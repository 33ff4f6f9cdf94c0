/* The PCH tier's services to each of its files: dropping a feature for the
 * handle, logging (once per handle for what would repeat) and counting.
 * The lowest of the tier's files: every other one calls these, and these
 * call none of them. */
#include <stdarg.h>
#include <stdio.h>

#include "cache/cache_stats.h"
#include "pch/pch_tier.h"

void progcache__pch_tier_drop(progcache__pch_tier *tier, int *field)
{
    (void)tier;
    __atomic_store_n(field, 0, __ATOMIC_RELAXED);
}

void progcache__pch_log(const progcache_program *program, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(program->log, program->log_ctx, level, fmt, ap);
    va_end(ap);
}

int progcache__pch_log_once(progcache__pch_tier *tier, const progcache_program *program,
                            unsigned int bit, int level, const char *fmt, ...)
{
    pthread_mutex_lock(&tier->lock);
    int first = !(tier->logged & bit);
    tier->logged |= bit;
    pthread_mutex_unlock(&tier->lock);
    if (first) {
        va_list ap;
        va_start(ap, fmt);
        if (program->log)
            progcache__logv(program->log, program->log_ctx, level, fmt, ap);
        else
            progcache__logv(tier->cache_log, tier->cache_log_ctx, level, fmt, ap);
        va_end(ap);
    }
    return first;
}

void progcache__pch_count(const pch_job *job, progcache_stat stat, uint64_t n)
{
    progcache__cache_record(job->cache, stat, n);
}
