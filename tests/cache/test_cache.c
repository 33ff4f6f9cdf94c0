/* The cache layer: tier semantics (with memory stores and a store that
 * fails on command), argument checks, and progcache_open on a directory. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "progcache/sys/store.h"
#include "error.h"
#include "sha256.h"

/* ---- a store that fails on command -------------------------------------
 * Wraps a memory store; each operation fails with PROGCACHE_EIO while its
 * flag is set. Its put fails without touching the wrapped store, so an
 * older value stays, as it would in a store whose write failed midway. */

typedef struct {
    progcache_store base;
    progcache_store *inner;
    int fail_get, fail_put, fail_remove;
    int puts; /* puts that reached the store, failed or not */
} flaky_store;

static int flaky_get(progcache_buf *out, progcache_store *s, const void *key, size_t len)
{
    flaky_store *f = (flaky_store *)s;
    if (f->fail_get)
        return progcache__error(PROGCACHE_EIO, "flaky store: get failed");
    return progcache_store_get(out, f->inner, key, len);
}

static int flaky_put(progcache_store *s, const void *key, size_t len, const void *data,
                     size_t size)
{
    flaky_store *f = (flaky_store *)s;
    f->puts++;
    if (f->fail_put)
        return progcache__error(PROGCACHE_EIO, "flaky store: put failed");
    return progcache_store_put(f->inner, key, len, data, size);
}

static int flaky_remove(progcache_store *s, const void *key, size_t len)
{
    flaky_store *f = (flaky_store *)s;
    if (f->fail_remove)
        return progcache__error(PROGCACHE_EIO, "flaky store: remove failed");
    return progcache_store_remove(f->inner, key, len);
}

static int flaky_clear(progcache_store *s) { return progcache_store_clear(((flaky_store *)s)->inner); }

static int flaky_count(uint64_t *out, progcache_store *s)
{
    return progcache_store_count(out, ((flaky_store *)s)->inner);
}

static int flaky_total_size(uint64_t *out, progcache_store *s)
{
    return progcache_store_total_size(out, ((flaky_store *)s)->inner);
}

static void flaky_free(progcache_store *s)
{
    progcache_store_free(((flaky_store *)s)->inner);
    free(s);
}

static flaky_store *flaky_new(void)
{
    flaky_store *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    CHECK_OK(progcache_store_memory_new(&f->inner, NULL));
    f->base.version = PROGCACHE_STORE_VERSION;
    f->base.name = "flaky";
    f->base.get = flaky_get;
    f->base.put = flaky_put;
    f->base.remove = flaky_remove;
    f->base.clear = flaky_clear;
    f->base.count = flaky_count;
    f->base.total_size = flaky_total_size;
    f->base.free = flaky_free;
    return f;
}

/* ---- helpers ----------------------------------------------------------- */

typedef struct {
    int warnings;
    char last[1024];
} log_record;

static void record_log(void *ctx, int level, const char *message)
{
    log_record *r = ctx;
    if (level == PROGCACHE_LOG_WARN)
        r->warnings++;
    snprintf(r->last, sizeof r->last, "%s", message);
}

static progcache_store *memory_store(void)
{
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_memory_new(&s, NULL));
    return s;
}

static void expect_store_value(progcache_store *s, const char *key, const char *value)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, key, strlen(key)));
    CHECK(buf.size == strlen(value) && memcmp(buf.data, value, buf.size) == 0);
    progcache_buf_free(&buf);
}

static void expect_store_miss(progcache_store *s, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, key, strlen(key)));
    progcache_buf_free(&buf);
}

static void expect_value(progcache *c, const char *key, const char *value)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, c, key, strlen(key)));
    CHECK(buf.size == strlen(value) && memcmp(buf.data, value, buf.size) == 0);
    progcache_buf_free(&buf);
}

static void expect_miss(progcache *c, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, c, key, strlen(key)));
    progcache_buf_free(&buf);
}

static void put_str(progcache *c, const char *key, const char *value)
{
    CHECK_OK(progcache_put(c, key, strlen(key), value, strlen(value)));
}

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
    progcache_store *tiers[] = {&top->base, &bottom->base};
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
    expect_store_miss(top->inner, "k");
    expect_store_value(bottom->inner, "k", "old");
    CHECK_RC(PROGCACHE_EIO, progcache_put(c, "fresh", 5, "x", 1));
    expect_store_miss(top->inner, "fresh");
    bottom->fail_put = 0;
    /* The next get refills the top from the bottom's value. */
    expect_value(c, "k", "old");
    expect_store_value(top->inner, "k", "old");

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
    expect_store_miss(top->inner, "k");
    expect_store_value(bottom->inner, "k", "newer");

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
    expect_store_miss(bottom->inner, "r");
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

