/* The Redis store (progcache/remote.h): get and put with the entry's
 * metadata, remove, clear, count, the vtable and the counters.
 * Connections are redis_conn.c's, leases redis_lease.c's, scans of the
 * key space redis_scan.c's.
 *
 * Every value is an envelope (envelope.h) around the payload: it carries
 * the entry's kind and records, so a remote hit brings them along, and its
 * digest binds the value to its key. A get reports PROGCACHE_SEAL_MATCHED
 * for a value whose digest (and, with a secret, tag) verified, never
 * PROGCACHE_SEAL_WHOLE: whether the bytes are a whole artifact is the
 * writer's verdict, and a remote writer is another machine, so the cache
 * checks their structure itself.
 *
 * Failure is a miss: a value that fails its checks, is too large, or was
 * written by a newer progcache is counted, told to the log callback, and
 * read as a miss; a put that cannot be done is counted and dropped (the
 * caller's put still succeeds). The caller's last error is left as it was
 * by both: nothing went wrong that the caller can act on. */
#include "store/redis/redis_store.h"
#include "remote/remote_tier.h"
#include "store/redis/redis_get.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "options.h"
#include "sha256.h"

/* Redis refuses bulk strings over proto-max-bulk-len, 512 MiB by default. */
#define MAX_VALUE ((size_t)512 << 20)

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;

static void redis_free(progcache_store *store);
static const progcache_store_stats_ops redis_stats_ops;

static void count(redis_store *s, progcache__remote_counter c)
{
    progcache__remote_count(&s->health, c);
}

progcache__redis_store *progcache__redis_store_of(const progcache_store *store)
{
    return store && store->free == redis_free ? (redis_store *)store : NULL;
}

/* The key's envelope id and its Redis entry name. */
static int entry_name(progcache__envelope_id *id, char name[PROGCACHE__REDIS_NAME_SIZE],
                      size_t *name_len, const redis_store *s, const void *key, size_t key_len)
{
    char hex[PROGCACHE__REDIS_HEX_LEN + 1];
    int rc = progcache__envelope_id_init(id, key, key_len);
    if (rc)
        return rc;
    progcache__hex(hex, id->hash, sizeof id->hash);
    *name_len = progcache__redis_name(name, s, "", hex);
    return PROGCACHE_OK;
}

/* ---- get ---------------------------------------------------------------- */

static int redis_get_meta(progcache_buf *out, progcache_entry_meta *meta,
                          progcache_store *store, const void *key, size_t key_len)
{
    redis_store *s = (redis_store *)store;
    char name[PROGCACHE__REDIS_NAME_SIZE];
    progcache__redis_reading g;
    progcache__envelope e;
    progcache_entry_meta_clear(meta); /* NULL-safe */
    if (progcache__redis_off(s))
        return PROGCACHE_ENOTFOUND;
    memset(&g, 0, sizeof g);
    int rc = entry_name(&g.id, name, &g.name_len, s, key, key_len);
    if (rc)
        return rc;
    g.s = s;
    g.name = name;
    g.hmac = s->cfg.hmac;
    if ((rc = progcache__redis_read(out, &e, &g)))
        return rc;
    if ((rc = progcache__remote_deliver(out, meta, &e)) == PROGCACHE_OK)
        count(s, PROGCACHE__RC_HITS);
    return rc;
}

static int redis_get(progcache_buf *out, progcache_store *store, const void *key,
                     size_t key_len)
{
    return redis_get_meta(out, NULL, store, key, key_len);
}

/* ---- put ---------------------------------------------------------------- */

/* Write one value now; failures are counted, never returned. Also the put
 * queue's writer. */
