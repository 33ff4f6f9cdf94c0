/* Calling a store through its vtable, with the argument checks every
 * backend would otherwise repeat, and the version rule for the vtable
 * itself: members a version-1 backend's struct does not have are never
 * read (progcache/sys/store.h). */
#include "store/store_calls.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "artifact/manifest_kind.h"
#include "error.h"
#include "options.h"

int progcache_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__error_v(code, fmt, ap);
    va_end(ap);
    return code;
}

static int check(const progcache_store *store, const void *key, size_t key_len,
                 const char *what)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "%s: store is NULL", what);
    if (!key || key_len == 0)
        return progcache__error(PROGCACHE_EINVAL, "%s: the key is empty", what);
    return PROGCACHE_OK;
}

/* ---- the version rule ---------------------------------------------------- */

int progcache__store_check(const progcache_store *t, const char *fn, const char *what)
{
    const char *name = t && t->name ? t->name : "unnamed";
    char ops[64];
    int rc;
    if (!t)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s is NULL", fn, what);
    if ((rc = progcache__version_check_how(t, PROGCACHE_STORE_VERSION, fn, what,
                                           "progcache_store", "start from PROGCACHE_STORE_INIT")))
        return rc;
    /* get, put and free make a tier; every other op has a default here
     * (progcache/sys/store.h says which). */
    if (!t->get || !t->put || !t->free)
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: %s (\"%s\") leaves get, put or free NULL; those three "
                                "are required",
                                fn, what, name);
    /* An ops struct that was never given its version is a mistake, not a
     * request for none: refused like every other versioned struct. */
    snprintf(ops, sizeof ops, "%s->stats", what);
    if (t->version >= 2 && t->stats &&
        (rc = progcache__version_check_how(t->stats, PROGCACHE_STORE_STATS_OPS_VERSION, fn, ops,
                                           "progcache_store_stats_ops",
                                           "set PROGCACHE_STORE_STATS_OPS_VERSION")))
        return rc;
    snprintf(ops, sizeof ops, "%s->lease", what);
    if (t->version >= 2 && t->lease &&
        (rc = progcache__version_check_how(t->lease, PROGCACHE_STORE_LEASE_OPS_VERSION, fn, ops,
                                           "progcache_store_lease_ops",
                                           "set PROGCACHE_STORE_LEASE_OPS_VERSION")))
        return rc;
    if (t->version >= 2 && t->lease &&
        (!t->lease->acquire || !t->lease->renew || !t->lease->release || !t->lease->wait))
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: %s (\"%s\"): a lease op (acquire, renew, release, wait) is "
                                "NULL; give all four or lease NULL",
                                fn, what, name);
    return PROGCACHE_OK;
}

PROGCACHE_HOT
unsigned int progcache__store_flags(const progcache_store *store)
{
    return store->version >= 2 ? store->flags : 0;
}

PROGCACHE_HOT
int progcache__store_get_meta(progcache_buf *out, progcache_entry_meta *meta,
                              progcache_store *store, const void *key, size_t key_len)
{
    if (store->version >= 2 && store->get_meta && meta)
        return store->get_meta(out, meta, store, key, key_len);
    progcache_entry_meta_clear(meta);
    return store->get(out, store, key, key_len);
}

int progcache__store_put_meta(progcache_store *store, const void *key, size_t key_len,
                              const void *data, size_t size, const progcache_entry_meta *meta)
{
    if (store->version >= 2 && store->put_meta)
        return store->put_meta(store, key, key_len, data, size, meta);
    return store->put(store, key, key_len, data, size);
}

PROGCACHE_HOT
const progcache_store_stats_ops *progcache__store_stats_ops(const progcache_store *store)
{
    if (!store || store->version < 2 || !store->stats || store->stats->version == 0)
        return NULL;
    return store->stats;
}

const progcache_store_lease_ops *progcache__store_lease_ops(const progcache_store *store)
{
    if (!store || store->version < 2 || !store->lease || store->lease->version == 0)
        return NULL;
    return store->lease;
}

PROGCACHE_HOT
void progcache__store_record(progcache_store *store, progcache_stat stat, uint64_t n)
{
    const progcache_store_stats_ops *ops = progcache__store_stats_ops(store);
    if (ops && ops->record)
        ops->record(store, stat, n);
}

/* ---- the public calls ---------------------------------------------------- */

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

