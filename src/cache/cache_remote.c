/* The remote tiers of progcache_open (cache_open.c stacks them under the
 * home directory): the caller's Redis options, a URL
 * (progcache_options.remote_url), or $PROGCACHE_REMOTE (up to four). A URL
 * whose scheme names a registered tier (progcache_store_register) is opened
 * by that tier's factory; any other goes to the built-in Redis tier, which
 * refuses what it cannot use. Either way, one that cannot be set up fails
 * the open with a message saying why: a remote tier that was asked for and
 * is silently left out (or, worse, kept without the secret that was asked
 * for) is a downgrade nobody would notice (docs/CONFIG.md). A server that
 * is down is not such a failure: nothing is contacted here, and its gets
 * are misses. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cache/cache_handle.h"
#include "config.h"
#include "error.h"
#include "options.h"
#include "progcache/remote.h"
#include "remote/remote_health.h"
#include "store/http/http.h"
#include "dir/dir.h"
#include "store/store_calls.h"
#include "url_mask.h"

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
    /* The URL as messages show it: a registered tier's URL may hold a
     * password too (url_mask.h). */
    char shown[1024];
    progcache__url_mask(shown, sizeof shown, url);
    if (rc == PROGCACHE_OK && !store)
        rc = progcache__error(PROGCACHE_EINVAL,
                              "the tier for %s returned PROGCACHE_OK and no store", shown);
    if (rc == PROGCACHE_OK && (rc = progcache__store_check(store, "the tier's factory", shown)))
        store = NULL; /* not a vtable this library can call, so not even free */
    if (rc) {
        *out = NULL;
        return rc;
    }
    *out = store;
    return PROGCACHE_OK;
}

/* A tier by its URL: a registered tier's, HTTP/S3, else Redis. secret
 * (NULL: none) keys the built-in tiers' HMAC; conf's min_rate (0: the
 * tier's default) bounds their deadlines, its ca_file is the HTTPS tiers'
 * CA. The one way every entrance (the public
 * call, progcache_options.remote_url, $PROGCACHE_REMOTE) opens a URL, so a
 * setting applies to all three. */
static int open_url(progcache_store **out, const char *url, const progcache_store_params *p,
                    const progcache_buf *secret, const progcache__remote_conf *conf)
{
    void *ctx = NULL;
    progcache_store_factory factory = factory_of(url, &ctx);
    if (factory) {
        char shown[1024]; /* messages name the URL masked (docs/SECURITY.md) */
        progcache__url_mask(shown, sizeof shown, url);
        if (secret && secret->size)
            return progcache__error(PROGCACHE_EINVAL,
                                    "PROGCACHE_REMOTE_SECRET_FILE is set, but the tier of "
                                    "PROGCACHE_REMOTE (%s) is a registered tier, which takes no "
                                    "secret; unset the variable or give the secret to the tier",
                                    shown);
        return open_registered(out, factory, ctx, url, p);
    }
    const unsigned char *key = secret && secret->size ? secret->data : NULL;
    size_t key_len = key ? secret->size : 0;
    if (progcache__http_scheme(url, strcspn(url, ":")))
        /* The HTTP/S3 tier: the secret keys its envelopes' HMAC, as Redis's. */
        return progcache__http_store_new(out, url, p, key, key_len, conf->min_rate,
                                         conf->ca_file, conf->ca_label);
    progcache_redis_options ro;
    progcache_redis_options_init(&ro);
    ro.url = url;
    ro.secret = key;
    ro.secret_len = key_len;
    ro.log = p->log;
    ro.log_ctx = p->log_ctx;
    ro.max_artifact_size = p->max_artifact_size;
    ro.min_rate = conf->min_rate;
    return progcache_store_redis_new(out, &ro);
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
    progcache__remote_conf conf = {0, NULL, NULL};
    return open_url(out, url, &p, NULL, &conf);
}

/* The caller's Redis options: its log callback and size bound serve the
 * tier too when its own options leave them unset, so a program that gave
 * the cache a log hears why the remote tier is not used (docs/REMOTE.md,
 * "Messages"). The copy is as long as the caller's version. */
static const size_t redis_options_size[] = {0, offsetof(progcache_redis_options,
                                                      max_artifact_size),
                                           offsetof(progcache_redis_options, min_rate),
                                           sizeof(progcache_redis_options)};
