/* A store that passes every operation to a store it wraps: the base of
 * the tests' stores that fail, count or lie on command (a flaky tier, a
 * broken tier), written once. A test puts a fixture_wrap first in its
 * own struct, calls fixture_wrap_init, then replaces the operations it
 * changes; a replacement calls the fixture_wrap_* pass-through to reach
 * the wrapped store. */
#ifndef PROGCACHE_TESTS_WRAP_STORE_H
#define PROGCACHE_TESTS_WRAP_STORE_H

#include "progcache/sys/store.h"

typedef struct fixture_wrap {
    progcache_store base;
    progcache_store *inner; /* owned: freed with the wrapper */
} fixture_wrap;

/* get, put, remove, clear, count, total_size and free pass to inner; the
 * other operations are left out (a plain tier). free releases inner and
 * then w itself, so w must come from malloc (first in the test's struct). */
void fixture_wrap_init(fixture_wrap *w, const char *name, progcache_store *inner);

int fixture_wrap_get(progcache_buf *out, progcache_store *s, const void *key, size_t len);
int fixture_wrap_put(progcache_store *s, const void *key, size_t len, const void *data,
                     size_t size);
int fixture_wrap_remove(progcache_store *s, const void *key, size_t len);
int fixture_wrap_clear(progcache_store *s);
int fixture_wrap_count(uint64_t *out, progcache_store *s);
int fixture_wrap_total_size(uint64_t *out, progcache_store *s);
void fixture_wrap_free(progcache_store *s);

#endif
