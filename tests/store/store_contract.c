/* The store contract (store_contract.h): the same behavioural tests over
 * any tier. Public headers only, so a tier's author can build it with
 * theirs. A failure prints the check and the store's last message and
 * ends the run (longjmp back to store_contract_run). */
#include "store_contract.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARTIFACT 4096u /* the bound every store is opened with */
#define THREADS 4
#define ROUNDS 40

static jmp_buf failed;
static const char *tier_label;

static void fail(const char *test, int line, const char *what)
{
    fprintf(stderr, "store contract [%s] %s, line %d: %s (last message: %s)\n", tier_label,
            test, line, what, progcache_error_last());
    longjmp(failed, 1);
}

#define EXPECT(cond)                         \
    do {                                     \
        if (!(cond))                         \
            fail(__func__, __LINE__, #cond); \
    } while (0)
#define EXPECT_RC(want, call) EXPECT((call) == (want))

typedef struct tier {
    progcache_store_factory factory;
    const char *url;
    void *ctx;
} tier;

/* A tier needs get, put and free; without one of the other ops the call
 * is refused, saying so (progcache/sys/store.h), never a crash or a
 * silent success. Each returns 1 when the store did it. */
static int refused(int rc) { return rc == PROGCACHE_EINVAL && *progcache_error_last(); }

static int cleared(progcache_store *s)
{
    int rc = progcache_store_clear(s);
    EXPECT(s->clear ? rc == PROGCACHE_OK : refused(rc));
    return s->clear != NULL;
}

/* count and total_size: the store's own, or a walk of its foreach. */
static int measured(uint64_t *n, uint64_t *bytes, progcache_store *s)
{
    int can = s->count || (s->version >= 3 && s->foreach);
    int rc = progcache_store_count(n, s);
    EXPECT(can ? rc == PROGCACHE_OK : refused(rc));
    can = s->total_size || (s->version >= 3 && s->foreach);
    rc = progcache_store_total_size(bytes, s);
    EXPECT(can ? rc == PROGCACHE_OK : refused(rc));
    return can;
}

static progcache_store *fresh(const tier *t)
{
    progcache_store_params p = PROGCACHE_STORE_PARAMS_INIT;
    p.max_artifact_size = MAX_ARTIFACT;
    progcache_store *s = NULL;
    EXPECT_RC(PROGCACHE_OK, t->factory(&s, t->url, &p, t->ctx));
    EXPECT(s != NULL && s->version >= 1 && s->version <= PROGCACHE_STORE_VERSION);
    (void)cleared(s); /* a store that cannot clear must come empty */
    return s;
}

/* A PTX text of n bytes (at least 64): the file store reads kinds from
 * the bytes, so the bytes are an artifact; each fill byte varies. */
static void make_ptx(char *out, size_t n, char fill)
{
    static const char head[] = ".version 8.0\n.target sm_90\n.address_size 64\n// ";
    memset(out, fill, n);
    memcpy(out, head, sizeof head - 1);
    out[n - 1] = '\n';
}

static void expect_bytes(progcache_store *s, const void *key, size_t key_len, const void *data,
                         size_t size)
{
    progcache_buf b = PROGCACHE_BUF_INIT;
    EXPECT_RC(PROGCACHE_OK, progcache_store_get(&b, s, key, key_len));
    EXPECT(b.size == size && memcmp(b.data, data, size) == 0);
    EXPECT_RC(PROGCACHE_OK, progcache_store_exists(s, key, key_len));
    progcache_buf_free(&b);
}

static void expect_miss(progcache_store *s, const void *key, size_t key_len)
{
    progcache_buf b = PROGCACHE_BUF_INIT;
    /* A miss sets no message: the one set before it survives. */
    progcache_error_set(PROGCACHE_EIO, "sentinel before a miss");
    EXPECT_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&b, s, key, key_len));
    EXPECT(strcmp(progcache_error_last(), "sentinel before a miss") == 0);
    EXPECT_RC(PROGCACHE_ENOTFOUND, progcache_store_exists(s, key, key_len));
    progcache_buf_free(&b);
}

static void flush(progcache_store *s) { EXPECT_RC(PROGCACHE_OK, progcache_store_flush(s)); }