_Static_assert(sizeof redis_options_size / sizeof redis_options_size[0] ==
                   PROGCACHE_REDIS_OPTIONS_VERSION + 1,
               "a size for every version of progcache_redis_options");

static int open_redis_options(progcache_store **out, const progcache_options *opts,
                              const progcache__remote_conf *conf)
{
    progcache_redis_options ro;
    progcache_redis_options_init(&ro);
    int rc = progcache__version_check(opts->remote, PROGCACHE_REDIS_OPTIONS_VERSION,
                                      "progcache_open", "opts->remote",
                                      "progcache_redis_options");
    if (rc == PROGCACHE_OK) /* the fields its version lacks keep the defaults */
        rc = progcache__options_load(&ro, opts->remote, redis_options_size,
                                     PROGCACHE_REDIS_OPTIONS_VERSION, "progcache_open",
                                     "progcache_redis_options");
    if (rc)
        return rc;
    ro.version = PROGCACHE_REDIS_OPTIONS_VERSION; /* the rest holds the defaults */
    if (!ro.min_rate)
        ro.min_rate = conf->min_rate;
    if (!ro.log) {
        ro.log = opts->log;
        ro.log_ctx = opts->log_ctx;
    }
    if (!ro.max_artifact_size)
        ro.max_artifact_size = opts->max_artifact_size;
    rc = progcache_store_redis_new(out, &ro);
    if (rc)
        progcache__error_prefix("progcache_open: the remote tier");
    return rc;
}

/* $PROGCACHE_REMOTE: one URL, or an ordered space-separated list of them
 * (stacked tiers, fastest first: "redis://cache:6379 s3://kernels/prod"),
 * each opened as above, into out[0..*n). */
static int open_environment(progcache_store **out, size_t *n,
                            const progcache_store_params *params,
                            const progcache__remote_conf *conf)
{
    progcache_buf url = PROGCACHE_BUF_INIT, secret = PROGCACHE_BUF_INIT;
    int rc = progcache_default_remote(&url, &secret);
    if (rc == PROGCACHE_ENOTFOUND) {
        rc = PROGCACHE_OK; /* no remote tier configured */
    } else if (rc == PROGCACHE_OK) {
        char *p = (char *)url.data;
        while (rc == PROGCACHE_OK && *(p += strspn(p, " \t"))) {
            char *end = p + strcspn(p, " \t"), save = *end;
            *end = 0;
            if (*n == PROGCACHE__REMOTE_MAX) {
                char shown[1024];
                progcache__url_mask(shown, sizeof shown, p);
                rc = progcache__error(PROGCACHE_EINVAL,
                                      "it lists more than %d tiers (from %s on)",
                                      PROGCACHE__REMOTE_MAX, shown);
            } else if ((rc = open_url(&out[*n], p, params, &secret, conf)) == 0) {
                (*n)++;
            }
            *end = save;
            p = end;
        }
        if (rc) {
            progcache__error_prefix("progcache_open: PROGCACHE_REMOTE");
            while (*n)
                progcache_store_free(out[--*n]);
        }
    } else {
        progcache__error_prefix("progcache_open");
    }
    if (secret.data)
        memset(secret.data, 0, secret.capacity);
    progcache_buf_free(&secret);
    progcache_buf_free(&url);
    return rc;
}

int progcache__cache_open_remote(progcache_store **out, size_t *n,
                                 const progcache_options *opts,
                                 const progcache__remote_conf *conf)
{
    *n = 0;
    *out = NULL;
    if (opts->remote && opts->remote_url)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_open: opts->remote and opts->remote_url are both "
                                "set; give one remote tier");
    int rc;
    if (opts->remote) {
        if ((rc = open_redis_options(out, opts, conf)) == PROGCACHE_OK && *out)
            *n = 1;
        return rc;
    }
    progcache_store_params params;
    progcache_store_params_init(&params);
    params.max_artifact_size = opts->max_artifact_size ? opts->max_artifact_size
                                                       : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    params.log = opts->log;
    params.log_ctx = opts->log_ctx;
    if (opts->remote_url) {
        /* remote_min_rate applies here as at the two other entrances */
        if ((rc = open_url(out, opts->remote_url, &params, NULL, conf)))
            progcache__error_prefix("progcache_open: opts->remote_url");
        else if (*out)
            *n = 1;
        return rc;
    }
    if (opts->flags & PROGCACHE_NO_REMOTE)
        return PROGCACHE_OK;
    return open_environment(out, n, &params, conf);
}