static void write_value(void *ctx, const progcache__put_item *item)
{
    redis_store *s = ctx;
    char name[PROGCACHE__REDIS_NAME_SIZE], ttl[16];
    size_t value_len = 0, name_len = 0, size = item->size, records = item->records_len;
    unsigned char *value = NULL;
    progcache__envelope_id id;
    failure f;

    if (progcache__redis_off(s))
        return;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    if (records > PROGCACHE_RECORDS_MAX ||
        size > MAX_VALUE - PROGCACHE__ENVELOPE_MAX_HEADER - records) {
        progcache__remote_not_stored(&s->health, &s->voice, PROGCACHE__CAUSE_TOO_LARGE,
                                     "a value of %zu bytes and %zu of records is larger than "
                                     "Redis accepts",
                                     size, records);
        goto done;
    }
    progcache__envelope env = {PROGCACHE__ENVELOPE_VERSION, item->kind, item->records, records,
                               item->data, size, 0};
    if (entry_name(&id, name, &name_len, s, item->key, item->key_len) ||
        progcache__envelope_value(&value, &value_len, &env, &id, s->cfg.hmac)) {
        progcache__remote_not_stored(&s->health, &s->voice, PROGCACHE__CAUSE_NOT_STORED,
                                     "could not prepare a value of %zu bytes: %s", size,
                                     progcache_error_last());
        goto done;
    }
    snprintf(ttl, sizeof ttl, "%u", s->cfg.ttl_seconds);
    const char *argv[] = {"SET", name, (const char *)value, "EX", ttl};
    size_t lens[] = {3, name_len, value_len, 2, strlen(ttl)};
    redisReply *r = progcache__redis_call(s, s->cfg.ttl_seconds ? 5 : 3, argv, lens, 1,
                                          &progcache__redis_small, &f);
    char shape[128];
    progcache__redis_describe(shape, sizeof shape, r);
    if (r && r->type == REDIS_REPLY_STATUS && r->len == 2 && !memcmp(r->str, "OK", 2))
        count(s, PROGCACHE__RC_STORES);
    else if (r)
        progcache__remote_not_stored(&s->health, &s->voice, PROGCACHE__CAUSE_PROTOCOL,
                                     "SET of %s answered %s, not OK", name, shape);
    else
        count(s, PROGCACHE__RC_STORE_ERRORS); /* the failure was told by the call */
    freeReplyObject(r); /* NULL-safe */

done:
    progcache__free(value);
    progcache__error_restore(&saved);
}

static int redis_put_meta(progcache_store *store, const void *key, size_t key_len,
                          const void *data, size_t size, const progcache_entry_meta *meta)
{
    redis_store *s = (redis_store *)store;
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return PROGCACHE_OK;
    progcache__remote_put put = {key, key_len, data, size, meta};
    progcache__put_item item;
    if (progcache__remote_put_begin(&item, &put, &s->health, &s->voice, s->queue,
                                    s->cfg.max_artifact_size))
        write_value(s, &item);
    return PROGCACHE_OK;
}

static int redis_put(progcache_store *store, const void *key, size_t key_len,
                     const void *data, size_t size)
{
    return redis_put_meta(store, key, key_len, data, size, NULL);
}

/* ---- remove, clear, count ----------------------------------------------- */

static int redis_remove(progcache_store *store, const void *key, size_t key_len)
{
    static const char fn[] = "progcache_store_remove";
    redis_store *s = (redis_store *)store;
    char hex[PROGCACHE__REDIS_HEX_LEN + 1], name[PROGCACHE__REDIS_NAME_SIZE];
    failure f;
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return PROGCACHE_ENOTFOUND;
    if (s->queue)
        progcache__put_queue_flush(s->queue); /* no queued put may resurrect it */
    if (progcache__redis_off(s))
        return progcache__redis_off_error(s, fn);
    int rc = progcache__redis_key_hex(hex, key, key_len);
    if (rc)
        return rc;
    const char *argv[] = {"DEL", name};
    size_t lens[] = {3, progcache__redis_name(name, s, "", hex)};
    redisReply *r = progcache__redis_call(s, 2, argv, lens, 1, &progcache__redis_small, &f);
    if (!r)
        return progcache__redis_remote_error(s, fn, &f);
    if (r->type != REDIS_REPLY_INTEGER) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        freeReplyObject(r);
        return progcache__error(PROGCACHE_EREMOTE, "%s: Redis %s: DEL answered %s, not an integer",
                                fn, s->cfg.where, shape);
    }
    rc = r->integer > 0 ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
    freeReplyObject(r);
    return rc;
}
static int redis_clear(progcache_store *store)
{
    redis_store *s = (redis_store *)store;
    if (s->cfg.flags & PROGCACHE_REDIS_READONLY)
        return PROGCACHE_OK;
    if (s->queue)
        progcache__put_queue_flush(s->queue);
    return progcache__redis_delete_all(s, "progcache_store_clear");
}