int progcache_store_get_meta(progcache_buf *out, progcache_entry_meta *meta,
                             progcache_store *store, const void *key, size_t key_len)
{
    int rc = check(store, key, key_len, "progcache_store_get_meta");
    if (rc)
        return rc;
    if (!out || !meta)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_get_meta: out or meta is NULL");
    if ((rc = progcache__version_check(meta, PROGCACHE_ENTRY_META_VERSION,
                                       "progcache_store_get_meta", "meta",
                                       "progcache_entry_meta")))
        return rc;
    return progcache__store_get_meta(out, meta, store, key, key_len);
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

int progcache_store_put_meta(progcache_store *store, const void *key, size_t key_len,
                             const void *data, size_t size, const progcache_entry_meta *meta)
{
    int rc = check(store, key, key_len, "progcache_store_put_meta");
    if (rc)
        return rc;
    if (!data && size)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_put_meta: data is NULL");
    if (meta && (rc = progcache__version_check(meta, PROGCACHE_ENTRY_META_VERSION,
                                               "progcache_store_put_meta", "meta",
                                               "progcache_entry_meta")))
        return rc;
    return progcache__store_put_meta(store, key, key_len, data, size, meta);
}

int progcache_store_remove(progcache_store *store, const void *key, size_t key_len)
{
    int rc = check(store, key, key_len, "progcache_store_remove");
    return rc ? rc : progcache__store_remove(store, key, key_len);
}

int progcache_store_clear(progcache_store *store)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_clear: store is NULL");
    return progcache__store_clear(store);
}

int progcache_store_count(uint64_t *out, progcache_store *store)
{
    if (!store || !out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_count: NULL argument");
    return progcache__store_count(out, store);
}

int progcache_store_total_size(uint64_t *out, progcache_store *store)
{
    if (!store || !out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_total_size: NULL argument");
    return progcache__store_total_size(out, store);
}

int progcache_store_flush(progcache_store *store)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_flush: store is NULL");
    return store->version >= 2 && store->flush ? store->flush(store) : PROGCACHE_OK;
}

PROGCACHE_HOT
int progcache__store_exists(progcache_store *store, const void *key, size_t key_len)
{
    if (store->version >= 3 && store->exists)
        return store->exists(store, key, key_len);
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    int rc = store->get(&bytes, store, key, key_len);
    progcache_buf_free(&bytes);
    return rc;
}

/* The default of an op a tier left NULL that nothing can stand in for:
 * refused, naming the tier and the op. */
static int no_op(const progcache_store *store, const char *fn, const char *op)
{
    return progcache__error(PROGCACHE_EINVAL,
                            "%s: the \"%s\" store cannot do that (its vtable has no %s op: "
                            "progcache/sys/store.h)",
                            fn, store->name ? store->name : "unnamed", op);
}

int progcache__store_remove(progcache_store *store, const void *key, size_t key_len)
{
    if (!store->remove)
        return no_op(store, "progcache_store_remove", "remove");
    return store->remove(store, key, key_len);
}

int progcache__store_clear(progcache_store *store)
{
    if (!store->clear)
        return no_op(store, "progcache_store_clear", "clear");
    return store->clear(store);
}

int progcache_store_remove_name(progcache_store *store, const char *name)
{
    static const char fn[] = "progcache_store_remove_name";
    if (!store || !name)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s is NULL", fn, store ? "name" : "store");
    size_t n = strspn(name, "0123456789abcdef");
    if (n != 64 || name[64])
        return progcache__error(PROGCACHE_EINVAL, "%s: \"%.80s\" is not an entry's name (64 "
                                "lowercase hex digits)", fn, name);
    /* A vtable older than version 4 ends before remove_name. */
    if (store->version < 4 || !store->remove_name)
        return no_op(store, fn, "remove_name");
    return store->remove_name(store, name);
}

/* count and total_size without their ops: one walk of the entries. */
typedef struct measure {
    uint64_t count, bytes;
} measure;

static int measure_visit(void *ctx, const progcache_entry *e)
{
    measure *m = ctx;
    m->count++;
    m->bytes += e->size;
    return 0;
}

static int measure_walk(measure *m, progcache_store *store, const char *fn, const char *op)
{
    if (store->version < 3 || !store->foreach)
        return no_op(store, fn, op);
    return store->foreach(store, 0, measure_visit, m);
}

int progcache__store_count(uint64_t *out, progcache_store *store)
{
    if (store->count)
        return store->count(out, store);
    measure m = {0, 0};
    int rc = measure_walk(&m, store, "progcache_store_count", "count (nor foreach)");
    if (rc == PROGCACHE_OK)
        *out = m.count;
    return rc;
}

int progcache__store_total_size(uint64_t *out, progcache_store *store)
{
    if (store->total_size)
        return store->total_size(out, store);
    measure m = {0, 0};
    int rc = measure_walk(&m, store, "progcache_store_total_size", "total_size (nor foreach)");
    if (rc == PROGCACHE_OK)
        *out = m.bytes;
    return rc;
}

int progcache_store_exists(progcache_store *store, const void *key, size_t key_len)
{
    int rc = check(store, key, key_len, "progcache_store_exists");
    return rc ? rc : progcache__store_exists(store, key, key_len);
}

/* progcache_store_foreach: the store's walk, with the inspection done
 * here for a store that does not inspect what it read. */
typedef struct foreach_ctx {
    unsigned int flags;
    progcache_entry_fn fn;
    void *ctx;
    progcache_artifact_info info;
} foreach_ctx;

static int foreach_visit(void *ctx, const progcache_entry *e)
{
    foreach_ctx *f = ctx;
    if (!(f->flags & PROGCACHE_ENTRIES_INSPECT) || !e->data || e->artifact)
        return f->fn(f->ctx, e);
    progcache_entry copy = *e;
    int rc = progcache__inspect_entry(&f->info, e->data, (size_t)e->size, 1);
    if (rc)
        return rc;
    copy.artifact = &f->info;
    return f->fn(f->ctx, &copy);
}

int progcache_store_foreach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                            void *ctx)
{
    static const char fn_name[] = "progcache_store_foreach";
    unsigned int known = PROGCACHE_ENTRIES_READ | PROGCACHE_ENTRIES_INSPECT |
                         PROGCACHE_ENTRIES_RECORDS;
    if (!store || !fn)
        return progcache__error(PROGCACHE_EINVAL, "%s: %s is NULL", fn_name,
                                store ? "fn" : "store");
    if (flags & ~known)
        return progcache__error(PROGCACHE_EINVAL, "%s: unknown flags 0x%x", fn_name, flags);
    if (store->version < 3 || !store->foreach)
        return progcache__error(PROGCACHE_EINVAL,
                                "%s: the \"%s\" store cannot be listed (its vtable has no "
                                "foreach op: progcache/sys/store.h)",
                                fn_name, store->name ? store->name : "unnamed");
    /* INSPECT and RECORDS need the bytes: a store is asked for READ too. */
    if (flags & (PROGCACHE_ENTRIES_INSPECT | PROGCACHE_ENTRIES_RECORDS))
        flags |= PROGCACHE_ENTRIES_READ;
    foreach_ctx f = {flags, fn, ctx, PROGCACHE_ARTIFACT_INFO_INIT};
    int rc = store->foreach(store, flags, foreach_visit, &f);
    progcache_artifact_info_release(&f.info);
    return rc;
}