/* ---- arguments --------------------------------------------------------- */

static void test_arguments(void)
{
    progcache_options opts;
    memset(&opts, 0xff, sizeof opts);
    progcache_options_init(&opts);
    CHECK(opts.version == PROGCACHE_OPTIONS_VERSION && opts.memory_size == 0 &&
          opts.max_size == 0 && opts.flags == 0 && opts.log == NULL);
    progcache_options_init(NULL);

    progcache_store *s = memory_store();
    progcache *c = (progcache *)1;

    opts.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, &opts));
    CHECK(c == NULL);
    CHECK(strstr(progcache_error_last(), "opts->version") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, "/tmp/whatever", &opts));
    CHECK(strstr(progcache_error_last(), "opts->version") != NULL);
    opts.version = PROGCACHE_OPTIONS_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, &opts));
    CHECK(strstr(progcache_error_last(), "opts->version") != NULL);
    progcache_options_init(&opts);
    opts.low_water_percent = 101;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, &opts));
    CHECK(strstr(progcache_error_last(), "low_water_percent") != NULL);

    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(NULL, &s, 1, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, NULL, 1, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 0, NULL));
    progcache_store *with_null[] = {s, NULL};
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, with_null, 2, NULL));
    CHECK(strstr(progcache_error_last(), "tiers[1]") != NULL);
    progcache_store *twice[] = {s, s};
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, twice, 2, NULL));
    CHECK(strstr(progcache_error_last(), "same store") != NULL);
    flaky_store *f = flaky_new();
    f->base.clear = NULL;
    progcache_store *partial[] = {s, &f->base};
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, partial, 2, NULL));
    CHECK(strstr(progcache_error_last(), "tiers[1]") != NULL);
    f->base.clear = flaky_clear;
    f->base.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, partial, 2, NULL));
    CHECK(strstr(progcache_error_last(), "tiers[1]->version") != NULL);
    /* A failed open leaves the stores with the caller. */
    flaky_free(&f->base);

    CHECK_RC(PROGCACHE_EINVAL, progcache_open(NULL, "/tmp/x", NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, "", NULL));
    CHECK(strstr(progcache_error_last(), "path is empty") != NULL);

    CHECK_OK(progcache_open_tiers(&c, &s, 1, NULL));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    uint64_t n;
    CHECK_RC(PROGCACHE_EINVAL, progcache_get(NULL, c, "k", 1));
    CHECK(strstr(progcache_error_last(), "out is NULL") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_get(&buf, NULL, "k", 1));
    CHECK(strstr(progcache_error_last(), "cache is NULL") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_get(&buf, c, NULL, 1));
    CHECK(strstr(progcache_error_last(), "key is empty") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_get(&buf, c, "k", 0));
    CHECK(strstr(progcache_error_last(), "key is empty") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_put(NULL, "k", 1, "v", 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_put(c, "k", 0, "v", 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_put(c, "k", 1, NULL, 1));
    CHECK(strstr(progcache_error_last(), "data is NULL") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_remove(NULL, "k", 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_remove(c, NULL, 0));
    CHECK_RC(PROGCACHE_EINVAL, progcache_clear(NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_count(NULL, c));
    CHECK_RC(PROGCACHE_EINVAL, progcache_count(&n, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_total_size(NULL, c));
    CHECK_RC(PROGCACHE_EINVAL, progcache_total_size(&n, NULL));
    CHECK(progcache_path(NULL) == NULL);
    CHECK(progcache_path(c) == NULL);
    progcache_buf_free(&buf);
    progcache_close(c);
    progcache_close(NULL);
}

/* ---- progcache_open on a directory ------------------------------------ */

/* Where the file store keeps key's entry (cuda.core's layout). */
static void entry_path(char *out, size_t size, const char *dir, const char *key)
{
    unsigned char h[PROGCACHE_SHA256_SIZE];
    char hex[2 * PROGCACHE_SHA256_SIZE + 1];
    CHECK_OK(progcache__sha256_oneshot(h, key, strlen(key)));
    progcache__hex(hex, h, sizeof h);
    snprintf(out, size, "%s/entries/%.2s/%s", dir, hex, hex + 2);
}

static void test_open_dir(void)
{
    char *dir = test_mkdtemp("cache");
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, NULL));
    CHECK(progcache_path(c) != NULL && strcmp(progcache_path(c), dir) == 0);

    uint64_t n = 99, bytes = 99;
    CHECK_OK(progcache_count(&n, c));
    CHECK(n == 0);
    expect_miss(c, "key one");
    put_str(c, "key one", "first artifact");
    put_str(c, "key two", "second");
    expect_value(c, "key one", "first artifact");
    CHECK_OK(progcache_count(&n, c));
    CHECK_OK(progcache_total_size(&bytes, c));
    CHECK(n == 2 && bytes == 14 + 6);

    /* The entry is where cuda.core looks for it. */
    char path[4096];
    entry_path(path, sizeof path, dir, "key one");
    size_t size = 0;
    char *raw = test_read_file(path, &size);
    CHECK(raw != NULL && size == 14 && memcmp(raw, "first artifact", 14) == 0);
    free(raw);

    CHECK_OK(progcache_remove(c, "key one", 7));
    expect_miss(c, "key one");
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_remove(c, "key one", 7));
    CHECK_OK(progcache_count(&n, c));
    CHECK(n == 1);
    progcache_close(c);

    /* Reopened, the entries are still there. */
    CHECK_OK(progcache_open(&c, dir, NULL));
    expect_value(c, "key two", "second");
    CHECK_OK(progcache_clear(c));
    expect_miss(c, "key two");
    CHECK_OK(progcache_count(&n, c));
    CHECK(n == 0);
    progcache_close(c);

    /* A path that is a file cannot be a cache. */
    char file[4096];
    snprintf(file, sizeof file, "%s/not-a-dir", dir);
    FILE *fp = fopen(file, "w");
    CHECK(fp != NULL);
    fclose(fp);
    c = (progcache *)1;
    CHECK_RC(PROGCACHE_EIO, progcache_open(&c, file, NULL));
    CHECK(c == NULL);
    CHECK(strstr(progcache_error_last(), "not-a-dir") != NULL);

    test_rmtree(dir);
    free(dir);
}

/* With a memory tier, repeated hits are served from memory: they still hit
 * after the entry file has gone behind the cache's back. Without one, the
 * same get misses. */
static void test_open_memory_tier(void)
{
    char *dir = test_mkdtemp("cache-mem");
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.memory_size = 1 << 20;
    progcache *with_mem = NULL, *without = NULL;
    CHECK_OK(progcache_open(&with_mem, dir, &opts));
    CHECK_OK(progcache_open(&without, dir, NULL));

    put_str(with_mem, "hot", "hot artifact");
    expect_value(with_mem, "hot", "hot artifact");
    expect_value(without, "hot", "hot artifact");

    char path[4096];
    entry_path(path, sizeof path, dir, "hot");
    CHECK(unlink(path) == 0);
    for (int i = 0; i < 3; i++)
        expect_value(with_mem, "hot", "hot artifact");
    expect_miss(without, "hot");

    /* An entry written by another handle is found on disk and then kept
     * in memory. */
    put_str(without, "cold", "from elsewhere");
    expect_value(with_mem, "cold", "from elsewhere");
    entry_path(path, sizeof path, dir, "cold");
    CHECK(unlink(path) == 0);
    expect_value(with_mem, "cold", "from elsewhere");

    /* remove takes it out of memory too. */
    CHECK_OK(progcache_remove(with_mem, "cold", 4));
    expect_miss(with_mem, "cold");

    progcache_close(with_mem);
    progcache_close(without);
    test_rmtree(dir);
    free(dir);
}

/* NULL path: progcache_default_dir(), here $PROGCACHE_DIR. */
static void test_open_default_dir(void)
{
    char *dir = test_mkdtemp("cache-default");
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/made-by-open", dir);
    CHECK(setenv("PROGCACHE_DIR", sub, 1) == 0);
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, NULL, NULL));
    CHECK(strcmp(progcache_path(c), sub) == 0);
    struct stat st;
    CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    put_str(c, "k", "v");
    expect_value(c, "k", "v");
    progcache_close(c);
    unsetenv("PROGCACHE_DIR");
    test_rmtree(dir);
    free(dir);
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
    progcache_store_free(remote->inner);
    remote->inner = remote_inner;
    remote->base.flags = PROGCACHE_STORE_SHARED;
    /* The wrapped memory store keeps metadata; pass it through. */
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_entry_meta_add(&meta, PROGCACHE_RECORD_LOWERED_NAMES, "names", 5));
    CHECK_OK(progcache_store_put_meta(remote_inner, "k", 1, "value", 5, &meta));
    remote->base.get_meta = NULL; /* a plain tier first: bytes only */
    progcache_store *tiers[] = {home, &remote->base};
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
    remote->base.flags = PROGCACHE_STORE_SHARED;
    remote->fail_get = 1;
    log_record logs = {0, ""};
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.log = record_log;
    opts.log_ctx = &logs;
    progcache_store *tiers3[] = {home, &remote->base};
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
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    test_tiers();
    test_remote_tier_meta();
    test_three_tiers();
    test_failing_tiers();
    test_threads();
    test_arguments();
    test_open_dir();
    test_open_memory_tier();
    test_open_default_dir();
    printf("test_cache: ok\n");
    return 0;
}
