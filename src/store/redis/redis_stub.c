/* The Redis store's entry points in a build without hiredis: they exist so
 * that programs link either way, and say how to get the real thing. The
 * real ones are in redis_store.c (with redis_conn.c and redis_lease.c),
 * compiled instead when hiredis is found
 * (src/CMakeLists.txt). */
#include "progcache/remote.h"

#ifndef PROGCACHE_HAVE_HIREDIS

#include <stdio.h>

#include "error.h"
#include "store/redis/redis_config.h"

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
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_redis_new: out is NULL");
    *out = NULL;
    /* The URL is parsed as with hiredis (redis_config.c builds
     * everywhere): one that cannot be used (an over-long socket path, a
     * password given twice) says why in either build. */
    if (opts && opts->version >= 1 && opts->url) {
        progcache__redis_url u;
        int rc = progcache__redis_url_parse(&u, opts->url);
        if (rc)
            return rc;
        progcache__redis_url_release(&u);
    }
    return unavailable("progcache_store_redis_new");
}


int progcache_redis_counters_get(progcache_redis_counters *out, const progcache_store *store)
{
    (void)out;
    (void)store;
    return unavailable("progcache_redis_counters_get");
}

int progcache_redis_status_get(progcache_redis_status *out, progcache_store *store,
                               unsigned int pings)
{
    (void)store;
    (void)pings;
    if (out && out->version >= 1) {
        out->reachable = 0;
        snprintf(out->error, sizeof out->error, "progcache was built without hiredis");
    }
    return unavailable("progcache_redis_status_get");
}

int progcache_redis_leases(progcache_store *store, progcache_redis_lease_fn fn, void *ctx)
{
    (void)store;
    (void)fn;
    (void)ctx;
    return unavailable("progcache_redis_leases");
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int progcache__redis_stub_unused;
#endif