/* progcache_store_counters' size in each version. */
static const size_t counters_size[] = {0, offsetof(progcache_store_counters, timeouts),
                                       offsetof(progcache_store_counters, over_bound),
                                       sizeof(progcache_store_counters)};
_Static_assert(sizeof counters_size / sizeof counters_size[0] ==
                   PROGCACHE_STORE_COUNTERS_VERSION + 1,
               "a size for every version of progcache_store_counters");

int progcache_store_counters_get(progcache_store_counters *out, const progcache_store *store)
{
    if (!store || !out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_counters_get: NULL argument");
    int bad = progcache__version_check(out, PROGCACHE_STORE_COUNTERS_VERSION,
                                       "progcache_store_counters_get", "out",
                                       "progcache_store_counters");
    if (bad)
        return bad;
    const progcache_store_stats_ops *ops = progcache__store_stats_ops(store);
    if (!ops || !ops->counters)
        return PROGCACHE_ENOTFOUND;
    /* The store fills a whole struct of this library's version (zeros for
     * what it does not count); the caller gets its version's part. */
    progcache_store_counters all;
    progcache__struct_init(&all, sizeof all, PROGCACHE_STORE_COUNTERS_VERSION);
    int rc = ops->counters(&all, store);
    unsigned int version = out->version;
    memcpy(out, &all, counters_size[version]);
    out->version = version;
    return rc;
}

void progcache_store_free(progcache_store *store)
{
    if (store)
        store->free(store);
}

/* ---- statistics ----------------------------------------------------------- */

/* progcache_stats' size in each version. */
static const size_t stats_size[] = {0, offsetof(progcache_stats, names_learned),
                                    offsetof(progcache_stats, sidecar_seals),
                                    offsetof(progcache_stats, pch_warm),
                                    offsetof(progcache_stats, links_refused),
                                    offsetof(progcache_stats, intercept_standin_hits),
                                    sizeof(progcache_stats)};
_Static_assert(sizeof stats_size / sizeof stats_size[0] == PROGCACHE_STATS_VERSION + 1,
               "a size for every version of progcache_stats");

void progcache_stats_init(progcache_stats *stats)
{
    progcache__struct_init(stats, sizeof *stats, PROGCACHE_STATS_VERSION);
}

int progcache_store_stats_get(progcache_stats *out, progcache_store *store)
{
    if (!out || !store)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_stats_get: %s is NULL",
                                out ? "store" : "out");
    int bad = progcache__version_check(out, PROGCACHE_STATS_VERSION,
                                       "progcache_store_stats_get", "out", "progcache_stats");
    if (bad)
        return bad;
    /* Filled as this library's version of the struct, then copied back in
     * the caller's version's size: an older caller's struct is shorter. A
     * store without statistics reports zeros and available 0. */
    unsigned int version = out->version;
    progcache_stats full;
    progcache_stats_init(&full);
    const progcache_store_stats_ops *ops = progcache__store_stats_ops(store);
    int rc = ops && ops->get ? ops->get(&full, store) : PROGCACHE_OK;
    memcpy(out, &full, stats_size[version]);
    out->version = version;
    return rc;
}

