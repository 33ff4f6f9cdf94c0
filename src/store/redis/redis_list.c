/* The Redis store's exists and foreach (progcache/sys/store.h, version 3),
 * for `progcache ls/verify/export --remote` and any caller that lists a
 * remote tier.
 *
 * exists: STRLEN of the entry's name, no download; a value that is not
 * there, empty, or of another type (WRONGTYPE) is no entry, as for a get.
 *
 * foreach: SCAN under the prefix (redis_scan.c), each entry's name being
 * the hex SHA-256 of its key, as in every tier. Without READ only the
 * envelope's header is read (one small GETRANGE) for the size; with READ
 * the value is read as a get reads it (redis_get.c: bounded, in parts)
 * and checked against the key's hash. SCAN may return a name twice: the
 * names seen are kept (32 bytes each) so that none is reported twice.
 *
 * With a shared secret, a listing cannot check a value's HMAC tag: the tag
 * covers the cache key, and a listing knows only its hash. Such a value is
 * handed over with data NULL and an error that says so, never as if it were
 * authenticated (docs/SECURITY.md); its size is still told. */
#include "store/redis/redis_get.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"

typedef progcache__redis_store redis_store;
typedef progcache__redis_failure failure;

/* ---- exists ------------------------------------------------------------- */

int progcache__redis_exists(progcache_store *store, const void *key, size_t key_len)
{
    redis_store *s = (redis_store *)store;
    char hex[PROGCACHE__REDIS_HEX_LEN + 1], name[PROGCACHE__REDIS_NAME_SIZE];
    failure f;
    if (progcache__redis_off(s))
        return PROGCACHE_ENOTFOUND;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    int rc = progcache__redis_key_hex(hex, key, key_len);
    if (rc) {
        progcache__error_discard(&saved);
        return rc;
    }
    const char *argv[] = {"STRLEN", name};
    size_t lens[] = {6, progcache__redis_name(name, s, "", hex)};
    redisReply *r = progcache__redis_call(s, 2, argv, lens, 1, &progcache__redis_small, &f);
    rc = PROGCACHE_ENOTFOUND; /* a failure is a miss, counted and told by the call */
    if (r && r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        rc = PROGCACHE_OK;
    } else if (r && r->type != REDIS_REPLY_INTEGER) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        progcache__remote_count(&s->health, PROGCACHE__RC_ERRORS);
        progcache__remote_tell(&s->health, &s->voice, PROGCACHE__CAUSE_PROTOCOL,
                               "STRLEN of %s answered %s, not an integer; treated as a miss", name,
                               shape);
    }
    freeReplyObject(r);
    progcache__error_restore(&saved);
    return rc;
}

/* ---- the names seen ----------------------------------------------------- */

typedef struct seen_set {
    unsigned char (*slot)[PROGCACHE__ENVELOPE_HASH_SIZE]; /* all zero: empty */
    size_t cap, used;
} seen_set;

static size_t slot_of(const seen_set *set, const unsigned char *h)
{
    size_t i;
    memcpy(&i, h, sizeof i); /* a SHA-256: its bytes are already spread */
    return i & (set->cap - 1);
}

/* 1: h is new (now kept); 0: seen before; -1: out of memory. A hash of
 * all zero bytes is never a SHA-256 of a key anyone has. */
static int see(seen_set *set, const unsigned char *h)
{
    static const unsigned char zero[PROGCACHE__ENVELOPE_HASH_SIZE];
    if (!memcmp(h, zero, sizeof zero))
        return 1;
    if (2 * (set->used + 1) > set->cap) {
        seen_set bigger = {NULL, set->cap ? 2 * set->cap : 1024, 0};
        if (!(bigger.slot = progcache__calloc(bigger.cap, sizeof *bigger.slot)))
            return -1;
        for (size_t i = 0; i < set->cap; i++)
            if (memcmp(set->slot[i], zero, sizeof zero))
                see(&bigger, set->slot[i]);
        progcache__free(set->slot);
        *set = bigger;
    }
    for (size_t i = slot_of(set, h);; i = (i + 1) & (set->cap - 1)) {
        if (!memcmp(set->slot[i], h, sizeof zero))
            return 0;
        if (!memcmp(set->slot[i], zero, sizeof zero)) {
            memcpy(set->slot[i], h, sizeof zero);
            set->used++;
            return 1;
        }
    }
}

/* ---- foreach ------------------------------------------------------------ */

typedef struct walk {
    unsigned int flags;
    progcache_entry_fn fn;
    void *ctx;
    int stopped; /* what fn returned, when not 0 */
    seen_set seen;
    progcache_buf value;
    progcache_entry_meta meta;
} walk;

