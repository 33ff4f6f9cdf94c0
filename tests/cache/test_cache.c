/* The cache layer's tiers: their semantics (with memory stores and a store
 * that fails on command), a remote tier's records, many threads on one
 * handle. Arguments and progcache_open are in test_cache_open.c. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_fixture.h"
#include "error.h"
#include "sha256.h"

/* ---- tiers ------------------------------------------------------------- */

static void test_tiers(void)
{
    progcache_store *top = memory_store(), *bottom = memory_store();
    progcache_store *tiers[] = {top, bottom};
    progcache *c = NULL;
    CHECK_OK(progcache_open_tiers(&c, tiers, 2, NULL));
    CHECK(progcache_path(c) == NULL);

    /* put writes every tier. */
    put_str(c, "k", "value");
    expect_store_value(top, "k", "value");
    expect_store_value(bottom, "k", "value");

    /* A hit in the lower tier is copied into the upper one. */
    CHECK_OK(progcache_store_put(bottom, "low", 3, "only below", 10));
    expect_store_miss(top, "low");
    expect_value(c, "low", "only below");
    expect_store_value(top, "low", "only below");

    /* The upper tier answers first. */
    CHECK_OK(progcache_store_put(top, "k", 1, "upper", 5));
    expect_value(c, "k", "upper");

    /* A miss in every tier: ENOTFOUND, and the last error is untouched. */
    progcache__error(PROGCACHE_EIO, "sentinel");
    expect_miss(c, "absent");
    CHECK(progcache_error_code() == PROGCACHE_EIO);
    CHECK(strcmp(progcache_error_last(), "sentinel") == 0);

    /* count and total_size are the bottom tier's. */
    CHECK_OK(progcache_store_put(top, "top only", 8, "xyz", 3));
    uint64_t n = 0, bytes = 0;
    CHECK_OK(progcache_count(&n, c));
    CHECK_OK(progcache_total_size(&bytes, c));
    CHECK(n == 2 && bytes == 5 + 10);

    /* remove: from every tier; ENOTFOUND only if no tier had it. */
    CHECK_OK(progcache_remove(c, "k", 1));
    expect_store_miss(top, "k");
    expect_store_miss(bottom, "k");
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_remove(c, "k", 1));
    CHECK_OK(progcache_remove(c, "top only", 8));
    expect_store_miss(top, "top only");
    CHECK_OK(progcache_store_put(bottom, "bottom only", 11, "b", 1));
    CHECK_OK(progcache_remove(c, "bottom only", 11));
    expect_store_miss(bottom, "bottom only");

    /* clear: every tier. */
    put_str(c, "a", "1");
    CHECK_OK(progcache_store_put(top, "t", 1, "2", 1));
    CHECK_OK(progcache_clear(c));
    CHECK_OK(progcache_store_count(&n, top));
    CHECK(n == 0);
    CHECK_OK(progcache_store_count(&n, bottom));
    CHECK(n == 0);
    expect_miss(c, "a");

    /* A single tier works too, and one buffer serves many hits. */
    progcache_close(c);
    progcache_store *only = memory_store();
    CHECK_OK(progcache_open_tiers(&c, &only, 1, NULL));
    put_str(c, "one", "tier");
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(progcache_get(&buf, c, "one", 3));
        CHECK(buf.size == 4 && strcmp((char *)buf.data, "tier") == 0);
    }
    progcache_buf_free(&buf);
    /* An empty value is stored and read back as such. */
    CHECK_OK(progcache_put(c, "empty", 5, NULL, 0));
    expect_value(c, "empty", "");
    progcache_close(c);
}

static void test_three_tiers(void)
{
    progcache_store *s[3] = {memory_store(), memory_store(), memory_store()};
    progcache *c = NULL;
    CHECK_OK(progcache_open_tiers(&c, s, 3, NULL));
    /* A hit in the bottom tier fills both tiers above. */
    CHECK_OK(progcache_store_put(s[2], "deep", 4, "d", 1));
    expect_value(c, "deep", "d");
    expect_store_value(s[0], "deep", "d");
    expect_store_value(s[1], "deep", "d");
    /* A hit in the middle fills only the top; the bottom is not written. */
    CHECK_OK(progcache_store_put(s[1], "mid", 3, "m", 1));
    expect_value(c, "mid", "m");
    expect_store_value(s[0], "mid", "m");
    expect_store_miss(s[2], "mid");
    progcache_close(c);
}