int progcache_store_stats_reset(progcache_store *store)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_stats_reset: store is NULL");
    const progcache_store_stats_ops *ops = progcache__store_stats_ops(store);
    if (!ops || !ops->reset)
        return progcache__error(PROGCACHE_EINVAL,
                                "cannot reset statistics: the \"%s\" store keeps none (only a "
                                "cache directory has statistics)",
                                store->name ? store->name : "unnamed");
    return ops->reset(store);
}

/* ---- leases -------------------------------------------------------------- */

static int lease_ops(const progcache_store_lease_ops **out, progcache_store *store,
                     const void *key, size_t key_len, const char *fn)
{
    if (!store)
        return progcache__error(PROGCACHE_EINVAL, "%s: store is NULL", fn);
    if (key && key_len == 0)
        return progcache__error(PROGCACHE_EINVAL, "%s: the key is empty", fn);
    *out = progcache__store_lease_ops(store);
    return *out ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}

int progcache_store_lease_acquire(progcache_store_lease *out, progcache_store *store,
                                  const void *key, size_t key_len, unsigned int lease_ms)
{
    const progcache_store_lease_ops *ops = NULL;
    if (!out || !key)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_store_lease_acquire: out or key is NULL");
    int rc = lease_ops(&ops, store, key, key_len, "progcache_store_lease_acquire");
    return rc ? rc : ops->acquire(out, store, key, key_len, lease_ms);
}

int progcache_store_lease_renew(progcache_store *store, progcache_store_lease *lease,
                                unsigned int lease_ms)
{
    const progcache_store_lease_ops *ops = NULL;
    if (!lease)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_lease_renew: lease is NULL");
    int rc = lease_ops(&ops, store, NULL, 0, "progcache_store_lease_renew");
    return rc ? rc : ops->renew(store, lease, lease_ms);
}

int progcache_store_lease_release(progcache_store *store, progcache_store_lease *lease)
{
    const progcache_store_lease_ops *ops = NULL;
    if (!lease)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_lease_release: lease is NULL");
    int rc = lease_ops(&ops, store, NULL, 0, "progcache_store_lease_release");
    return rc ? rc : ops->release(store, lease);
}

int progcache_store_lease_wait(progcache_store *store, const void *key, size_t key_len,
                               unsigned int timeout_ms)
{
    const progcache_store_lease_ops *ops = NULL;
    if (!key)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_lease_wait: key is NULL");
    int rc = lease_ops(&ops, store, key, key_len, "progcache_store_lease_wait");
    return rc ? rc : ops->wait(store, key, key_len, timeout_ms);
}

int progcache_store_lease_holder(progcache_store_lease_info *out, progcache_store *store,
                                 const void *key, size_t key_len)
{
    static const char fn[] = "progcache_store_lease_holder";
    const progcache_store_lease_ops *ops = NULL;
    if (!out || !key)
        return progcache__error(PROGCACHE_EINVAL, "%s: out or key is NULL", fn);
    int bad = progcache__version_check(out, PROGCACHE_STORE_LEASE_INFO_VERSION, fn, "out",
                                       "progcache_store_lease_info");
    if (bad)
        return bad;
    int rc = lease_ops(&ops, store, key, key_len, fn);
    if (rc)
        return rc;
    if (ops->version < 2 || !ops->holder)
        return PROGCACHE_ENOTFOUND;
    progcache_store_lease_info all;
    progcache__struct_init(&all, sizeof all, PROGCACHE_STORE_LEASE_INFO_VERSION);
    all.ttl_ms = -1;
    rc = ops->holder(&all, store, key, key_len);
    if (rc == PROGCACHE_OK) {
        all.holder[sizeof all.holder - 1] = '\0';
        memcpy(out, &all, sizeof all); /* one version so far */
    }
    return rc;
}
