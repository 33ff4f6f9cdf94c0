/* The helpers test_store_file.c, test_store_file_faults.c, test_catch_up.c
 * and test_shard_record.c share; see store_file_fixture.c. */
#ifndef PROGCACHE_TESTS_STORE_FILE_FIXTURE_H
#define PROGCACHE_TESTS_STORE_FILE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "store/file/file_store.h"

/* A file store on dir (no fsync) with that cap; the test fails if it cannot. */
progcache_store *open_store(const char *dir, uint64_t max_size);
/* dir/rel exists (lstat: a link counts). */
int path_exists(const char *dir, const char *rel);
/* The names in path that do not start with a dot; 0 if it cannot be read. */
/* The entry file of key in the store at dir. */
void entry_path(char *out, size_t n, const char *dir, const void *key, size_t len);

#endif
