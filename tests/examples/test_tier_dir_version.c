/* The version rule of the store vtable (progcache/sys/store.h): a store
 * written against version 1, whose struct ends before flags, works as a
 * tier above and below the home, and through every generic call; the
 * library reads nothing past its struct, which is allocated at exactly
 * that size so that ASan catches a read of a version-2 member. And what
 * progcache_store_get_meta gives for a store without get_meta; versions 0
 * and newer refused, for the vtable and its ops structs. */
#include <stddef.h>

#include "cache/cache_stats.h"
#include "tier_test.h"

/* ---- a version-1 store ---------------------------------------------------- */

/* A version-1 vtable has room for nothing else, so its functions reach the
 * tier_dir behind it through this. */
static progcache_store *v1_inner;

static int v1_get(progcache_buf *out, progcache_store *s, const void *k, size_t n)
{
    return progcache_store_get(out, v1_inner, k, n);
}

static int v1_put(progcache_store *s, const void *k, size_t n, const void *d, size_t size)
{
    return progcache_store_put(v1_inner, k, n, d, size);
}

static int v1_remove(progcache_store *s, const void *k, size_t n)
{
    return progcache_store_remove(v1_inner, k, n);
}

static int v1_clear(progcache_store *s) { return progcache_store_clear(v1_inner); }

static int v1_count(uint64_t *out, progcache_store *s)
{
    return progcache_store_count(out, v1_inner);
}

static int v1_total_size(uint64_t *out, progcache_store *s)
{
    return progcache_store_total_size(out, v1_inner);
}

static void v1_free(progcache_store *s)
{
    progcache_store_free(v1_inner);
    v1_inner = NULL;
    free(s);
}

/* A version-1 store over a tier_dir at path: a struct of exactly the
 * version-1 members, allocated on its own. */
static progcache_store *new_v1(const char *path)
{
    CHECK(v1_inner == NULL);
    v1_inner = open_tier(path, SHARED_TIER);
    const progcache_store full = {.version = 1,
                                  .name = "tier_dir v1",
                                  .get = v1_get,
                                  .put = v1_put,
                                  .remove = v1_remove,
                                  .clear = v1_clear,
                                  .count = v1_count,
                                  .total_size = v1_total_size,
                                  .free = v1_free};
    size_t size = offsetof(progcache_store, flags);
    progcache_store *s = malloc(size);
    CHECK(s != NULL);
    memcpy(s, &full, size);
    return s;
}

static void check_meta_is_empty(progcache_store *s, const char *key, const void *data,
                                size_t size)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    meta_with_records(&m);
    m.seal = PROGCACHE_SEAL_WHOLE; /* all of it must be reset */
    CHECK_OK(progcache_store_get_meta(&buf, &m, s, key, strlen(key)));
    CHECK(buf.size == size && memcmp(buf.data, data, size) == 0);
    CHECK(m.kind == PROGCACHE_KIND_UNKNOWN && m.seal == PROGCACHE_SEAL_NONE);
    CHECK(m.records.size == 0);
    const unsigned char *d = NULL;
    size_t n = 0;
    CHECK_RC(PROGCACHE_ENOTFOUND,
             progcache_entry_meta_find(&d, &n, &m, PROGCACHE_RECORD_LOWERED_NAMES));
    progcache_entry_meta_release(&m);
    progcache_buf_free(&buf);
}