/* ---- the tests ----------------------------------------------------------- */

static void test_exact_bytes_or_miss(const tier *t)
{
    progcache_store *s = fresh(t);
    char a[300], b[200];
    make_ptx(a, sizeof a, 'a');
    make_ptx(b, sizeof b, 'b');
    /* Keys that differ in one byte, by a prefix, or by bytes after a NUL. */
    static const char k1[] = "contract\0one", k2[] = "contract\0two", k3[] = "contract";
    expect_miss(s, k1, sizeof k1);
    EXPECT_RC(PROGCACHE_OK, progcache_store_put(s, k1, sizeof k1, a, sizeof a));
    flush(s);
    expect_bytes(s, k1, sizeof k1, a, sizeof a);
    expect_miss(s, k2, sizeof k2);
    expect_miss(s, k3, sizeof k3 - 1);
    /* Overwrite: the new bytes, whole, never the old ones. */
    EXPECT_RC(PROGCACHE_OK, progcache_store_put(s, k1, sizeof k1, b, sizeof b));
    EXPECT_RC(PROGCACHE_OK, progcache_store_put(s, k2, sizeof k2, a, sizeof a));
    flush(s);
    expect_bytes(s, k1, sizeof k1, b, sizeof b);
    expect_bytes(s, k2, sizeof k2, a, sizeof a);
    uint64_t n = 0, bytes = 0;
    if (measured(&n, &bytes, s))
        /* a store may count its framing too */
        EXPECT(n == 2 && bytes >= sizeof a + sizeof b);
    /* Remove: that key only; a second remove is a miss. */
    int rc = progcache_store_remove(s, k1, sizeof k1);
    if (s->remove) {
        EXPECT_RC(PROGCACHE_OK, rc);
        flush(s);
        expect_miss(s, k1, sizeof k1);
        expect_bytes(s, k2, sizeof k2, a, sizeof a);
        EXPECT_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(s, k1, sizeof k1));
    } else {
        EXPECT(refused(rc));
        expect_bytes(s, k1, sizeof k1, b, sizeof b);
    }
    if (cleared(s)) {
        expect_miss(s, k2, sizeof k2);
        if (measured(&n, &bytes, s))
            EXPECT(n == 0);
    }
    progcache_store_free(s);
}

static void test_metadata_and_records(const tier *t)
{
    progcache_store *s = fresh(t);
    char a[256];
    make_ptx(a, sizeof a, 'm');
    progcache_entry_meta put = PROGCACHE_ENTRY_META_INIT, got = PROGCACHE_ENTRY_META_INIT;
    put.kind = PROGCACHE_KIND_PTX;
    EXPECT_RC(PROGCACHE_OK, progcache_entry_meta_add(&put, 0x10001u, "mine", 4));
    EXPECT_RC(PROGCACHE_OK, progcache_store_put_meta(s, "with", 4, a, sizeof a, &put));
    EXPECT_RC(PROGCACHE_OK, progcache_store_put_meta(s, "without", 7, a, sizeof a, NULL));
    flush(s);
    progcache_buf b = PROGCACHE_BUF_INIT;
    EXPECT_RC(PROGCACHE_OK, progcache_store_get_meta(&b, &got, s, "with", 4));
    EXPECT(b.size == sizeof a && memcmp(b.data, a, sizeof a) == 0);
    if (s->version >= 2 && s->get_meta) {
        /* A store that keeps metadata keeps it exactly. */
        const unsigned char *d = NULL;
        size_t n = 0;
        EXPECT_RC(PROGCACHE_OK, progcache_entry_meta_find(&d, &n, &got, 0x10001u));
        EXPECT(n == 4 && memcmp(d, "mine", 4) == 0);
        EXPECT(got.kind == PROGCACHE_KIND_PTX || got.kind == PROGCACHE_KIND_UNKNOWN);
    } else {
        EXPECT(got.records.size == 0 && got.seal == PROGCACHE_SEAL_NONE);
    }
    /* A put without metadata leaves none from an earlier get behind. */
    EXPECT_RC(PROGCACHE_OK, progcache_store_get_meta(&b, &got, s, "without", 7));
    EXPECT(got.records.size == 0);
    /* Records replaced with the bytes on an overwrite. */
    EXPECT_RC(PROGCACHE_OK, progcache_store_put_meta(s, "with", 4, a, sizeof a, NULL));
    flush(s);
    EXPECT_RC(PROGCACHE_OK, progcache_store_get_meta(&b, &got, s, "with", 4));
    EXPECT(got.records.size == 0);
    progcache_buf_free(&b);
    progcache_entry_meta_release(&put);
    progcache_entry_meta_release(&got);
    progcache_store_free(s);
}

