/* Opening the remote tier of progcache_open: the caller's Redis options,
 * a URL (progcache_options.remote_url), or $PROGCACHE_REMOTE. A URL whose
 * scheme names a registered tier (progcache_store_register) is opened by
 * that tier's factory; any other goes to the built-in Redis tier, which
 * refuses what it cannot use. Either way, one that cannot be set up fails
 * the open with a message saying why: a remote tier that was asked for and
 * is silently left out (or, worse, kept without the secret that was asked
 * for) is a downgrade nobody would notice (docs/CONFIG.md). A server that
 * is down is not such a failure: nothing is contacted here, and its gets
 * are misses. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cache/cache.h"
#include "config.h"
#include "error.h"
#include "options.h"
#include "progcache/remote.h"
#include "store/store.h"

_Static_assert(PROGCACHE__MIN_SECRET == PROGCACHE_REDIS_MIN_SECRET,
               "util/config.c checks secrets against the Redis tier's bound");

int progcache_default_dir(progcache_buf *out) { return progcache__config_default_dir(out); }

int progcache_default_remote(progcache_buf *url, progcache_buf *secret)
{
    return progcache__config_default_remote(url, secret);
}

int progcache_remote_secret_read(progcache_buf *secret, const char *path)
{
    return progcache__config_secret_read(secret, path);
}

/* The registered factory for url's scheme (the text before its first ':'),
 * or NULL: then url is the built-in Redis tier's. */
static progcache_store_factory factory_of(const char *url, void **ctx)
{
    const char *colon = strchr(url, ':');
    if (!colon || colon == url)
        return NULL;
    size_t len = (size_t)(colon - url);
    if (progcache__store_builtin_name(url, len))
        return NULL;
    return progcache__store_find_n(url, len, ctx);
}

/* A registered tier's factory, and the checks a tier the cache did not
 * write gets: a vtable it can call, and the store's own word that it is
 * shared (else it would not be a remote tier: the message says so). */
static int open_registered(progcache_store **out, progcache_store_factory factory, void *ctx,
                           const char *url, const progcache_store_params *params)
{
    progcache_store *store = NULL;
    int rc = factory(&store, url, params, ctx);
    if (rc == PROGCACHE_OK && !store)
        rc = progcache__error(PROGCACHE_EINVAL,
                              "the tier for %s returned PROGCACHE_OK and no store", url);
    if (rc == PROGCACHE_OK && (rc = progcache__store_check(store, "the tier's factory", url)))
        store = NULL; /* not a vtable this library can call, so not even free */
    if (rc) {
        *out = NULL;
        return rc;
    }
    *out = store;
    return PROGCACHE_OK;
}

int progcache_store_open_url(progcache_store **out, const char *url,
                             const progcache_store_params *params)
{
    if (!out || !url || !*url)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_open_url: %s",
                                !out ? "out is NULL" : "the URL is empty");
    *out = NULL;
    progcache_store_params p;
    progcache_store_params_init(&p);
    if (params) {
        int rc = progcache__version_check(params, PROGCACHE_STORE_PARAMS_VERSION,
                                          "progcache_store_open_url", "params",
                                          "progcache_store_params");
        if (rc)
            return rc;
        memcpy(&p, params, sizeof p); /* one version so far */
    }
    if (!p.max_artifact_size)
        p.max_artifact_size = PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    void *ctx = NULL;
    progcache_store_factory factory = factory_of(url, &ctx);
    if (factory)
        return open_registered(out, factory, ctx, url, &p);
    progcache_redis_options ro;
    progcache_redis_options_init(&ro);
    ro.url = url;
    ro.log = p.log;
    ro.log_ctx = p.log_ctx;
    ro.max_artifact_size = p.max_artifact_size;
    return progcache_store_redis_new(out, &ro);
}

/* The caller's Redis options: its log callback and size bound serve the
 * tier too when its own options leave them unset, so a program that gave
 * the cache a log hears why the remote tier is not used (docs/REMOTE.md,
 * "Messages"). The copy is as long as the caller's version. */
