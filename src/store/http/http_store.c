/* The HTTP/S3 store (http.h): get, put, exists, remove, clear, count, the
 * vtable and the counters. One request is http_xfer.c's, listing
 * http_list.c's.
 *
 * As the Redis tier (redis_store.c, whose rules this keeps): a value is an
 * envelope, so a hit carries its kind and records and its digest (and,
 * with a secret, its HMAC tag) binds it to its key; a failure of any kind
 * is a miss or a dropped put, counted and told once, never the caller's
 * error; failures in a row switch the tier off for a while (back-off);
 * puts go through a bounded queue written by one background thread. */
#include "store/http/http.h"
#include "store/http/http_store.h"
#include "remote/remote_tier.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "error.h"
#include "sha256.h"

#define DEFAULT_FAILURES 3u
#define DEFAULT_BACKOFF_MS 5000u
#define DEFAULT_QUEUE_BYTES (UINT64_C(64) << 20)

typedef progcache__http_store http_store;
typedef progcache__http_failure failure;

static void http_free(progcache_store *store);
static const progcache_store_stats_ops http_stats_ops;

static void count(http_store *s, progcache__remote_counter c)
{
    progcache__remote_count(&s->health, c);
}

void progcache__http_failed(http_store *s, const failure *f)
{
    progcache__remote_fault fault = {f->cause,    f->timeout,
                                     f->timeout,  f->reached,
                                     f->cause == PROGCACHE__CAUSE_BOUND, f->what};
    progcache__remote_fault_note(&s->health, &s->voice, &fault);
}

/* S3 names its error in <Code>...</Code>; a WebDAV server says nothing. */
void progcache__http_status_failure(failure *f, const char *op, long status,
                                    const progcache_buf *body)
{
    char code[64] = "";
    if (body && body->size) {
        const char *b = (const char *)body->data, *end = b + body->size;
        const char *p = b;
        for (; p + 6 < end; p++)
            if (memcmp(p, "<Code>", 6) == 0)
                break;
        if (p + 6 < end) {
            size_t i = 0;
            for (p += 6; p < end && *p != '<' && i < sizeof code - 1; p++)
                if (*p >= ' ' && *p <= '~')
                    code[i++] = *p;
            code[i] = 0;
        }
    }
    f->timeout = 0;
    f->reached = status < 500; /* 5xx: the server fails; back off */
    f->cause = status == 401 || status == 403 ? PROGCACHE__CAUSE_AUTH : PROGCACHE__CAUSE_REFUSED;
    snprintf(f->what, sizeof f->what, "%s answered HTTP %ld%s%s%s", op, status,
             code[0] ? " (" : "", code, code[0] ? ")" : "");
    if (status >= 300 && status < 400)
        snprintf(f->what + strlen(f->what), sizeof f->what - strlen(f->what),
                 ": a redirect, not followed (give the URL it redirects to)");
    else if (status == 401 || status == 403)
        snprintf(f->what + strlen(f->what), sizeof f->what - strlen(f->what),
                 ": the credentials were refused");
}

/* The object URL of key: base + the 64 hex digits of SHA-256(key). */
static char *object_url(progcache__envelope_id *id, const http_store *s, const void *key,
                        size_t key_len)
{
    if (progcache__envelope_id_init(id, key, key_len))
        return NULL;
    size_t bl = strlen(s->cfg.base);
    char *url = progcache__malloc(bl + 2 * sizeof id->hash + 1);
    if (url) {
        memcpy(url, s->cfg.base, bl);
        progcache__hex(url + bl, id->hash, sizeof id->hash);
    }
    return url;
}

static int off(http_store *s)
{
    return progcache__remote_is_off(&s->health, progcache__remote_now_ms());
}

static void note_ok(http_store *s) { progcache__remote_note_ok(&s->health, &s->voice); }

/* ---- get ---------------------------------------------------------------- */

