/* examples/tier_dir.c, a tier written against the public sys/store.h
 * alone, exercised through caches: where a put lands, a hit from it with
 * its records, which tier is the home, remove and clear, what it leaves
 * alone, what it finds damaged. (The version rule of the vtable:
 * test_tier_dir_version.c.) */
#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_stats.h"
#include "tier_test.h"
#include "wrap_store.h"

/* The path of key's file in a tier_dir directory (its naming rule). */
static void entry_file(char out[4096], const char *tier, const char *key)
{
    unsigned char h[32];
    SHA256((const unsigned char *)key, strlen(key), h);
    int n = snprintf(out, 4096, "%s/", tier);
    for (int i = 0; i < 32; i++)
        n += snprintf(out + n, 4096 - (size_t)n, "%02x", h[i]);
}

/* memory -> home -> tier_dir, as tier_dir_demo stacks them. */
static progcache *open_stack(const char *home, const char *tier)
{
    progcache_store *mem = NULL;
    CHECK_OK(progcache_store_memory_new(&mem, NULL));
    return open_cache(mem, open_home(home), open_tier(tier, SHARED_TIER));
}

/* ---- a put lands in the home directory and in the tier ------------------ */

static void test_put_lands_in_both(void)
{
    char *home = dir("home1"), *tier = dir("shared");
    progcache *cache = open_stack(home, tier);
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    meta_with_records(&m);
    /* With records, as compile-or-load stores; and a plain put. */
    CHECK_OK(progcache__cache_put_meta(cache, key1, strlen(key1), ptx, strlen(ptx), &m));
    CHECK_OK(progcache_put(cache, key2, strlen(key2), "plain", 5));
    progcache_entry_meta_release(&m);
    progcache_close(cache);

    /* Fresh stores over the same directories: what is on disk. */
    progcache_store *h = open_home(home), *t = open_tier(tier, SHARED_TIER);
    check_holds(h, key1, ptx, strlen(ptx), 1);
    check_holds(h, key2, "plain", 5, 0);
    check_holds(t, key1, ptx, strlen(ptx), 1);
    check_holds(t, key2, "plain", 5, 0);

    /* The tier returns what the writer said and what it checked. */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache_entry_meta got = PROGCACHE_ENTRY_META_INIT;
    CHECK_OK(progcache_store_get_meta(&buf, &got, t, key1, strlen(key1)));
    CHECK(got.kind == PROGCACHE_KIND_PTX && got.seal == PROGCACHE_SEAL_MATCHED);
    CHECK_OK(progcache_store_get_meta(&buf, &got, t, key2, strlen(key2)));
    CHECK(got.kind == PROGCACHE_KIND_UNKNOWN && got.seal == PROGCACHE_SEAL_MATCHED);
    uint64_t n = 0;
    CHECK_OK(progcache_store_count(&n, t));
    CHECK(n == 2);
    CHECK_OK(progcache_store_total_size(&n, t));
    /* Header 76 each; key1's two records 8 + 8 and 8 + 4 bytes. */
    CHECK(n == 2 * 76 + strlen(ptx) + (8 + sizeof lowered) + (8 + 4) + 5);
    progcache_entry_meta_release(&got);
    progcache_buf_free(&buf);
    progcache_store_free(h);
    progcache_store_free(t);
    free(home);
    free(tier);
}

/* ---- a second machine: empty home, the same shared tier ------------------ */

static void test_second_cache_hits_the_tier(void)
{
    char *home = dir("home2"), *tier = dir("shared");
    progcache *cache = open_stack(home, tier);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;

    /* As compile-or-load looks up: the hit comes from the tier, with its
     * records and its seal state. */
    CHECK_OK(progcache__cache_get_meta(&buf, &m, cache, key1, strlen(key1)));
    CHECK(buf.size == strlen(ptx) && memcmp(buf.data, ptx, buf.size) == 0);
    CHECK(m.seal == PROGCACHE_SEAL_MATCHED && m.kind == PROGCACHE_KIND_PTX);
    check_records(&m);
    /* Through the public call. */
    CHECK_OK(progcache_get(&buf, cache, key2, strlen(key2)));
    CHECK(buf.size == 5 && memcmp(buf.data, "plain", 5) == 0);
    /* Counted in the home tier's statistics. */
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    CHECK(st.available && st.hits == 2);
    progcache_close(cache);

    /* Both entries were copied into the home directory, records included. */
    progcache_store *h = open_home(home);
    check_holds(h, key1, ptx, strlen(ptx), 1);
    check_holds(h, key2, "plain", 5, 0);
    progcache_store_free(h);
    progcache_entry_meta_release(&m);
    progcache_buf_free(&buf);
    free(home);
    free(tier);
}

/* ---- the tier is never the home ------------------------------------------ */

/* A tier_dir behind a wrapper that counts what the cache asks of it and
 * fails puts on command. */
