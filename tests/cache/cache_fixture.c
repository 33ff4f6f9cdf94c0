/* The helpers the test_cache*.c files share: a store that fails on
 * command, a log recorder, memory stores and expectations on values. */
#include "cache_fixture.h"

#include <stdlib.h>

#include "error.h"

/* ---- a store that fails on command -------------------------------------
 * Wraps a memory store; each operation fails with PROGCACHE_EIO while its
 * flag is set. Its put fails without touching the wrapped store, so an
 * older value stays, as it would in a store whose write failed midway. */

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

int flaky_clear(progcache_store *s) { return progcache_store_clear(((flaky_store *)s)->inner); }

static int flaky_count(uint64_t *out, progcache_store *s)
{
    return progcache_store_count(out, ((flaky_store *)s)->inner);
}

static int flaky_total_size(uint64_t *out, progcache_store *s)
{
    return progcache_store_total_size(out, ((flaky_store *)s)->inner);
}

void flaky_free(progcache_store *s)
{
    progcache_store_free(((flaky_store *)s)->inner);
    free(s);
}

flaky_store *flaky_new(void)
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

void record_log(void *ctx, int level, const char *message)
{
    log_record *r = ctx;
    if (level == PROGCACHE_LOG_WARN)
        r->warnings++;
    snprintf(r->last, sizeof r->last, "%s", message);
}

progcache_store *memory_store(void)
{
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_memory_new(&s, NULL));
    return s;
}

void expect_store_value(progcache_store *s, const char *key, const char *value)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, key, strlen(key)));
    CHECK(buf.size == strlen(value) && memcmp(buf.data, value, buf.size) == 0);
    progcache_buf_free(&buf);
}

void expect_store_miss(progcache_store *s, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, key, strlen(key)));
    progcache_buf_free(&buf);
}

void expect_value(progcache *c, const char *key, const char *value)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, c, key, strlen(key)));
    CHECK(buf.size == strlen(value) && memcmp(buf.data, value, buf.size) == 0);
    progcache_buf_free(&buf);
}

void expect_miss(progcache *c, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, c, key, strlen(key)));
    progcache_buf_free(&buf);
}

void put_str(progcache *c, const char *key, const char *value)
{
    CHECK_OK(progcache_put(c, key, strlen(key), value, strlen(value)));
}
