/* The helpers the test_cache*.c files share; see cache_fixture.c. */
#ifndef PROGCACHE_TESTS_CACHE_FIXTURE_H
#define PROGCACHE_TESTS_CACHE_FIXTURE_H

#include "check.h"
#include "progcache/sys/store.h"
#include "wrap_store.h"

/* A memory store whose operations fail with PROGCACHE_EIO while their
 * flag is set (see cache_fixture.c); w.base is the store, w.inner the
 * memory store under it. */
typedef struct {
    fixture_wrap w;
    int fail_get, fail_put, fail_remove;
    int puts; /* puts that reached the store, failed or not */
    int gets; /* gets that reached the store, failed or not */
} flaky_store;

flaky_store *flaky_new(void);

/* What record_log() saw: the warnings, the last message. */
typedef struct {
    int warnings;
    char last[1024];
} log_record;

void record_log(void *ctx, int level, const char *message);
progcache_store *memory_store(void);
void expect_store_value(progcache_store *s, const char *key, const char *value);
void expect_store_miss(progcache_store *s, const char *key);
void expect_value(progcache *c, const char *key, const char *value);
void expect_miss(progcache *c, const char *key);
void put_str(progcache *c, const char *key, const char *value);

#endif