static int unhex(unsigned char *out, const char *hex, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned int v = 0;
        for (int j = 0; j < 2; j++) {
            char c = hex[2 * i + (size_t)j];
            v = v * 16 + (unsigned int)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

/* The size from the envelope's header (a GETRANGE of its first bytes).
 * PROGCACHE_OK; PROGCACHE_ENOTFOUND: gone meanwhile; an error in why. */
static int header_size(progcache_entry *out, redis_store *s, const char *name, size_t name_len,
                       char *why, size_t why_size)
{
    failure f;
    const char *argv[] = {"GETRANGE", name, "0", "23"};
    size_t lens[] = {8, name_len, 1, 2};
    redisReply *r = progcache__redis_call(s, 4, argv, lens, 1, &progcache__redis_small, &f);
    if (!r && f.cause == PROGCACHE__CAUSE_REFUSED) { /* WRONGTYPE: this entry's */
        snprintf(why, why_size, "%s", f.what);
        return PROGCACHE_OK;
    }
    if (!r)
        return progcache__redis_remote_error(s, "progcache_store_foreach", &f);
    int rc = PROGCACHE_OK;
    uint64_t total, size;
    size_t header_len;
    if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_STRING && r->len == 0)) {
        rc = PROGCACHE_ENOTFOUND;
    } else if (r->type != REDIS_REPLY_STRING) {
        char shape[128];
        progcache__redis_describe(shape, sizeof shape, r);
        snprintf(why, why_size, "GETRANGE answered %s, not a string value", shape);
    } else if (progcache__envelope_length(&total, &size, &header_len, r->str, r->len) ==
               PROGCACHE_OK) {
        out->size = size;
    } else {
        snprintf(why, why_size, "%s", progcache_error_last());
    }
    freeReplyObject(r);
    return rc;
}

/* One name of a SCAN batch: read as flags ask, handed to fn. */
static int visit(walk *w, redis_store *s, const redisReply *k)
{
    progcache_entry out;
    progcache__redis_reading g;
    progcache__envelope e;
    memset(&out, 0, sizeof out);
    memset(&g, 0, sizeof g);
    const char *hex = k->str + s->cfg.prefix_len;
    unhex(g.id.hash, hex, sizeof g.id.hash);
    int fresh = see(&w->seen, g.id.hash);
    if (fresh < 0)
        return progcache__error(PROGCACHE_ENOMEM, "progcache_store_foreach: out of memory");
    if (!fresh)
        return PROGCACHE_OK;
    memcpy(out.name, hex, PROGCACHE__REDIS_HEX_LEN);
    out.name[PROGCACHE__REDIS_HEX_LEN] = '\0';
    int rc = header_size(&out, s, k->str, k->len, g.why, sizeof g.why);
    if (rc == PROGCACHE_ENOTFOUND)
        return PROGCACHE_OK; /* removed since the SCAN */
    if (rc)
        return rc;
    if ((w->flags & PROGCACHE_ENTRIES_READ) && !g.why[0] && s->cfg.hmac) {
        snprintf(g.why, sizeof g.why,
                 "not read: a shared secret is configured, and a value's HMAC tag covers its "
                 "cache key, which a listing does not know (get it by its key to check it)");
    } else if ((w->flags & PROGCACHE_ENTRIES_READ) && !g.why[0]) {
        g.s = s;
        g.name = k->str;
        g.name_len = k->len;
        g.listing = 1;
        rc = progcache__redis_read(&w->value, &e, &g);
        if (rc == PROGCACHE_ENOTFOUND && !g.why[0])
            return PROGCACHE_OK; /* removed meanwhile */
        if (rc && rc != PROGCACHE_ENOTFOUND)
            return rc;
        if (!rc) {
            out.data = e.payload;
            out.size = e.size;
            if (w->flags & PROGCACHE_ENTRIES_RECORDS) {
                progcache_entry_meta_clear(&w->meta);
                if ((rc = progcache_buf_set(&w->meta.records, e.records, e.records_len)))
                    return rc;
                w->meta.kind = e.kind;
                w->meta.seal = e.version >= 2 ? PROGCACHE_SEAL_MATCHED : PROGCACHE_SEAL_NONE;
                out.meta = &w->meta;
            }
        }
    }
    out.error = g.why[0] ? g.why : NULL;
    if ((rc = w->fn(w->ctx, &out)))
        w->stopped = rc;
    return rc;
}

static int walk_batch(void *ctx, redis_store *s, const redisReply *names, failure *f)
{
    (void)f;
    walk *w = ctx;
    for (size_t i = 0; i < names->elements; i++) {
        const redisReply *k = names->element[i];
        if (!progcache__redis_is_name(s, "", k))
            continue; /* a lease, or not progcache's */
        int rc = visit(w, s, k);
        if (rc)
            return rc;
    }
    return PROGCACHE_OK;
}

int progcache__redis_foreach(progcache_store *store, unsigned int flags, progcache_entry_fn fn,
                             void *ctx)
{
    redis_store *s = (redis_store *)store;
    walk w;
    memset(&w, 0, sizeof w);
    w.flags = flags;
    w.fn = fn;
    w.ctx = ctx;
    w.meta = (progcache_entry_meta)PROGCACHE_ENTRY_META_INIT;
    if (s->queue)
        progcache__put_queue_flush(s->queue); /* what this process put is listed */
    int rc = progcache__redis_scan(s, "", walk_batch, &w, "progcache_store_foreach");
    if (w.stopped)
        rc = w.stopped;
    progcache__free(w.seen.slot);
    progcache_buf_free(&w.value);
    progcache_entry_meta_release(&w.meta);
    return rc;
}
