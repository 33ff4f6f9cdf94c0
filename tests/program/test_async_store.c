/* PROGCACHE_PROGRAM_ASYNC_STORE: the put finishes in the background;
 * progcache_flush() and progcache_close() wait for it; failures are
 * reported by flush and the log callback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_fixtures.h"

static int warnings;

static void count_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level == PROGCACHE_LOG_WARN && strstr(message, "background store"))
        __atomic_add_fetch(&warnings, 1, __ATOMIC_SEQ_CST);
}

/* A distinct program per index, so each one is a miss. */
static char *numbered_source(int i)
{
    char *s = malloc(256);
    CHECK(s != NULL);
    snprintf(s, 256, "extern \"C\" __global__ void scale(float *a) { a[0] *= %d.0f; }\n", i);
    return s;
}

static void check_present(const char *dir, const unsigned char *key,
                          const progcache_buf *expected)
{
    progcache *reader;
    CHECK_OK(progcache_open(&reader, dir, NULL));
    progcache_buf got = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&got, reader, key, PROGCACHE_KEY_SIZE));
    CHECK(got.size == expected->size && !memcmp(got.data, expected->data, got.size));
    progcache_buf_free(&got);
    progcache_close(reader);
}

static void test_flush(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "async");
    CHECK_OK(progcache_flush(cache)); /* nothing queued yet */
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD | PROGCACHE_PROGRAM_ASYNC_STORE);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.store_pending == 1 && r.cache_error == 0);
    CHECK_OK(progcache_flush(cache));
    check_present(dir, r.key, &r.artifact);
    /* Now a hit, and nothing is queued for a hit. */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.store_pending == 0);
    progcache_program_result_release(&r);
    progcache_close(cache);
    CHECK_OK(progcache_flush(NULL));
    test_rmdtemp(dir);
}

/* progcache_close() waits for every queued put. */
static void test_close_waits(void)
{
    enum { N = 12 };
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "asyncclose");
    progcache_program_result results[N];
    char *sources[N];
    for (int i = 0; i < N; i++) {
        progcache_program p =
            fixture_program(PROGCACHE_PROGRAM_NO_LOAD | PROGCACHE_PROGRAM_ASYNC_STORE);
        sources[i] = numbered_source(i);
        p.nvrtc.source = sources[i];
        results[i] = (progcache_program_result)PROGCACHE_PROGRAM_RESULT_INIT;
        CHECK_OK(progcache_compile_or_load(&results[i], cache, &p));
        CHECK(results[i].store_pending == 1);
    }
    progcache_close(cache); /* no flush: close must wait */
    for (int i = 0; i < N; i++) {
        check_present(dir, results[i].key, &results[i].artifact);
        progcache_program_result_release(&results[i]);
        free(sources[i]);
    }
    test_rmdtemp(dir);
}

static void test_background_failure(void)
{
    fixture_store_ctl ctl = {0, 1, 0};
    progcache_store *store = fixture_flaky_store(&ctl);
    progcache *cache;
    CHECK_OK(progcache_open_tiers(&cache, &store, 1, NULL));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD | PROGCACHE_PROGRAM_ASYNC_STORE);
    p.log = count_log;
    warnings = 0;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.store_pending == 1 && r.artifact.size > 1000);
    CHECK_RC(PROGCACHE_EIO, progcache_flush(cache));
    CHECK(strstr(progcache_error_last(), "background store of key"));
    CHECK(strstr(progcache_error_last(), "no space left"));
    CHECK(__atomic_load_n(&warnings, __ATOMIC_SEQ_CST) == 1);
    CHECK_OK(progcache_flush(cache)); /* reported once */

    ctl.fail_put = 0;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK_OK(progcache_flush(cache));
    CHECK(ctl.puts == 1);
    progcache_program_result_release(&r);
    progcache_close(cache);
}

int main(void)
{
    test_flush();
    test_background_failure();
    test_close_waits();
    puts("test_async_store: ok");
    return 0;
}
