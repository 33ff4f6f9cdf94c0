/* The memory store: an in-process LRU with a byte cap.
 *
 * A hash table with chaining finds an entry; a doubly linked list through
 * the same entries keeps recency (most recent at the head). One mutex guards
 * both. Each entry is one allocation holding its key and value bytes, so a
 * put costs one malloc, and a hit costs none: it copies the value into the
 * caller's buffer, whose memory is reused.
 *
 * Everything that can be done outside the lock is: hashing, allocating and
 * filling a new entry before a put takes the lock, and freeing replaced or
 * evicted entries after it releases it.
 *
 * An entry keeps its metadata too (progcache_entry_meta: kind, records and
 * the seal state the put was given): bytes held in the process's own
 * memory cannot change under it, so what the tier below had checked about
 * them when they were copied up stays true. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "error.h"
#include "options.h"
#include "progcache/sys/store.h"
#include "sha256.h"

#define DEFAULT_MAX_SIZE (UINT64_C(64) << 20)
#define INITIAL_BUCKETS 64 /* a power of two */

typedef struct entry {
    struct entry *chain;      /* next entry in the same bucket */
    struct entry *prev, *next; /* recency list; also links entries to free */
    uint64_t hash;
    size_t key_len;
    size_t size;
    size_t records_len;
    progcache_kind kind;
    progcache_seal_state seal;
    /* key_len key bytes, then size value bytes, then records_len bytes of
     * records */
    unsigned char bytes[];
} entry;

typedef struct memory_store {
    progcache_store base; /* first, so a progcache_store * is a memory_store * */
    pthread_mutex_t lock;
    entry **buckets;
    size_t mask; /* number of buckets - 1 */
    size_t count;
    uint64_t total; /* value bytes; never above max_size once a put returns */
    uint64_t max_size;
    uint64_t max_artifact_size;
    entry lru; /* sentinel: lru.next is the most recent, lru.prev the least */
} memory_store;

/* The options struct's size in each version, for progcache__options_load. */
static const size_t options_size[] = {0, offsetof(progcache_memory_options, max_artifact_size),
                                      sizeof(progcache_memory_options)};

void progcache_memory_options_init(progcache_memory_options *opts)
{
    progcache__struct_init(opts, sizeof *opts, PROGCACHE_MEMORY_OPTIONS_VERSION);
}

/* FNV-1a: only a table index (keys are compared in full), so a fast,
 * well-mixing non-cryptographic hash is all that is needed. */
