/* Least-recently-used eviction (lru.h): one order, one stopping rule. */
#include "lru.h"

#include <stdlib.h>

static int older_first(const void *a, const void *b)
{
    const progcache__lru_item *x = a, *y = b;
    if (x->atime.tv_sec != y->atime.tv_sec)
        return x->atime.tv_sec < y->atime.tv_sec ? -1 : 1;
    if (x->atime.tv_nsec != y->atime.tv_nsec)
        return x->atime.tv_nsec < y->atime.tv_nsec ? -1 : 1;
    return 0;
}

void progcache__lru_sort(void *items, size_t n, size_t item_size)
{
    if (n > 1)
        qsort(items, n, item_size, older_first);
}

static const progcache__lru_item *at(const void *items, size_t i, size_t item_size)
{
    return (const progcache__lru_item *)((const char *)items + i * item_size);
}

/* Oldest first: once neither bound applies, none applies to a later one. */
static int wanted(const progcache__lru_item *it, uint64_t total, uint64_t target, int64_t cutoff)
{
    return total > target || (int64_t)it->atime.tv_sec < cutoff;
}

size_t progcache__lru_planned(const void *items, size_t n, size_t item_size, uint64_t total,
                              uint64_t target, int64_t cutoff)
{
    size_t planned = 0;
    while (planned < n && wanted(at(items, planned, item_size), total, target, cutoff))
        total -= at(items, planned++, item_size)->size;
    return planned;
}

size_t progcache__lru_evict(void *items, size_t n, size_t item_size, uint64_t *total,
                            uint64_t target, int64_t cutoff, progcache__lru_evict_fn evict,
                            void *ctx)
{
    size_t gone = 0;
    for (size_t i = 0; i < n; i++) {
        progcache__lru_item *it = (progcache__lru_item *)((char *)items + i * item_size);
        if (!wanted(it, *total, target, cutoff))
            break;
        int r = evict(ctx, it, i);
        if (r & PROGCACHE__LRU_GONE) {
            *total -= it->size;
            gone++;
        }
        if (r & PROGCACHE__LRU_STOP)
            break;
    }
    return gone;
}