static int open_redis_options(progcache_store **out, const progcache_options *opts,
                              uint64_t min_rate)
{
    progcache_redis_options ro;
    progcache_redis_options_init(&ro);
    memcpy(&ro, opts->remote,
           opts->remote->version >= 3   ? sizeof ro
           : opts->remote->version == 2 ? offsetof(progcache_redis_options, min_rate)
                                        : offsetof(progcache_redis_options, max_artifact_size));
    ro.version = PROGCACHE_REDIS_OPTIONS_VERSION; /* the rest holds the defaults */
    if (!ro.min_rate)
        ro.min_rate = min_rate;
    if (!ro.log) {
        ro.log = opts->log;
        ro.log_ctx = opts->log_ctx;
    }
    if (!ro.max_artifact_size)
        ro.max_artifact_size = opts->max_artifact_size;
    int rc = progcache_store_redis_new(out, &ro);
    if (rc)
        progcache__error_prefix("progcache_open: the remote tier");
    return rc;
}

/* $PROGCACHE_REMOTE, with $PROGCACHE_REMOTE_SECRET_FILE for Redis. A
 * registered tier takes no secret: a secret file set for it is refused
 * rather than ignored (it would authenticate nothing). */
static int open_environment(progcache_store **out, const progcache_options *opts,
                            const progcache_store_params *params, uint64_t min_rate)
{
    progcache_buf url = PROGCACHE_BUF_INIT, secret = PROGCACHE_BUF_INIT;
    int rc = progcache_default_remote(&url, &secret);
    void *ctx = NULL;
    progcache_store_factory factory = NULL;
    if (rc == PROGCACHE_ENOTFOUND) {
        rc = PROGCACHE_OK; /* no remote tier configured */
    } else if (rc == PROGCACHE_OK && (factory = factory_of((const char *)url.data, &ctx))) {
        if (secret.size)
            rc = progcache__error(PROGCACHE_EINVAL,
                                  "PROGCACHE_REMOTE_SECRET_FILE is set, but the tier of "
                                  "PROGCACHE_REMOTE (%s) is a registered tier, which takes no "
                                  "secret; unset the variable or give the secret to the tier",
                                  (const char *)url.data);
        else
            rc = open_registered(out, factory, ctx, (const char *)url.data, params);
        if (rc)
            progcache__error_prefix("progcache_open: PROGCACHE_REMOTE");
    } else if (rc == PROGCACHE_OK) {
        progcache_redis_options ro;
        progcache_redis_options_init(&ro);
        ro.url = (const char *)url.data;
        /* Size 0 only when no secret file is configured: one that is
         * configured and unusable failed above. */
        ro.secret = secret.size ? secret.data : NULL;
        ro.secret_len = secret.size;
        ro.log = opts->log;
        ro.log_ctx = opts->log_ctx;
        ro.max_artifact_size = opts->max_artifact_size;
        ro.min_rate = min_rate;
        rc = progcache_store_redis_new(out, &ro);
        if (rc)
            progcache__error_prefix("progcache_open: PROGCACHE_REMOTE");
    } else {
        progcache__error_prefix("progcache_open");
    }
    if (secret.data)
        memset(secret.data, 0, secret.capacity);
    progcache_buf_free(&secret);
    progcache_buf_free(&url);
    return rc;
}

int progcache__cache_open_remote(progcache_store **out, const progcache_options *opts,
                                 uint64_t min_rate)
{
    *out = NULL;
    if (opts->remote && opts->remote_url)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_open: opts->remote and opts->remote_url are both "
                                "set; give one remote tier");
    if (opts->remote)
        return open_redis_options(out, opts, min_rate);
    progcache_store_params params;
    progcache_store_params_init(&params);
    params.max_artifact_size = opts->max_artifact_size ? opts->max_artifact_size
                                                       : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    params.log = opts->log;
    params.log_ctx = opts->log_ctx;
    if (opts->remote_url) {
        int rc = progcache_store_open_url(out, opts->remote_url, &params);
        if (rc)
            progcache__error_prefix("progcache_open: opts->remote_url");
        return rc;
    }
    if (opts->flags & PROGCACHE_NO_REMOTE)
        return PROGCACHE_OK;
    return open_environment(out, opts, &params, min_rate);
}
