#include "wrap_store.h"

#include <stdlib.h>

static progcache_store *inner_of(progcache_store *s) { return ((fixture_wrap *)s)->inner; }

int fixture_wrap_get(progcache_buf *out, progcache_store *s, const void *key, size_t len)
{
    return progcache_store_get(out, inner_of(s), key, len);
}

int fixture_wrap_put(progcache_store *s, const void *key, size_t len, const void *data,
                     size_t size)
{
    return progcache_store_put(inner_of(s), key, len, data, size);
}

int fixture_wrap_remove(progcache_store *s, const void *key, size_t len)
{
    return progcache_store_remove(inner_of(s), key, len);
}

int fixture_wrap_clear(progcache_store *s) { return progcache_store_clear(inner_of(s)); }

int fixture_wrap_count(uint64_t *out, progcache_store *s)
{
    return progcache_store_count(out, inner_of(s));
}

int fixture_wrap_total_size(uint64_t *out, progcache_store *s)
{
    return progcache_store_total_size(out, inner_of(s));
}

void fixture_wrap_free(progcache_store *s)
{
    progcache_store_free(inner_of(s));
    free(s);
}

void fixture_wrap_init(fixture_wrap *w, const char *name, progcache_store *inner)
{
    w->base = (progcache_store)PROGCACHE_STORE_INIT;
    w->base.name = name;
    w->base.get = fixture_wrap_get;
    w->base.put = fixture_wrap_put;
    w->base.remove = fixture_wrap_remove;
    w->base.clear = fixture_wrap_clear;
    w->base.count = fixture_wrap_count;
    w->base.total_size = fixture_wrap_total_size;
    w->base.free = fixture_wrap_free;
    w->inner = inner;
}
