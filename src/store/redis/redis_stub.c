/* The Redis store's entry points in a build without hiredis: they exist so
 * that programs link either way, and say how to get the real thing. The
 * real ones are in redis_store.c (with redis_conn.c and redis_lease.c),
 * compiled instead when hiredis is found
 * (src/CMakeLists.txt). */
#include "progcache/remote.h"

#ifndef PROGCACHE_HAVE_HIREDIS

#include "error.h"

static int unavailable(const char *fn)
{
    return progcache__error(PROGCACHE_EREMOTE,
                            "%s: progcache was built without hiredis, so the Redis tier is "
                            "unavailable; install hiredis (Debian: libhiredis-dev) and rebuild "
                            "with -DPROGCACHE_WITH_REDIS=ON",
                            fn);
}

int progcache_store_redis_new(progcache_store **out, const progcache_redis_options *opts)
{
    (void)opts;
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_redis_new: out is NULL");
    *out = NULL;
    return unavailable("progcache_store_redis_new");
}


int progcache_redis_counters_get(progcache_redis_counters *out, const progcache_store *store)
{
    (void)out;
    (void)store;
    return unavailable("progcache_redis_counters_get");
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int progcache__redis_stub_unused;
#endif
