/* Internal: least-recently-used eviction over a list of candidates, the
 * one routine of the file store's eviction and prune
 * (store/file/file_evict.c) and of the PCH directory's budget
 * (cuda/pch_dir.c). What a candidate is, and how one is removed, stays
 * theirs; the order and the stopping rule are here. */
#ifndef PROGCACHE_UTIL_LRU_H
#define PROGCACHE_UTIL_LRU_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The first member of every candidate struct. */
typedef struct progcache__lru_item {
    struct timespec atime; /* last use */
    uint64_t size;         /* bytes its removal frees */
} progcache__lru_item;

/* Called for each candidate, least recently used first: PROGCACHE__LRU_GONE
 * when its bytes are gone (else it stays: replaced or used since it was
 * seen, or one to keep), with PROGCACHE__LRU_STOP to end the walk after
 * it. i is its index in the list. */
typedef int (*progcache__lru_evict_fn)(void *ctx, void *item, size_t i);
#define PROGCACHE__LRU_GONE 1
#define PROGCACHE__LRU_STOP 2

/* Remove n candidates of item_size bytes each (each starting with a
 * progcache__lru_item), sorted by progcache__lru_sort, in that order
 * while *total is over target or the candidate was last used before
 * cutoff (seconds since 1970; 0: no age bound). *total drops by the size
 * of each one removed. Returns how many were removed. */
size_t progcache__lru_evict(void *items, size_t n, size_t item_size, uint64_t *total,
                            uint64_t target, int64_t cutoff, progcache__lru_evict_fn evict,
                            void *ctx);

/* How many progcache__lru_evict would remove if every removal succeeded
 * (for a progress total), on sorted items. */
size_t progcache__lru_planned(const void *items, size_t n, size_t item_size, uint64_t total,
                              uint64_t target, int64_t cutoff);

/* Sort candidates least recently used first. */
void progcache__lru_sort(void *items, size_t n, size_t item_size);

#endif