/* A value read: checked, its payload moved to the front of out. */
static int open_value(progcache_buf *out, progcache_entry_meta *meta, http_store *s,
                      const progcache__envelope_id *id)
{
    progcache__envelope e;
    int rc = progcache__envelope_open(&e, out->data, out->size, id, s->hmac);
    if (rc == PROGCACHE_ENOTFOUND) {
        count(s, PROGCACHE__RC_NEWER);
        count(s, PROGCACHE__RC_MISSES);
        progcache__remote_tell(&s->health, &s->voice, PROGCACHE__CAUSE_NEWER,
                               "a value of format %u, written by a newer progcache: not read",
                               e.version);
        return PROGCACHE_ENOTFOUND;
    }
    if (rc) {
        count(s, PROGCACHE__RC_REJECTED);
        if (e.bad_tag)
            count(s, PROGCACHE__RC_BAD_TAG);
        progcache__remote_tell(&s->health, &s->voice,
                               e.bad_tag ? PROGCACHE__CAUSE_BAD_TAG : PROGCACHE__CAUSE_REJECTED,
                               "a value failed its checks, read as a miss: %s",
                               progcache_error_last());
        return PROGCACHE_ENOTFOUND;
    }
    if (e.size > s->cfg.max_artifact_size) {
        count(s, PROGCACHE__RC_TOO_LARGE);
        count(s, PROGCACHE__RC_MISSES);
        progcache__remote_tell(&s->health, &s->voice, PROGCACHE__CAUSE_TOO_LARGE,
                               "a value of %zu bytes is more than max_artifact_size; not read",
                               e.size);
        return PROGCACHE_ENOTFOUND;
    }
    return progcache__remote_deliver(out, meta, &e);
}

static int http_get_meta(progcache_buf *out, progcache_entry_meta *meta, progcache_store *store,
                         const void *key, size_t key_len)
{
    http_store *s = (http_store *)store;
    progcache__envelope_id id;
    failure f;
    progcache_entry_meta_clear(meta); /* NULL-safe */
    if (off(s))
        return PROGCACHE_ENOTFOUND;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    char *url = object_url(&id, s, key, key_len);
    int rc = PROGCACHE_ENOTFOUND;
    if (!url) {
        progcache__remote_tell(&s->health, &s->voice, PROGCACHE__CAUSE_NOT_STORED, "out of memory");
        goto done;
    }
    uint64_t bound = s->cfg.max_artifact_size + PROGCACHE__ENVELOPE_MAX_HEADER +
                     PROGCACHE_RECORDS_MAX;
    long status = progcache__http_request(s, "GET", url, NULL, 0, out, bound, NULL, &f);
    if (status == 200) {
        note_ok(s);
        if ((rc = open_value(out, meta, s, &id)) == PROGCACHE_OK)
            count(s, PROGCACHE__RC_HITS);
    } else if (status == 404) {
        note_ok(s);
        count(s, PROGCACHE__RC_MISSES);
    } else {
        progcache__http_failed(s, &f);
    }
done:
    progcache__free(url);
    if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND)
        progcache__error_discard(&saved);
    else
        progcache__error_restore(&saved);
    if (rc == PROGCACHE_ENOTFOUND && out->data)
        progcache__buf_set_size(out, 0);
    return rc;
}

static int http_get(progcache_buf *out, progcache_store *store, const void *key, size_t key_len)
{
    return http_get_meta(out, NULL, store, key, key_len);
}

/* ---- put ---------------------------------------------------------------- */

/* Write one value now; failures are counted, never returned. Also the put
 * queue's writer. */
static void write_value(void *ctx, const progcache__put_item *item)
{
    http_store *s = ctx;
    size_t value_len = 0, size = item->size;
    unsigned char *value = NULL;
    progcache__envelope_id id;
    failure f;
    if (off(s))
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    progcache__envelope env = {PROGCACHE__ENVELOPE_VERSION, item->kind, item->records,
                               item->records_len, item->data, size, 0};
    char *url = object_url(&id, s, item->key, item->key_len);
    if (!url || progcache__envelope_value(&value, &value_len, &env, &id, s->hmac)) {
        progcache__remote_not_stored(&s->health, &s->voice, PROGCACHE__CAUSE_NOT_STORED,
                                     "could not prepare a value of %zu bytes: %s", size,
                                     progcache_error_last());
        goto done;
    }
    long status = progcache__http_request(s, "PUT", url, value, value_len, NULL, 0, NULL, &f);
    if (status >= 200 && status < 300) {
        note_ok(s);
        count(s, PROGCACHE__RC_STORES);
    } else {
        count(s, PROGCACHE__RC_STORE_ERRORS);
        progcache__http_failed(s, &f);
    }
done:
    progcache__free(url);
    progcache__free(value);
    progcache__error_restore(&saved);
}