static void test_flags_and_vtable(const tier *t)
{
    progcache_store *s = fresh(t);
    EXPECT(s->name != NULL && *s->name);
    if (s->version >= 2)
        EXPECT((s->flags & ~(PROGCACHE_STORE_PERSISTENT | PROGCACHE_STORE_SHARED)) == 0);
    if (s->version >= 2 && s->stats)
        EXPECT(s->stats->version >= 1 && s->stats->version <= PROGCACHE_STORE_STATS_OPS_VERSION);
    if (s->version >= 2 && s->lease)
        EXPECT(s->lease->version >= 1 && s->lease->version <= PROGCACHE_STORE_LEASE_OPS_VERSION);
    /* The store is accepted as a tier of a cache. */
    progcache *c = NULL;
    EXPECT_RC(PROGCACHE_OK, progcache_open_tiers(&c, &s, 1, NULL));
    progcache_close(c);
}

static void test_limits(const tier *t)
{
    progcache_store *s = fresh(t);
    static char big[MAX_ARTIFACT + 1];
    make_ptx(big, sizeof big, 'L');
    /* At the bound: kept. One byte over: refused with a message, and a
     * miss afterwards, never a part of it. */
    EXPECT_RC(PROGCACHE_OK, progcache_store_put(s, "at", 2, big, MAX_ARTIFACT));
    flush(s);
    expect_bytes(s, "at", 2, big, MAX_ARTIFACT);
    progcache_error_set(PROGCACHE_OK, "%s", "");
    int rc = progcache_store_put(s, "over", 4, big, sizeof big);
    flush(s);
    if (rc == PROGCACHE_OK) /* a queueing store may refuse when it writes */
        EXPECT((s->flags & PROGCACHE_STORE_SHARED) != 0);
    else
        EXPECT(rc < 0 && *progcache_error_last());
    expect_miss(s, "over", 4);
    progcache_store_free(s);
}

/* ---- foreach ---------------------------------------------------------- */

typedef struct seen {
    char names[3][65];
    int n, bad;
    int listed_only; /* no READ asked: the size, no bytes needed */
} seen;

static int on_entry(void *ctx, const progcache_entry *e)
{
    seen *v = ctx;
    if (v->n >= 3 || e->error || (!v->listed_only && !e->data) || e->size != 100)
        v->bad++;
    else
        memcpy(v->names[v->n++], e->name, 65);
    return 0;
}

