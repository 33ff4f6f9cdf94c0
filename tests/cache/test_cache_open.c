/* The cache layer's argument checks, and progcache_open on a directory
 * (its memory tier, its default directory). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_fixture.h"
#include "error.h"
#include "sha256.h"

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
    /* get, put and free are a tier's least (the others have defaults). */
    f->w.base.put = NULL;
    progcache_store *partial[] = {s, &f->w.base};
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, partial, 2, NULL));
    CHECK(strstr(progcache_error_last(), "tiers[1]") != NULL);
    f->w.base.put = fixture_wrap_put;
    f->w.base.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, partial, 2, NULL));
    CHECK(strstr(progcache_error_last(), "tiers[1]->version") != NULL);
    /* A failed open leaves the stores with the caller. */
    fixture_wrap_free(&f->w.base);

    CHECK_RC(PROGCACHE_EINVAL, progcache_open(NULL, "/tmp/x", NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, "", NULL));
    CHECK(strstr(progcache_error_last(), "path is empty") != NULL);
    /* The Redis options go by the one version rule too (util/options.c):
     * a struct never initialised is refused, not read as version 1. */
    progcache_redis_options never = {0};
    progcache_options with_remote;
    progcache_options_init(&with_remote);
    with_remote.remote = &never;
    char *where = test_mkdtemp("cache-open-remote");
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, where, &with_remote));
    CHECK(strstr(progcache_error_last(), "opts->remote->version is 0") != NULL);
    test_rmdtemp(where);

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

    test_rmdtemp(dir);
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
    test_cache_done(without, dir);
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
    test_rmdtemp(dir);
}

int main(void)
{
    test_arguments();
    test_open_dir();
    test_open_memory_tier();
    test_open_default_dir();
    printf("test_cache_open: ok\n");
    return 0;
}