static int http_put_meta(progcache_store *store, const void *key, size_t key_len,
                         const void *data, size_t size, const progcache_entry_meta *meta)
{
    http_store *s = (http_store *)store;
    progcache__remote_put put = {key, key_len, data, size, meta};
    progcache__put_item item;
    if (progcache__remote_put_begin(&item, &put, &s->health, &s->voice, s->queue,
                                    s->cfg.max_artifact_size))
        write_value(s, &item);
    return PROGCACHE_OK;
}

static int http_put(progcache_store *store, const void *key, size_t key_len, const void *data,
                    size_t size)
{
    return http_put_meta(store, key, key_len, data, size, NULL);
}

/* ---- exists, remove ------------------------------------------------------ */

/* HEAD or DELETE of key's object: 2xx OK, 404 ENOTFOUND, else an error. */
static int object_call(http_store *s, const char *method, const void *key, size_t key_len,
                       const char *fn)
{
    progcache__envelope_id id;
    failure f;
    if (off(s))
        return progcache__error(PROGCACHE_EREMOTE,
                                "%s: the remote tier %s is off for a while after failures in a "
                                "row",
                                fn, s->cfg.where);
    char *url = object_url(&id, s, key, key_len);
    if (!url)
        return progcache__error(PROGCACHE_ENOMEM, "%s: out of memory", fn);
    long status = progcache__http_request(s, method, url, NULL, 0, NULL, 0, NULL, &f);
    progcache__free(url);
    if (status >= 200 && status < 300) {
        note_ok(s);
        return PROGCACHE_OK;
    }
    if (status == 404) {
        note_ok(s);
        return PROGCACHE_ENOTFOUND;
    }
    progcache__http_failed(s, &f);
    return progcache__error(PROGCACHE_EREMOTE, "%s: the remote tier %s: %s", fn, s->cfg.where,
                            f.what);
}

static int http_exists(progcache_store *store, const void *key, size_t key_len)
{
    return object_call((http_store *)store, "HEAD", key, key_len, "progcache_store_exists");
}

static int http_remove(progcache_store *store, const void *key, size_t key_len)
{
    http_store *s = (http_store *)store;
    progcache__put_queue_flush(s->queue); /* no queued put may resurrect it */
    /* S3 answers 204 to a DELETE of nothing: a HEAD first says whether
     * there was an entry (a racing remove may still make both succeed). */
    if (s->cfg.s3) {
        int rc = object_call(s, "HEAD", key, key_len, "progcache_store_remove");
        if (rc)
            return rc;
    }
    return object_call(s, "DELETE", key, key_len, "progcache_store_remove");
}

/* ---- clear, count (through the listing) ---------------------------------- */

typedef struct tally {
    http_store *s;
    uint64_t n, bytes;
    int removing;
} tally;

/* method on the object named name (64 hex digits) under the prefix: its
 * HTTP status, or -1 with the error set (any status but 2xx and 404 is a
 * failure, said and counted as the tier's failures are). */
static long name_call(http_store *s, const char *method, const char *name, const char *fn)
{
    failure f;
    size_t bl = strlen(s->cfg.base);
    char *url = progcache__malloc(bl + 65);
    if (!url) {
        progcache__error(PROGCACHE_ENOMEM, "%s: out of memory", fn);
        return -1;
    }
    memcpy(url, s->cfg.base, bl);
    memcpy(url + bl, name, 65);
    long status = progcache__http_request(s, method, url, NULL, 0, NULL, 0, NULL, &f);
    progcache__free(url);
    if ((status < 200 || status >= 300) && status != 404) {
        progcache__http_failed(s, &f);
        progcache__error(PROGCACHE_EREMOTE, "%s: %s: %s", fn, s->cfg.where, f.what);
        return -1;
    }
    return status;
}

/* By a listed name (`progcache prune --remote`): the listing knows names,
 * not keys. S3 answers 204 to a DELETE of nothing, so a HEAD says first
 * whether there was one, as http_remove does. */
static int http_remove_name(progcache_store *store, const char *name)
{
    static const char fn[] = "progcache_store_remove_name";
    http_store *s = (http_store *)store;
    progcache__put_queue_flush(s->queue); /* no queued put may resurrect it */
    long status = s->cfg.s3 ? name_call(s, "HEAD", name, fn) : 200;
    if (status >= 200 && status < 300)
        status = name_call(s, "DELETE", name, fn);
    if (status < 0)
        return progcache_error_code();
    return status == 404 ? PROGCACHE_ENOTFOUND : PROGCACHE_OK;
}

