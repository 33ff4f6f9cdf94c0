/* Compile-or-load with a failing file system: whatever the cache's
 * system calls do (full disk, I/O errors, permissions, read-only media),
 * the caller gets a working artifact, and the failure in cache_error and
 * cache_message; the cache is consistent afterwards. Failures are
 * injected into the Nth call of a kind (src/util/fs.c). */
#include <errno.h>

#include "cuda_fixtures.h"
#include "fs_faults.h"

int main(void)
{
    size_t size;
    unsigned char *good = fixture_scale_cubin(&size);
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "cudafaults");
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;

    const test_fs_fault *cases = test_fs_faults;
    for (size_t i = 0; i < test_fs_num_faults; i++) {
        /* For OPEN, fail the store's creation of its temp file: the opens
         * before it are the lookup, the single-flight lock file, the
         * lookup again under the lock, and tmp/. */
        progcache__fs_fail(cases[i].op, cases[i].op == PROGCACHE_FS_OPEN ? 5 : 1, cases[i].err);
        CHECK_OK(progcache_compile_or_load(&r, cache, &p));
        progcache__fs_fail_reset();
        CHECK(r.status == PROGCACHE_STATUS_MISS);
        CHECK(r.artifact.size == size && !memcmp(r.artifact.data, good, size));
        CHECK(r.cache_error != 0);
        if (!strstr(r.cache_message, cases[i].words)) {
            fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, r.cache_message, cases[i].words);
            CHECK(0);
        }
        /* Nothing half-written: the next call misses cleanly and stores. */
        CHECK_OK(progcache_compile_or_load(&r, cache, &p));
        CHECK(r.status == PROGCACHE_STATUS_MISS && r.cache_error == 0);
        CHECK_OK(progcache_compile_or_load(&r, cache, &p));
        CHECK(r.status == PROGCACHE_STATUS_HIT);
        CHECK(r.artifact.size == size && !memcmp(r.artifact.data, good, size));
        CHECK_OK(progcache_clear(cache));
    }
    /* The lookup itself failing (EIO on read): compiled all the same. */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p)); /* stored */
    progcache__fs_fail(PROGCACHE_FS_READ, 1, EIO);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.artifact.size == size && !memcmp(r.artifact.data, good, size));
    CHECK(r.cache_error == PROGCACHE_EIO && strstr(r.cache_message, "lookup"));

    free(good);
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
    printf("test_cuda_faults: all passed\n");
    return 0;
}