static uint64_t hash_key(const unsigned char *key, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < len; i++) {
        h ^= key[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static entry **find_slot(memory_store *m, uint64_t hash, const void *key, size_t key_len)
{
    entry **slot = &m->buckets[hash & m->mask];
    for (; *slot; slot = &(*slot)->chain) {
        entry *e = *slot;
        if (e->hash == hash && e->key_len == key_len && memcmp(e->bytes, key, key_len) == 0)
            break;
    }
    return slot;
}

static void lru_unlink(entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

static void lru_push_front(memory_store *m, entry *e)
{
    e->prev = &m->lru;
    e->next = m->lru.next;
    m->lru.next->prev = e;
    m->lru.next = e;
}

/* Take *slot's entry out of the table and list; returns it for freeing. */
static entry *detach(memory_store *m, entry **slot)
{
    entry *e = *slot;
    *slot = e->chain;
    lru_unlink(e);
    m->count--;
    m->total -= e->size;
    return e;
}

static void free_list(entry *e)
{
    while (e) {
        entry *next = e->next;
        progcache__free(e);
        e = next;
    }
}

/* Double the table when it is full. A failed allocation is harmless (the
 * chains just get longer), so it is not reported. */
static void maybe_grow(memory_store *m)
{
    size_t n = m->mask + 1;
    if (m->count <= n || n > SIZE_MAX / 2 / sizeof(entry *))
        return;
    entry **grown = progcache__calloc(n * 2, sizeof *grown);
    if (!grown)
        return;
    size_t mask = n * 2 - 1;
    for (size_t i = 0; i < n; i++) {
        entry *e = m->buckets[i];
        while (e) {
            entry *chain = e->chain;
            e->chain = grown[e->hash & mask];
            grown[e->hash & mask] = e;
            e = chain;
        }
    }
    progcache__free(m->buckets);
    m->buckets = grown;
    m->mask = mask;
}

/* Copy n bytes into buf (reusing its memory). */
static int copy_out(progcache_buf *buf, const unsigned char *bytes, size_t n)
{
    int rc = progcache__buf_reserve(buf, n);
    if (rc == PROGCACHE_OK) {
        if (n)
            memcpy(buf->data, bytes, n);
        progcache__buf_set_size(buf, n);
    }
    return rc;
}

static int memory_get_meta(progcache_buf *out, progcache_entry_meta *meta, progcache_store *store,
                           const void *key, size_t key_len)
{
    memory_store *m = (memory_store *)store;
    uint64_t hash = hash_key(key, key_len);
    int rc = PROGCACHE_ENOTFOUND;

    progcache_entry_meta_clear(meta);
    pthread_mutex_lock(&m->lock);
    entry *e = *find_slot(m, hash, key, key_len);
    if (e) {
        lru_unlink(e);
        lru_push_front(m, e);
        /* Copied under the lock: the entry may be replaced or evicted as
         * soon as it is released. */
        rc = copy_out(out, e->bytes + e->key_len, e->size);
        if (rc == PROGCACHE_OK && meta) {
            meta->kind = e->kind;
            meta->seal = e->seal;
            rc = copy_out(&meta->records, e->bytes + e->key_len + e->size, e->records_len);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

static int memory_get(progcache_buf *out, progcache_store *store, const void *key,
                      size_t key_len)
{
    return memory_get_meta(out, NULL, store, key, key_len);
}

static int memory_remove(progcache_store *store, const void *key, size_t key_len)
{
    memory_store *m = (memory_store *)store;
    uint64_t hash = hash_key(key, key_len);
    entry *gone = NULL;

    pthread_mutex_lock(&m->lock);
    entry **slot = find_slot(m, hash, key, key_len);
    if (*slot)
        gone = detach(m, slot);
    pthread_mutex_unlock(&m->lock);

    if (!gone)
        return PROGCACHE_ENOTFOUND;
    progcache__free(gone);
    return PROGCACHE_OK;
}

static int memory_put_meta(progcache_store *store, const void *key, size_t key_len,
                           const void *data, size_t size, const progcache_entry_meta *meta)
{
    memory_store *m = (memory_store *)store;
    size_t records_len = meta ? meta->records.size : 0;

    if (size > m->max_artifact_size)
        return progcache__error(PROGCACHE_EINVAL,
                                "memory store: a value of %zu bytes is more than "
                                "max_artifact_size (%llu bytes)",
                                size, (unsigned long long)m->max_artifact_size);
    /* A value above the cap would evict everything and still not fit. Any
     * older value is dropped so the next get misses rather than returning
     * bytes the caller has just replaced. */
    if (size > m->max_size) {
        int rc = memory_remove(store, key, key_len);
        return rc == PROGCACHE_ENOTFOUND ? PROGCACHE_OK : rc;
    }
    if (size > SIZE_MAX - sizeof(entry) - records_len ||
        key_len > SIZE_MAX - sizeof(entry) - records_len - size)
        return progcache__error(PROGCACHE_ENOMEM,
                                "memory store: a key of %zu bytes with a value of %zu bytes "
                                "is too large",
                                key_len, size);
    entry *e = progcache__malloc(sizeof(entry) + key_len + size + records_len);
    if (!e)
        return progcache__error(PROGCACHE_ENOMEM,
                                "memory store: out of memory storing a value of %zu bytes", size);
    e->hash = hash_key(key, key_len);
    e->key_len = key_len;
    e->size = size;
    e->records_len = records_len;
    e->kind = meta ? meta->kind : PROGCACHE_KIND_UNKNOWN;
    e->seal = meta ? meta->seal : PROGCACHE_SEAL_NONE;
    memcpy(e->bytes, key, key_len);
    if (size)
        memcpy(e->bytes + key_len, data, size);
    if (records_len)
        memcpy(e->bytes + key_len + size, meta->records.data, records_len);

    entry *garbage = NULL; /* replaced and evicted entries, freed after unlock */
    pthread_mutex_lock(&m->lock);
    entry **slot = find_slot(m, e->hash, key, key_len);
    if (*slot) {
        garbage = detach(m, slot);
        garbage->next = NULL;
    }
    entry **head = &m->buckets[e->hash & m->mask];
    e->chain = *head;
    *head = e;
    lru_push_front(m, e);
    m->count++;
    m->total += size;
    /* Evict from the cold end. The new entry alone fits (size <= max_size),
     * so this stops before reaching it. */
    while (m->total > m->max_size) {
        entry *victim = m->lru.prev;
        entry **vslot = find_slot(m, victim->hash, victim->bytes, victim->key_len);
        detach(m, vslot);
        victim->next = garbage;
        garbage = victim;
    }
    maybe_grow(m);
    pthread_mutex_unlock(&m->lock);

    free_list(garbage);
    return PROGCACHE_OK;
}

static int memory_put(progcache_store *store, const void *key, size_t key_len,
                      const void *data, size_t size)
{
    return memory_put_meta(store, key, key_len, data, size, NULL);
}

static int memory_clear(progcache_store *store)
{
    memory_store *m = (memory_store *)store;
    entry *all = NULL;

    pthread_mutex_lock(&m->lock);
    if (m->count) {
        all = m->lru.next;
        m->lru.prev->next = NULL; /* the detached list ends here */
        memset(m->buckets, 0, (m->mask + 1) * sizeof *m->buckets);
    }
    m->lru.next = m->lru.prev = &m->lru;
    m->count = 0;
    m->total = 0;
    pthread_mutex_unlock(&m->lock);

    free_list(all);
    return PROGCACHE_OK;
}

static int memory_count(uint64_t *out, progcache_store *store)
{
    memory_store *m = (memory_store *)store;
    pthread_mutex_lock(&m->lock);
    *out = m->count;
    pthread_mutex_unlock(&m->lock);
    return PROGCACHE_OK;
}

static int memory_total_size(uint64_t *out, progcache_store *store)
{
    memory_store *m = (memory_store *)store;
    pthread_mutex_lock(&m->lock);
    *out = m->total;
    pthread_mutex_unlock(&m->lock);
    return PROGCACHE_OK;
}

static int memory_exists(progcache_store *store, const void *key, size_t key_len)
{
    memory_store *m = (memory_store *)store;
    uint64_t hash = hash_key(key, key_len);
    pthread_mutex_lock(&m->lock);
    int found = *find_slot(m, hash, key, key_len) != NULL;
    pthread_mutex_unlock(&m->lock);
    return found ? PROGCACHE_OK : PROGCACHE_ENOTFOUND;
}

/* foreach: a copy of every entry is taken under the lock (at most the
 * tier's max_size of bytes, without READ only the keys), and fn is called
 * after it is released, so fn may use the store. Listing is not a use:
 * the recency order is left as it was. */
static int memory_foreach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                          void *ctx)
{
    memory_store *m = (memory_store *)store;
    int with_bytes = (flags & PROGCACHE_ENTRIES_READ) != 0, rc = PROGCACHE_OK;
    pthread_mutex_lock(&m->lock);
    size_t n = m->count, got = 0;
    entry **copies = progcache__calloc(n ? n : 1, sizeof *copies);
    for (entry *e = m->lru.next; copies && e != &m->lru && got < n; e = e->next) {
        size_t len = sizeof *e + e->key_len + (with_bytes ? e->size + e->records_len : 0);
        if (!(copies[got] = progcache__malloc(len)))
            break;
        memcpy(copies[got++], e, len);
    }
    pthread_mutex_unlock(&m->lock);
    if (!copies || got < n)
        rc = progcache__error(PROGCACHE_ENOMEM, "memory store: out of memory listing %zu entries",
                              n);
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    for (size_t i = 0; i < got && rc == PROGCACHE_OK; i++) {
        const entry *c = copies[i];
        unsigned char digest[PROGCACHE_SHA256_SIZE];
        progcache_entry out;
        memset(&out, 0, sizeof out);
        if ((rc = progcache__sha256_oneshot(digest, c->bytes, c->key_len)))
            break;
        progcache__hex(out.name, digest, sizeof digest);
        out.size = c->size;
        if (with_bytes) {
            out.data = c->bytes + c->key_len;
            if ((flags & PROGCACHE_ENTRIES_RECORDS) && c->records_len) {
                meta.kind = c->kind;
                meta.seal = c->seal;
                if ((rc = copy_out(&meta.records, out.data + c->size, c->records_len)))
                    break;
                out.meta = &meta;
            }
        }
        rc = fn(ctx, &out);
    }
    for (size_t i = 0; copies && i < got; i++)
        progcache__free(copies[i]);
    progcache__free(copies);
    progcache_entry_meta_release(&meta);
    return rc;
}

static void memory_free(progcache_store *store)
{
    memory_store *m = (memory_store *)store;
    memory_clear(store);
    pthread_mutex_destroy(&m->lock);
    progcache__free(m->buckets);
    progcache__free(m);
}

int progcache_store_memory_new(progcache_store **out, const progcache_memory_options *opts)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_store_memory_new: out is NULL");
    *out = NULL;
    progcache_memory_options o;
    progcache_memory_options_init(&o);
    int rc = progcache__options_load(&o, opts, options_size, PROGCACHE_MEMORY_OPTIONS_VERSION,
                                     "progcache_store_memory_new", "progcache_memory_options");
    if (rc)
        return rc;

    memory_store *m = progcache__calloc(1, sizeof *m);
    if (!m)
        goto nomem;
    m->buckets = progcache__calloc(INITIAL_BUCKETS, sizeof *m->buckets);
    if (!m->buckets)
        goto nomem;
    if (pthread_mutex_init(&m->lock, NULL) != 0)
        goto nomem;
    m->mask = INITIAL_BUCKETS - 1;
    m->max_size = o.max_size ? o.max_size : DEFAULT_MAX_SIZE;
    m->max_artifact_size =
        o.max_artifact_size ? o.max_artifact_size : PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT;
    m->lru.next = m->lru.prev = &m->lru;

    m->base.version = PROGCACHE_STORE_VERSION;
    m->base.name = "memory";
    m->base.get = memory_get;
    m->base.put = memory_put;
    m->base.remove = memory_remove;
    m->base.clear = memory_clear;
    m->base.count = memory_count;
    m->base.total_size = memory_total_size;
    m->base.free = memory_free;
    m->base.get_meta = memory_get_meta;
    m->base.put_meta = memory_put_meta;
    m->base.exists = memory_exists;
    m->base.foreach = memory_foreach;
    *out = &m->base;
    return PROGCACHE_OK;

nomem:
    if (m)
        progcache__free(m->buckets);
    progcache__free(m);
    return progcache__error(PROGCACHE_ENOMEM, "progcache_store_memory_new: out of memory");
}
