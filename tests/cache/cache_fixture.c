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
    ((flaky_store *)s)->gets++;
    if (((flaky_store *)s)->fail_get)
        return progcache__error(PROGCACHE_EIO, "flaky store: get failed");
    return fixture_wrap_get(out, s, key, len);
}

static int flaky_put(progcache_store *s, const void *key, size_t len, const void *data,
                     size_t size)
{
    flaky_store *f = (flaky_store *)s;
    f->puts++;
    if (f->fail_put)
        return progcache__error(PROGCACHE_EIO, "flaky store: put failed");
    return fixture_wrap_put(s, key, len, data, size);
}

static int flaky_remove(progcache_store *s, const void *key, size_t len)
{
    if (((flaky_store *)s)->fail_remove)
        return progcache__error(PROGCACHE_EIO, "flaky store: remove failed");
    return fixture_wrap_remove(s, key, len);
}

flaky_store *flaky_new(void)
{
    flaky_store *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    progcache_store *inner = NULL;
    CHECK_OK(progcache_store_memory_new(&inner, NULL));
    fixture_wrap_init(&f->w, "flaky", inner);
    f->w.base.get = flaky_get;
    f->w.base.put = flaky_put;
    f->w.base.remove = flaky_remove;
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

/* What a lookup that returned rc into buf must be: value, or a miss when
 * value is NULL. Frees buf. */
static void expect_lookup(int rc, progcache_buf *buf, const char *value)
{
    if (value) {
        CHECK_OK(rc);
        CHECK(buf->size == strlen(value) && memcmp(buf->data, value, buf->size) == 0);
    } else {
        CHECK_RC(PROGCACHE_ENOTFOUND, rc);
    }
    progcache_buf_free(buf);
}

void expect_store_value(progcache_store *s, const char *key, const char *value)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    expect_lookup(progcache_store_get(&buf, s, key, strlen(key)), &buf, value);
}

void expect_store_miss(progcache_store *s, const char *key) { expect_store_value(s, key, NULL); }

void expect_value(progcache *c, const char *key, const char *value)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    expect_lookup(progcache_get(&buf, c, key, strlen(key)), &buf, value);
}

void expect_miss(progcache *c, const char *key) { expect_value(c, key, NULL); }

void put_str(progcache *c, const char *key, const char *value)
{
    CHECK_OK(progcache_put(c, key, strlen(key), value, strlen(value)));
}