static void test_failing_tiers(void)
{
    log_record log = {0, ""};
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.log = record_log;
    opts.log_ctx = &log;

    flaky_store *top = flaky_new(), *bottom = flaky_new();
    progcache_store *tiers[] = {&top->w.base, &bottom->w.base};
    progcache *c = NULL;
    CHECK_OK(progcache_open_tiers(&c, tiers, 2, &opts));

    /* The bottom tier refuses a put: its error is returned, the upper tier
     * is not written, and an older value there is dropped. */
    put_str(c, "k", "old");
    bottom->fail_put = 1;
    top->puts = 0;
    CHECK_RC(PROGCACHE_EIO, progcache_put(c, "k", 1, "new", 3));
    CHECK(strcmp(progcache_error_last(), "flaky store: put failed") == 0);
    CHECK(top->puts == 0);
    expect_store_miss(top->w.inner, "k");
    expect_store_value(bottom->w.inner, "k", "old");
    CHECK_RC(PROGCACHE_EIO, progcache_put(c, "fresh", 5, "x", 1));
    expect_store_miss(top->w.inner, "fresh");
    bottom->fail_put = 0;
    /* The next get refills the top from the bottom's value. */
    expect_value(c, "k", "old");
    expect_store_value(top->w.inner, "k", "old");

    /* If the upper tier cannot drop the stale value either, the caller still
     * gets the bottom tier's message, and the failure is logged. */
    bottom->fail_put = 1;
    top->fail_remove = 1;
    int warnings = log.warnings;
    CHECK_RC(PROGCACHE_EIO, progcache_put(c, "k", 1, "new", 3));
    CHECK(log.warnings == warnings + 1);
    CHECK(strstr(log.last, "remove failed") != NULL);
    CHECK(strcmp(progcache_error_last(), "flaky store: put failed") == 0);
    bottom->fail_put = 0;
    top->fail_remove = 0;

    /* The upper tier refuses a put: the put still succeeds (the bottom has
     * the value), the upper tier's older value is dropped, and it is logged. */
    top->fail_put = 1;
    warnings = log.warnings;
    CHECK_OK(progcache_put(c, "k", 1, "newer", 5));
    CHECK(log.warnings == warnings + 1);
    expect_store_miss(top->w.inner, "k");
    expect_store_value(bottom->w.inner, "k", "newer");

    /* A fill of the upper tier that fails does not fail the get. */
    warnings = log.warnings;
    expect_value(c, "k", "newer");
    CHECK(log.warnings == warnings + 1);
    CHECK(strstr(log.last, "flaky tier") != NULL);
    top->fail_put = 0;

    /* An upper tier that fails a get does not hide the tier below. */
    top->fail_get = 1;
    expect_value(c, "k", "newer");
    /* When the tiers below miss, its failure is returned, not a miss. */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_EIO, progcache_get(&buf, c, "nope", 4));
    CHECK(strcmp(progcache_error_last(), "flaky store: get failed") == 0);
    progcache_buf_free(&buf);
    top->fail_get = 0;

    /* remove: a failing tier fails the call, and the others are still
     * emptied. */
    put_str(c, "r", "1");
    top->fail_remove = 1;
    CHECK_RC(PROGCACHE_EIO, progcache_remove(c, "r", 1));
    expect_store_miss(bottom->w.inner, "r");
    top->fail_remove = 0;
    CHECK_OK(progcache_remove(c, "r", 1));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_remove(c, "r", 1));
    progcache_close(c);
}

/* ---- many threads on one handle ----------------------------------------
 * Two memory tiers, the top one small enough to evict constantly, so gets
 * keep filling it from below while puts and removes go on. Values are a
 * function of the key, so every hit can be checked. */

#define THREADS 4
#define OPS 10000
#define KEYS 300

static size_t thread_value(unsigned char *value, unsigned int k)
{
    size_t size = 1 + (k * 97u) % 500;
    for (size_t j = 0; j < size; j++)
        value[j] = (unsigned char)(k + j);
    return size;
}

static void *cache_thread(void *p)
{
    progcache *c = p;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned char value[512];
    unsigned int x = (unsigned int)(uintptr_t)&buf | 1u;
    for (int op = 0; op < OPS; op++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        unsigned int k = x % KEYS;
        size_t size = thread_value(value, k);
        unsigned int what = (x >> 20) % 10;
        if (what < 6) {
            int rc = progcache_get(&buf, c, &k, sizeof k);
            if (rc == PROGCACHE_OK)
                CHECK(buf.size == size && memcmp(buf.data, value, size) == 0);
            else
                CHECK_RC(PROGCACHE_ENOTFOUND, rc);
        } else if (what < 9) {
            CHECK_OK(progcache_put(c, &k, sizeof k, value, size));
        } else {
            int rc = progcache_remove(c, &k, sizeof k);
            CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
        }
    }
    progcache_buf_free(&buf);
    return NULL;
}