static int redis_count(uint64_t *out, progcache_store *store)
{
    uint64_t total;
    return progcache__redis_measure((redis_store *)store, out, &total, "progcache_store_count");
}

static int redis_total_size(uint64_t *out, progcache_store *store)
{
    uint64_t n;
    return progcache__redis_measure((redis_store *)store, &n, out,
                                    "progcache_store_total_size");
}

/* ---- create and free ---------------------------------------------------- */

static void redis_free(progcache_store *store)
{
    redis_store *s = (redis_store *)store;
    progcache__put_queue_free(s->queue); /* writes what is queued first */
    progcache__redis_pool_drop(s);
    pthread_mutex_destroy(&s->pool_lock);
    progcache__redis_config_release(&s->cfg);
    progcache__free(s);
}

static int redis_flush(progcache_store *store)
{
    progcache__put_queue_flush(((redis_store *)store)->queue); /* NULL-safe */
    return PROGCACHE_OK;
}

int progcache_store_redis_new(progcache_store **out, const progcache_redis_options *opts)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_redis_new: out is NULL");
    *out = NULL;
    redis_store *s = progcache__calloc(1, sizeof *s);
    if (!s)
        return progcache__error(PROGCACHE_ENOMEM, "progcache_store_redis_new: out of memory");
    int rc = progcache__redis_config_init(&s->cfg, opts);
    if (rc) {
        progcache__free(s);
        return rc;
    }
    progcache__remote_health_init(&s->health, s->cfg.failures_before_backoff,
                                  s->cfg.backoff_ms);
    s->voice = (progcache__remote_voice){s->cfg.log, s->cfg.log_ctx, "Redis", s->cfg.where};
    if (pthread_mutex_init(&s->pool_lock, NULL) != 0) {
        progcache__redis_config_release(&s->cfg);
        progcache__free(s);
        return progcache__error(PROGCACHE_ENOMEM, "progcache_store_redis_new: no mutex");
    }
    if (!(s->cfg.flags & (PROGCACHE_REDIS_SYNC_PUT | PROGCACHE_REDIS_READONLY)) &&
        (rc = progcache__put_queue_new(&s->queue, write_value, s, s->cfg.max_queue_bytes))) {
        pthread_mutex_destroy(&s->pool_lock);
        progcache__redis_config_release(&s->cfg);
        progcache__free(s);
        return rc;
    }
    s->base.version = PROGCACHE_STORE_VERSION;
    s->base.name = "redis";
    s->base.get = redis_get;
    s->base.put = redis_put;
    s->base.remove = redis_remove;
    s->base.clear = redis_clear;
    s->base.count = redis_count;
    s->base.total_size = redis_total_size;
    s->base.free = redis_free;
    s->base.flags = PROGCACHE_STORE_SHARED;
    s->base.get_meta = redis_get_meta;
    s->base.put_meta = redis_put_meta;
    s->base.flush = redis_flush;
    s->base.stats = &redis_stats_ops;
    s->base.lease = &progcache__redis_lease_ops;
    s->base.exists = progcache__redis_exists;
    s->base.foreach = progcache__redis_foreach;
    *out = &s->base;
    return PROGCACHE_OK;
}

/* ---- counters ----------------------------------------------------------- */

/* The counts the cache folds into its statistics (remote_health.h). */
static int redis_counters(progcache_store_counters *out, const progcache_store *store)
{
    progcache__remote_store_counters(out, &progcache__redis_store_of(store)->health);
    return PROGCACHE_OK;
}

static const progcache_store_stats_ops redis_stats_ops = {
    PROGCACHE_STORE_STATS_OPS_VERSION, NULL, NULL, NULL, redis_counters};

int progcache_redis_counters_get(progcache_redis_counters *out, const progcache_store *store)
{
    redis_store *s = progcache__redis_store_of(store);
    if (!out || !s)
        return progcache__error(PROGCACHE_EINVAL, "progcache_redis_counters_get: %s",
                                !out ? "out is NULL" : "not a Redis store (NULL or another kind)");
    int bad = progcache__version_check(out, PROGCACHE_REDIS_COUNTERS_VERSION,
                                       "progcache_redis_counters_get", "out",
                                       "progcache_redis_counters");
    if (bad)
        return bad;
    progcache__remote_counters_fill(out, &s->health);
    return PROGCACHE_OK;
}