static int tally_one(void *ctx, const progcache_entry *e)
{
    tally *t = ctx;
    if (t->removing && name_call(t->s, "DELETE", e->name, "progcache_store_clear") < 0)
        return progcache_error_code();
    t->n++;
    t->bytes += e->size;
    return 0;
}

static int http_clear(progcache_store *store)
{
    tally t = {(http_store *)store, 0, 0, 1};
    progcache__put_queue_flush(t.s->queue);
    return progcache__http_foreach(store, 0, tally_one, &t);
}

static int http_count(uint64_t *out, progcache_store *store)
{
    tally t = {(http_store *)store, 0, 0, 0};
    int rc = progcache__http_foreach(store, 0, tally_one, &t);
    *out = t.n;
    return rc;
}

static int http_total_size(uint64_t *out, progcache_store *store)
{
    tally t = {(http_store *)store, 0, 0, 0};
    int rc = progcache__http_foreach(store, 0, tally_one, &t);
    *out = t.bytes;
    return rc;
}

/* ---- counters, create, free ---------------------------------------------- */

static int http_counters(progcache_store_counters *out, const progcache_store *store)
{
    progcache__remote_store_counters(out, &((const http_store *)store)->health);
    return PROGCACHE_OK;
}

static const progcache_store_stats_ops http_stats_ops = {
    PROGCACHE_STORE_STATS_OPS_VERSION, NULL, NULL, NULL, http_counters};

static int http_flush(progcache_store *store)
{
    progcache__put_queue_flush(((http_store *)store)->queue);
    return PROGCACHE_OK;
}

static void http_free(progcache_store *store)
{
    http_store *s = (http_store *)store;
    progcache__put_queue_free(s->queue); /* writes what is queued first */
    /* In a fork() child the pooled handles are the parent's connections:
     * closing them here would end the parent's TLS sessions. Left. */
    for (int i = 0; getpid() == s->pid && i < s->pool_n; i++)
        curl_easy_cleanup(s->pool[i]);
    pthread_mutex_destroy(&s->pool_lock);
    progcache__envelope_key_free(s->hmac);
    progcache__http_config_release(&s->cfg);
    progcache__free(s);
}

int progcache__http_store_new(progcache_store **out, const char *url,
                              const progcache_store_params *params, const void *secret,
                              size_t secret_len, uint64_t min_rate, const char *ca_file,
                              const char *ca_label)
{
    *out = NULL;
    http_store *s = progcache__calloc(1, sizeof *s);
    if (!s)
        return progcache__error(PROGCACHE_ENOMEM, "the remote tier %s: out of memory", url);
    int rc = progcache__http_config_init(&s->cfg, url, params, min_rate, ca_file,
                                         ca_label);
    if (rc) {
        progcache__free(s);
        return rc;
    }
    progcache__remote_health_init(&s->health, DEFAULT_FAILURES, DEFAULT_BACKOFF_MS);
    s->voice = (progcache__remote_voice){s->cfg.log, s->cfg.log_ctx, "remote tier", s->cfg.where};
    s->pid = getpid();
    if (pthread_mutex_init(&s->pool_lock, NULL) != 0) {
        progcache__http_config_release(&s->cfg);
        progcache__free(s);
        return progcache__error(PROGCACHE_ENOMEM, "the remote tier: no mutex");
    }
    if ((secret && (rc = progcache__envelope_key_new(&s->hmac, secret, secret_len))) ||
        (rc = progcache__put_queue_new(&s->queue, write_value, s, DEFAULT_QUEUE_BYTES))) {
        http_free(&s->base);
        return rc;
    }
    s->base.version = PROGCACHE_STORE_VERSION;
    s->base.name = s->cfg.s3 ? "s3" : "http";
    s->base.get = http_get;
    s->base.put = http_put;
    s->base.remove = http_remove;
    s->base.clear = http_clear;
    s->base.remove_name = http_remove_name;
    s->base.count = http_count;
    s->base.total_size = http_total_size;
    s->base.free = http_free;
    s->base.flags = PROGCACHE_STORE_SHARED;
    s->base.get_meta = http_get_meta;
    s->base.put_meta = http_put_meta;
    s->base.flush = http_flush;
    s->base.stats = &http_stats_ops;
    s->base.exists = http_exists;
    if (s->cfg.s3) /* conditional create: If-None-Match (a WebDAV server ignores it) */
        s->base.lease = &progcache__http_lease_ops;
    s->base.foreach = progcache__http_foreach;
    *out = &s->base;
    return PROGCACHE_OK;
}