static void test_threads(void)
{
    progcache_memory_options small = PROGCACHE_MEMORY_OPTIONS_INIT;
    small.max_size = 8 * 1024;
    progcache_store *tiers[2] = {NULL, memory_store()};
    CHECK_OK(progcache_store_memory_new(&tiers[0], &small));
    progcache *c = NULL;
    CHECK_OK(progcache_open_tiers(&c, tiers, 2, NULL));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, cache_thread, c) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    uint64_t n = 0;
    CHECK_OK(progcache_count(&n, c));
    CHECK(n > 0 && n <= KEYS);
    progcache_close(c);
}

/* A remote tier (SHARED) below the home directory: a hit copied up keeps
 * the entry's records even through progcache_get, which asks for none; a
 * remote tier that fails is a miss, never the caller's failure. */
static void test_remote_tier_meta(void)
{
    char *dir = test_mkdtemp("cache-remote-meta");
    progcache_store *home = NULL, *remote_inner = memory_store();
    CHECK_OK(progcache_store_file_new(&home, dir, NULL));
    flaky_store *remote = flaky_new();
    progcache_store_free(remote->w.inner);
    remote->w.inner = remote_inner;
    remote->w.base.flags = PROGCACHE_STORE_SHARED;
    /* The wrapped memory store keeps metadata; pass it through. */
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_entry_meta_add(&meta, PROGCACHE_RECORD_LOWERED_NAMES, "names", 5));
    CHECK_OK(progcache_store_put_meta(remote_inner, "k", 1, "value", 5, &meta));
    remote->w.base.get_meta = NULL; /* a plain tier first: bytes only */
    progcache_store *tiers[] = {home, &remote->w.base};
    progcache *cache = NULL;
    CHECK_OK(progcache_open_tiers(&cache, tiers, 2, NULL));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, cache, "k", 1));
    CHECK(buf.size == 5 && !memcmp(buf.data, "value", 5));
    progcache_close(cache);

    /* Now a remote tier that serves records: they land in the home. */
    test_rmtree(dir);
    CHECK_OK(progcache_store_file_new(&home, dir, NULL));
    CHECK_OK(progcache_store_memory_new(&remote_inner, NULL));
    CHECK_OK(progcache_store_put_meta(remote_inner, "k", 1, "value", 5, &meta));
    remote_inner->flags = PROGCACHE_STORE_SHARED;
    progcache_store *tiers2[] = {home, remote_inner};
    CHECK_OK(progcache_open_tiers(&cache, tiers2, 2, NULL));
    CHECK_OK(progcache_get(&buf, cache, "k", 1));
    progcache_entry_meta got = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_store_get_meta(&buf, &got, home, "k", 1));
    const unsigned char *rec;
    size_t len;
    CHECK_OK(progcache_entry_meta_find(&rec, &len, &got, PROGCACHE_RECORD_LOWERED_NAMES));
    CHECK(len == 5 && !memcmp(rec, "names", 5));
    CHECK(got.seal == PROGCACHE_SEAL_MATCHED || got.seal == PROGCACHE_SEAL_WHOLE);
    progcache_close(cache);

    /* A failing remote tier: a miss, counted, logged. */
    test_rmtree(dir);
    CHECK_OK(progcache_store_file_new(&home, dir, NULL));
    remote = flaky_new();
    remote->w.base.flags = PROGCACHE_STORE_SHARED;
    remote->fail_get = 1;
    log_record logs = {0, ""};
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.log = record_log;
    opts.log_ctx = &logs;
    progcache_store *tiers3[] = {home, &remote->w.base};
    CHECK_OK(progcache_open_tiers(&cache, tiers3, 2, &opts));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, "k", 1));
    CHECK(logs.warnings == 1 && strstr(logs.last, "remote flaky tier failed"));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    CHECK(st.remote_errors == 1 && st.misses == 1 && st.lookup_errors == 0);
    progcache_close(cache);

    progcache_entry_meta_release(&got);
    progcache_entry_meta_release(&meta);
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
}

int main(void)
{
    test_tiers();
    test_remote_tier_meta();
    test_three_tiers();
    test_failing_tiers();
    test_threads();
    printf("test_cache: ok\n");
    return 0;
}
