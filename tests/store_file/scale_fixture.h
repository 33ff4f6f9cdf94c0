/* Fixtures of the issue 32 tests (test_scale, test_evict_step,
 * test_shard_record): what entries/ holds, walked (the truth, not a
 * counter), and an entry written the way cuda.core writes one. */
#ifndef PROGCACHE_TESTS_SCALE_FIXTURE_H
#define PROGCACHE_TESTS_SCALE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/progcache.h"

/* The bytes of every file under entries/<2 hex>/ of dir, and (entries,
 * unless NULL) how many there are. */
uint64_t scale_measure(const char *dir, uint64_t *entries);

/* An entry of size zero bytes written as cuda.core writes one: a temp file
 * in tmp/ (made if missing), renamed into entries/<2 hex>/<62 hex>. Its
 * 64-digit name is a hash of n, with its first two digits shard's (0-255),
 * or the hash's own when shard is -1; written into name when not NULL. A
 * name already there is replaced (os.replace). */
void scale_foreign_write(const char *dir, uint64_t n, size_t size, int shard, char name[65]);

/* The store's statistics. */
progcache_stats scale_stats(progcache_store *s);

/* The counters against a walk of dir, printed: equal, or with slack, over
 * by at most slack bytes (the counts then not compared). */
void scale_check_counters(progcache_store *s, const char *dir, uint64_t slack);

#endif