typedef struct {
    fixture_wrap w; /* w.base is the store */
    int fail_put, counts, puts;
} spy_store;

static int spy_get_meta(progcache_buf *out, progcache_entry_meta *m, progcache_store *s,
                        const void *k, size_t n)
{
    return progcache_store_get_meta(out, m, ((spy_store *)s)->w.inner, k, n);
}

static int spy_put_meta(progcache_store *s, const void *k, size_t n, const void *d, size_t size,
                        const progcache_entry_meta *m)
{
    spy_store *spy = (spy_store *)s;
    spy->puts++;
    if (spy->fail_put)
        return progcache_error_set(PROGCACHE_EIO, "spy: put failed");
    return progcache_store_put_meta(spy->w.inner, k, n, d, size, m);
}

static int spy_put(progcache_store *s, const void *k, size_t n, const void *d, size_t size)
{
    return spy_put_meta(s, k, n, d, size, NULL);
}

static int spy_count(uint64_t *out, progcache_store *s)
{
    ((spy_store *)s)->counts++;
    return fixture_wrap_count(out, s);
}

static int spy_total_size(uint64_t *out, progcache_store *s)
{
    ((spy_store *)s)->counts++;
    return fixture_wrap_total_size(out, s);
}

/* flags: what the spy says it is. */
static spy_store *new_spy(progcache_store *in, unsigned int flags)
{
    spy_store *s = calloc(1, sizeof *s);
    CHECK(s != NULL);
    fixture_wrap_init(&s->w, "spy", in);
    s->w.base.put = spy_put;
    s->w.base.count = spy_count;
    s->w.base.total_size = spy_total_size;
    s->w.base.flags = flags;
    s->w.base.get_meta = spy_get_meta;
    s->w.base.put_meta = spy_put_meta;
    return s;
}

static void test_tier_is_never_the_home(void)
{
    const unsigned int shared_flags[2] = {PROGCACHE_STORE_SHARED, SHARED_TIER};
    for (int f = 0; f < 2; f++) {
        char *home = dir(f ? "home3b" : "home3a"), *tier = dir(f ? "t3b" : "t3a");
        /* The tier holds three entries of its own; the home none. */
        progcache_store *t = open_tier(tier, shared_flags[f]);
        CHECK_OK(progcache_store_put(t, "a", 1, "1", 1));
        CHECK_OK(progcache_store_put(t, "b", 1, "2", 1));
        CHECK_OK(progcache_store_put(t, "c", 1, "3", 1));
        spy_store *spy = new_spy(t, shared_flags[f]);
        /* The shared tier first in the array: still not the home. */
        progcache *cache = open_cache(&spy->w.base, open_home(home), NULL);
        uint64_t n = 99;
        CHECK_OK(progcache_count(&n, cache));
        CHECK(n == 0);
        CHECK_OK(progcache_total_size(&n, cache));
        CHECK(n == 0);
        CHECK(spy->counts == 0);
        progcache_close(cache);

        /* Below the home, as it belongs: a put it refuses does not fail
         * the call (a remote tier never does), and the home has the entry. */
        t = open_tier(tier, shared_flags[f]);
        spy = new_spy(t, shared_flags[f]);
        spy->fail_put = 1;
        cache = open_cache(open_home(home), &spy->w.base, NULL);
        CHECK_OK(progcache_put(cache, key3, strlen(key3), "three", 5));
        CHECK(spy->puts == 1);
        CHECK_OK(progcache_count(&n, cache));
        CHECK(n == 1 && spy->counts == 0);
        check_missing(t, key3);
        progcache_close(cache);
        progcache_store *h = open_home(home);
        check_holds(h, key3, "three", 5, 0);
        progcache_store_free(h);
        free(home);
        free(tier);
    }

    /* PERSISTENT alone (a directory of this machine), under a memory tier:
     * then it is the home. */
    char *tier = dir("t3c");
    progcache_store *mem = NULL, *t = open_tier(tier, PROGCACHE_STORE_PERSISTENT);
    CHECK_OK(progcache_store_put(t, "a", 1, "1", 1));
    CHECK_OK(progcache_store_memory_new(&mem, NULL));
    progcache *cache = open_cache(mem, t, NULL);
    uint64_t n = 0;
    CHECK_OK(progcache_count(&n, cache));
    CHECK(n == 1);
    progcache_close(cache);
    free(tier);
}

/* ---- remove and clear reach it; it touches only its own files ----------- */