static void test_version1_store(void)
{
    char *tier = dir("t6"), *home_a = dir("home6a"), *home_b = dir("home6b");
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    meta_with_records(&m);

    /* Below the home: a put reaches it. */
    progcache *cache = open_cache(open_home(home_a), new_v1(tier), NULL);
    CHECK_OK(progcache__cache_put_meta(cache, key1, strlen(key1), ptx, strlen(ptx), &m));
    CHECK_OK(progcache_put(cache, key2, strlen(key2), "plain", 5));
    progcache_close(cache);
    CHECK(v1_inner == NULL); /* the cache freed it */
    progcache_store *t = open_tier(tier, SHARED_TIER);
    check_holds(t, key1, ptx, strlen(ptx), 0); /* no put_meta: no records */
    check_holds(t, key2, "plain", 5, 0);

    /* Another home: a hit from it, copied into the home; no metadata. */
    cache = open_cache(open_home(home_b), new_v1(tier), NULL);
    CHECK_OK(progcache__cache_get_meta(&buf, &m, cache, key1, strlen(key1)));
    CHECK(buf.size == strlen(ptx) && m.seal == PROGCACHE_SEAL_NONE && m.records.size == 0);
    uint64_t n = 0;
    CHECK_OK(progcache_count(&n, cache));
    CHECK(n == 1); /* the home's count: the tier has two */
    progcache_store *h = open_home(home_b);
    check_holds(h, key1, ptx, strlen(ptx), 0);

    CHECK_OK(progcache_remove(cache, key1, strlen(key1)));
    check_missing(t, key1);
    check_missing(h, key1);
    CHECK_OK(progcache_clear(cache));
    check_missing(t, key2);
    progcache_close(cache);
    progcache_store_free(h);
    progcache_store_free(t);

    /* Above the home (a copy tier), and called directly. */
    progcache_store *s = new_v1(tier);
    CHECK_OK(progcache_store_count(&n, s));
    CHECK(n == 0);
    CHECK_OK(progcache_store_put_meta(s, key2, strlen(key2), "plain", 5, &m));
    check_meta_is_empty(s, key2, "plain", 5);
    CHECK_OK(progcache_store_flush(s));
    progcache_store_counters c = PROGCACHE_STORE_COUNTERS_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_counters_get(&c, s));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&st, s));
    CHECK(st.available == 0);
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_stats_reset(s));
    progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND,
             progcache_store_lease_acquire(&lease, s, key2, strlen(key2), 1000));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_wait(s, key2, strlen(key2), 10));
    cache = open_cache(s, open_home(home_a), NULL);
    CHECK_OK(progcache_put(cache, key3, strlen(key3), "three", 5));
    CHECK_OK(progcache__cache_get_meta(&buf, &m, cache, key3, strlen(key3)));
    CHECK(m.seal == PROGCACHE_SEAL_NONE && m.records.size == 0);
    CHECK_OK(progcache_count(&n, cache));
    CHECK(n == 3); /* home_a: key1 and key2 from the first cache, key3 */
    progcache_close(cache);

    progcache_entry_meta_release(&m);
    progcache_buf_free(&buf);
    free(tier);
    free(home_a);
    free(home_b);
}

/* ---- progcache_store_get_meta on a store without get_meta --------------- */

static void test_get_meta_without_get_meta(void)
{
    char *tier = dir("t7");
    /* A version-2 store that leaves get_meta and put_meta out: a tier_dir
     * with them taken away (its own get and put still work). */
    progcache_store *s = open_tier(tier, SHARED_TIER);
    s->get_meta = NULL;
    s->put_meta = NULL;
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    meta_with_records(&m);
    CHECK_OK(progcache_store_put_meta(s, key1, strlen(key1), ptx, strlen(ptx), &m));
    check_meta_is_empty(s, key1, ptx, strlen(ptx));
    progcache_entry_meta_release(&m);
    progcache_store_free(s);
    free(tier);
}

/* Versions a struct never given one (0), or newer than this library:
 * refused like every other versioned struct, never read as "none". A
 * version-2 store (no exists, no foreach) keeps working: exists falls
 * back to get; listing it is refused with a message. */
static void test_versions_refused(void)
{
    char *tier = dir("refused");
    progcache_store *s = open_tier(tier, SHARED_TIER);
    progcache *c = NULL;
    static const progcache_store_stats_ops zero_stats; /* version 0 */
    s->stats = &zero_stats;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, NULL));
    CHECK(strstr(progcache_error_last(), "stats->version is 0") != NULL);
    progcache_store_stats_ops newer = {PROGCACHE_STORE_STATS_OPS_VERSION + 1, NULL, NULL, NULL,
                                       NULL};
    s->stats = &newer;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, NULL));
    s->stats = NULL;
    progcache_store_lease_ops half = {PROGCACHE_STORE_LEASE_OPS_VERSION, NULL, NULL, NULL, NULL,
                                      NULL};
    s->lease = &half; /* acquire and friends NULL */
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, NULL));
    CHECK(strstr(progcache_error_last(), "lease op") != NULL);
    s->lease = NULL;
    s->version = PROGCACHE_STORE_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, NULL));
    s->version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open_tiers(&c, &s, 1, NULL));
    CHECK(strstr(progcache_error_last(), "PROGCACHE_STORE_INIT") != NULL);

    /* Version 2: the members of version 3 are not read. */
    s->version = 2;
    CHECK_OK(progcache_store_put(s, key1, strlen(key1), ptx, strlen(ptx)));
    CHECK_OK(progcache_store_exists(s, key1, strlen(key1)));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_exists(s, key2, strlen(key2)));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_foreach(s, 0, NULL, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_foreach(s, 0, (progcache_entry_fn)1, NULL));
    CHECK(strstr(progcache_error_last(), "cannot be listed") != NULL);
    CHECK_OK(progcache_open_tiers(&c, &s, 1, NULL));
    progcache_close(c);
    free(tier);
}

int main(void)
{
    base_dir = test_mkdtemp("tier-dir-version");
    test_version1_store();
    test_get_meta_without_get_meta();
    test_versions_refused();
    test_rmdtemp(base_dir);
    printf("test_tier_dir_version: ok\n");
    return 0;
}