static void hex_of(char out[65], const char *key)
{
    unsigned char h[32];
    SHA256((const unsigned char *)key, strlen(key), h);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static void test_foreach(const tier *t)
{
    progcache_store *s = fresh(t);
    if (s->version < 3 || !s->foreach) {
        /* Not offered: said so, with a message. */
        EXPECT_RC(PROGCACHE_EINVAL, progcache_store_foreach(s, 0, on_entry, NULL));
        EXPECT(strstr(progcache_error_last(), "cannot be listed") != NULL);
        progcache_store_free(s);
        return;
    }
    char a[100];
    make_ptx(a, sizeof a, 'f');
    static const char *keys[] = {"first", "second"};
    for (int i = 0; i < 2; i++)
        EXPECT_RC(PROGCACHE_OK, progcache_store_put(s, keys[i], strlen(keys[i]), a, sizeof a));
    flush(s);
    seen v;
    memset(&v, 0, sizeof v);
    EXPECT_RC(PROGCACHE_OK, progcache_store_foreach(s, PROGCACHE_ENTRIES_READ, on_entry, &v));
    EXPECT(v.n == 2 && v.bad == 0);
    /* Without READ: the names and sizes alone. */
    seen listed;
    memset(&listed, 0, sizeof listed);
    listed.listed_only = 1;
    EXPECT_RC(PROGCACHE_OK, progcache_store_foreach(s, 0, on_entry, &listed));
    EXPECT(listed.n == 2 && listed.bad == 0);
    for (int i = 0; i < 2; i++) {
        char want[65];
        hex_of(want, keys[i]);
        EXPECT(strcmp(v.names[0], want) == 0 || strcmp(v.names[1], want) == 0);
    }
    progcache_store_free(s);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct worker {
    progcache_store *s;
    int id, bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char own[128], shared_a[128], shared_b[128], key[32];
    make_ptx(shared_a, sizeof shared_a, 'A');
    make_ptx(shared_b, sizeof shared_b, 'B');
    progcache_buf b = PROGCACHE_BUF_INIT;
    for (int r = 0; r < ROUNDS && !w->bad; r++) {
        snprintf(key, sizeof key, "thread %d round %d", w->id, r);
        make_ptx(own, sizeof own, (char)('a' + (w->id + r) % 26));
        if (progcache_store_put(w->s, key, strlen(key), own, sizeof own) != PROGCACHE_OK ||
            progcache_store_flush(w->s) != PROGCACHE_OK)
            w->bad = 1;
        else if (progcache_store_get(&b, w->s, key, strlen(key)) != PROGCACHE_OK ||
                 b.size != sizeof own || memcmp(b.data, own, sizeof own) != 0)
            w->bad = 2;
        /* One key that every thread overwrites: either value, whole. */
        const char *mine = w->id % 2 ? shared_a : shared_b;
        if (progcache_store_put(w->s, "shared", 6, mine, sizeof shared_a) != PROGCACHE_OK)
            w->bad = 3;
        int rc = progcache_store_get(&b, w->s, "shared", 6);
        if (rc == PROGCACHE_OK && (b.size != sizeof shared_a ||
                                   (memcmp(b.data, shared_a, b.size) != 0 &&
                                    memcmp(b.data, shared_b, b.size) != 0)))
            w->bad = 4;
        else if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND)
            w->bad = 5;
    }
    progcache_buf_free(&b);
    return NULL;
}

static void test_threads(const tier *t)
{
    progcache_store *s = fresh(t);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){s, i, 0};
        EXPECT(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        EXPECT(w[i].bad == 0);
    flush(s);
    uint64_t n = 0, bytes = 0;
    /* Exact but for the one key all threads raced on: a store may count
     * a racing replacement as a new entry (the file store's accounting
     * does, until eviction re-measures), never lose one. */
    if (measured(&n, &bytes, s))
        EXPECT(n >= THREADS * ROUNDS + 1 && n <= THREADS * ROUNDS + THREADS);
    progcache_store_free(s);
}

static void test_errors(const tier *t)
{
    progcache_store *s = fresh(t);
    progcache_buf b = PROGCACHE_BUF_INIT;
    EXPECT_RC(PROGCACHE_EINVAL, progcache_store_get(&b, s, NULL, 0));
    EXPECT(strstr(progcache_error_last(), "key") != NULL);
    EXPECT_RC(PROGCACHE_EINVAL, progcache_store_put(s, "k", 1, NULL, 5));
    EXPECT(*progcache_error_last());
    progcache_entry_meta bad = PROGCACHE_ENTRY_META_INIT;
    bad.version = 0;
    EXPECT_RC(PROGCACHE_EINVAL, progcache_store_get_meta(&b, &bad, s, "k", 1));
    EXPECT(strstr(progcache_error_last(), "version") != NULL);
    progcache_buf_free(&b);
    progcache_store_free(s);
}

int store_contract_run(const char *label, progcache_store_factory factory, const char *url,
                       void *ctx)
{
    static void (*const tests[])(const tier *) = {
        test_exact_bytes_or_miss, test_metadata_and_records, test_flags_and_vtable,
        test_limits, test_foreach, test_threads, test_errors};
    static const char *const names[] = {"exact bytes or a miss", "metadata and records",
                                        "flags and vtable", "limits", "foreach",
                                        "threads", "error reporting"};
    tier t = {factory, url, ctx};
    tier_label = label;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (setjmp(failed))
            return 1; /* a failure leaks the test's store: the run is over */
        tests[i](&t);
        printf("store contract [%s] %s: ok\n", label, names[i]);
    }
    return 0;
}