static void touch(const char *path, time_t age)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0);
    if (age) {
        struct timespec ts[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
        CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0);
    }
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void test_remove_and_clear(void)
{
    char *home = dir("home1"), *tier = dir("shared"), *outside = dir("outside");
    char readme[4096], sub[4096], link[4096], fifo[4096], fresh[4096], stale[4096];
    progcache *cache = open_stack(home, tier);
    progcache_store *t = open_tier(tier, SHARED_TIER), *h = open_home(home);

    CHECK_OK(progcache_remove(cache, key1, strlen(key1)));
    check_missing(t, key1);
    check_missing(h, key1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_remove(cache, key1, strlen(key1)));
    check_holds(t, key2, "plain", 5, 0);

    /* Things in the tier's directory that are not its entries. */
    snprintf(readme, sizeof readme, "%s/README", tier);
    snprintf(sub, sizeof sub, "%s/sub", tier);
    snprintf(fresh, sizeof fresh, "%s/.tmp-fresh1", tier);
    snprintf(stale, sizeof stale, "%s/.tmp-stale1", tier);
    touch(readme, 0);
    touch(outside, 0);
    touch(fresh, 0);         /* a put in progress elsewhere */
    touch(stale, 2 * 3600);  /* a put that died */
    CHECK(mkdir(sub, 0700) == 0);
    entry_file(link, tier, key1); /* a link where key1's entry would be */
    CHECK(symlink(outside, link) == 0);
    entry_file(fifo, tier, key3); /* a FIFO where key3's would be */
    CHECK(mkfifo(fifo, 0600) == 0);
    /* Neither is read (the FIFO does not block), nor counted, nor removed. */
    check_missing(t, key1);
    check_missing(t, key3);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(t, key1, strlen(key1)));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(t, key3, strlen(key3)));
    uint64_t n = 0;
    CHECK_OK(progcache_store_count(&n, t));
    CHECK(n == 1);

    CHECK_OK(progcache_clear(cache));
    CHECK_OK(progcache_store_count(&n, t));
    CHECK(n == 0);
    check_missing(t, key2);
    check_missing(h, key2);
    CHECK(exists(readme) && exists(sub) && exists(link) && exists(fifo) && exists(fresh));
    CHECK(exists(outside) && !exists(stale));
    unlink(link);
    unlink(fifo);
    progcache_close(cache);
    progcache_store_free(t);
    progcache_store_free(h);
    free(home);
    free(tier);
    free(outside);
}

/* ---- what it finds damaged --------------------------------------------- */

static void test_damage(void)
{
    char *tier = dir("t5"), *home = dir("home5");
    char p1[4096], p2[4096];
    progcache_store *t = open_tier(tier, SHARED_TIER);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    entry_file(p1, tier, key1);
    entry_file(p2, tier, key2);

    /* A flipped byte in the bytes, in the records' length, in the kind. */
    const off_t where[3] = {76 + 3, 72, 68};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(progcache_store_put(t, key1, strlen(key1), ptx, strlen(ptx)));
        test_flip_byte(p1, where[i], 0x40);
        CHECK_RC(PROGCACHE_ECORRUPT, progcache_store_get(&buf, t, key1, strlen(key1)));
        CHECK(strstr(progcache_error_last(), p1) != NULL);
    }
    /* A whole entry copied under another key's name. */
    CHECK_OK(progcache_store_put(t, key1, strlen(key1), ptx, strlen(ptx)));
    CHECK(rename(p1, p2) == 0);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_store_get(&buf, t, key2, strlen(key2)));
    CHECK(strstr(progcache_error_last(), "another key") != NULL);
    /* Cut short, below the header. */
    CHECK(truncate(p2, 10) == 0);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_store_get(&buf, t, key2, strlen(key2)));

    /* Through a cache: a damaged entry in the remote tier is never
     * returned (whether the cache then reports the tier's ECORRUPT or a
     * miss is the cache's policy for failing remote tiers, not the
     * tier's); a put of the key replaces it. */
    CHECK_OK(progcache_store_put(t, key1, strlen(key1), ptx, strlen(ptx)));
    test_flip_byte(p1, 80, 0x40);
    progcache *cache = open_cache(open_home(home), t, NULL);
    int rc = progcache_get(&buf, cache, key1, strlen(key1));
    CHECK(rc == PROGCACHE_ECORRUPT || rc == PROGCACHE_ENOTFOUND);
    CHECK_OK(progcache_put(cache, key1, strlen(key1), ptx, strlen(ptx)));
    progcache_close(cache);
    t = open_tier(tier, SHARED_TIER);
    check_holds(t, key1, ptx, strlen(ptx), 0);

    /* Too large for the tier. */
    progcache_entry_meta m = PROGCACHE_ENTRY_META_INIT;
    size_t too_large = (size_t)PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_put_meta(t, key1, strlen(key1), ptx, too_large, &m));
    progcache_store_free(t);
    progcache_buf_free(&buf);
    free(tier);
    free(home);
}

int main(void)
{
    base_dir = test_mkdtemp("tier-dir");
    test_put_lands_in_both();
    test_second_cache_hits_the_tier();
    test_tier_is_never_the_home();
    test_remove_and_clear();
    test_damage();
    test_rmdtemp(base_dir);
    printf("test_tier_dir: ok\n");
    return 0;
}
