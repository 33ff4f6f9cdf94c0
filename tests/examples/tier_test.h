/* Helpers of the tests of examples/tier_dir.c: directories under one
 * temporary folder, stores over them, and checks of what a store holds. */
#ifndef TIER_TEST_H
#define TIER_TEST_H

#include "check.h"
#include "progcache/sys/store.h"
#include "tier_dir.h"

/* What a tier_dir standing in for an S3 or HTTP store says it is. */
#define SHARED_TIER (PROGCACHE_STORE_PERSISTENT | PROGCACHE_STORE_SHARED)
/* A record tag of the user's own. */
#define USER_TAG 0x10001u

/* The folder every test's directories live in (test_mkdtemp). */
extern char *base_dir;

extern const char ptx[], key1[], key2[], key3[];
/* The lowered-names record meta_with_records adds. */
extern const char lowered[8];

/* base_dir/name, malloc'd. */
char *dir(const char *name);
progcache_store *open_tier(const char *path, unsigned int flags);
progcache_store *open_home(const char *path);
/* A cache over two or three stores (c NULL: two), top first. */
progcache *open_cache(progcache_store *a, progcache_store *b, progcache_store *c);

/* Kind PTX, a lowered-names record and one of USER_TAG; check_records
 * checks both are there. */
void meta_with_records(progcache_entry_meta *m);
void check_records(const progcache_entry_meta *m);
/* store holds key with these bytes, and the records of meta_with_records
 * (with_records) or none. */
void check_holds(progcache_store *store, const char *key, const void *data, size_t size,
                 int with_records);
void check_missing(progcache_store *store, const char *key);

#endif
