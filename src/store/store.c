/* Calling a store through its vtable, with the argument checks every
 * backend would otherwise repeat. */
#include "error.h"
#include "progcache/sys/store.h"

static int check(progcache_store *store, const void *key, size_t key_len, const char *what)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "%s: store is NULL", what);
    if (!key || key_len == 0)
        return progcache__error(PROGCACHE_EINVAL, "%s: the key is empty", what);
    return PROGCACHE_OK;
}

int progcache_store_get(progcache_buf *out, progcache_store *store, const void *key,
                        size_t key_len)
{
    int rc = check(store, key, key_len, "progcache_store_get");
    if (rc)
        return rc;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_get: out is NULL");
    return store->get(out, store, key, key_len);
}

int progcache_store_put(progcache_store *store, const void *key, size_t key_len,
                        const void *data, size_t size)
{
    int rc = check(store, key, key_len, "progcache_store_put");
    if (rc)
        return rc;
    if (!data && size)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_put: data is NULL");
    return store->put(store, key, key_len, data, size);
}

int progcache_store_remove(progcache_store *store, const void *key, size_t key_len)
{
    int rc = check(store, key, key_len, "progcache_store_remove");
    return rc ? rc : store->remove(store, key, key_len);
}

int progcache_store_clear(progcache_store *store)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_clear: store is NULL");
    return store->clear(store);
}

int progcache_store_count(uint64_t *out, progcache_store *store)
{
    if (!store || !out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_count: NULL argument");
    return store->count(out, store);
}

int progcache_store_total_size(uint64_t *out, progcache_store *store)
{
    if (!store || !out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_total_size: NULL argument");
    return store->total_size(out, store);
}

void progcache_store_free(progcache_store *store)
{
    if (store)
        store->free(store);
}
