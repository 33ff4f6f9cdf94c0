/* The memory store: contents, LRU order, the byte cap, arbitrary keys,
 * allocation failures and many threads at once. */
#include <pthread.h>
#include <stdint.h>

#include "alloc.h"
#include "check.h"
#include "progcache/sys/store.h"

static progcache_store *new_store(uint64_t max_size)
{
    progcache_memory_options opts = PROGCACHE_MEMORY_OPTIONS_INIT;
    opts.max_size = max_size;
    progcache_store *store = NULL;
    CHECK_OK(progcache_store_memory_new(&store, &opts));
    CHECK(store != NULL);
    return store;
}

/* get must hit with exactly these bytes. */
static void expect_value(progcache_store *store, const void *key, size_t key_len,
                         const void *value, size_t size)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, store, key, key_len));
    CHECK(buf.size == size);
    CHECK(size == 0 || memcmp(buf.data, value, size) == 0);
    CHECK(buf.data[size] == '\0');
    progcache_buf_free(&buf);
}

static void expect_miss(progcache_store *store, const void *key, size_t key_len)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, store, key, key_len));
    progcache_buf_free(&buf);
}

static void expect_accounting(progcache_store *store, uint64_t count, uint64_t total)
{
    uint64_t n = 99, bytes = 99;
    CHECK_OK(progcache_store_count(&n, store));
    CHECK_OK(progcache_store_total_size(&bytes, store));
    CHECK(n == count);
    CHECK(bytes == total);
}

static void put_str(progcache_store *store, const char *key, const char *value)
{
    CHECK_OK(progcache_store_put(store, key, strlen(key), value, strlen(value)));
}

static void test_options(void)
{
    progcache_memory_options opts;
    memset(&opts, 0xff, sizeof opts);
    progcache_memory_options_init(&opts);
    CHECK(opts.version == PROGCACHE_MEMORY_OPTIONS_VERSION);
    CHECK(opts.max_size == 0);
    progcache_memory_options_init(NULL);

    progcache_store *store = (progcache_store *)1;
    opts.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_memory_new(&store, &opts));
    CHECK(store == NULL);
    CHECK(strstr(progcache_error_last(), "opts->version") != NULL);
    opts.version = PROGCACHE_MEMORY_OPTIONS_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_memory_new(&store, &opts));
    CHECK(strstr(progcache_error_last(), "opts->version") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_memory_new(NULL, NULL));

    /* NULL options: a 64 MiB cap. A value of exactly the cap is kept, one
     * byte more is not. */
    CHECK_OK(progcache_store_memory_new(&store, NULL));
    CHECK(strcmp(store->name, "memory") == 0);
    CHECK(store->version == PROGCACHE_STORE_VERSION);
    /* Removal by a listed name: a name of 64 lowercase hex digits only,
     * and a store without the op says so (the memory store keeps keys). */
    static const char hex64[] =
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_remove_name(store, "0123"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_remove_name(store, "../../etc/passwd"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_remove_name(NULL, hex64));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_remove_name(store, hex64));
    CHECK(strstr(progcache_error_last(), "remove_name") != NULL);
    size_t cap = (size_t)64 << 20;
    unsigned char *big = calloc(cap + 1, 1);
    CHECK(big != NULL);
    big[cap - 1] = 7;
    CHECK_OK(progcache_store_put(store, "big", 3, big, cap));
    expect_accounting(store, 1, cap);
    CHECK_OK(progcache_store_put(store, "bigger", 6, big, cap + 1));
    expect_miss(store, "bigger", 6);
    expect_accounting(store, 1, cap);
    expect_value(store, "big", 3, big, cap);
    free(big);
    progcache_store_free(store);
    progcache_store_free(NULL);
}

static void test_basic(void)
{
    progcache_store *store = new_store(0);
    expect_accounting(store, 0, 0);

    /* A miss leaves the last error alone. */
    progcache_error_clear();
    expect_miss(store, "a", 1);
    CHECK(progcache_error_code() == 0);
    CHECK(strcmp(progcache_error_last(), "") == 0);

    put_str(store, "a", "apple");
    put_str(store, "b", "banana");
    expect_value(store, "a", 1, "apple", 5);
    expect_value(store, "b", 1, "banana", 6);
    expect_accounting(store, 2, 11);

    /* Replace, larger and smaller. */
    put_str(store, "a", "apricot!");
    expect_value(store, "a", 1, "apricot!", 8);
    expect_accounting(store, 2, 14);
    put_str(store, "a", "ax");
    expect_value(store, "a", 1, "ax", 2);
    expect_accounting(store, 2, 8);

    /* An empty value is a value, not a miss. */
    CHECK_OK(progcache_store_put(store, "e", 1, NULL, 0));
    expect_value(store, "e", 1, "", 0);
    expect_accounting(store, 3, 8);

    CHECK_OK(progcache_store_remove(store, "a", 1));
    expect_miss(store, "a", 1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(store, "a", 1));
    expect_accounting(store, 2, 6);

    CHECK_OK(progcache_store_clear(store));
    expect_accounting(store, 0, 0);
    expect_miss(store, "b", 1);
    expect_miss(store, "e", 1);
    CHECK_OK(progcache_store_clear(store));
    put_str(store, "b", "again");
    expect_value(store, "b", 1, "again", 5);
    expect_accounting(store, 1, 5);

    /* One buffer across many hits: its memory is reused. */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    put_str(store, "long", "a somewhat longer value");
    CHECK_OK(progcache_store_get(&buf, store, "long", 4));
    unsigned char *first = buf.data;
    CHECK_OK(progcache_store_get(&buf, store, "b", 1));
    CHECK(buf.data == first && buf.size == 5 && memcmp(buf.data, "again", 6) == 0);
    CHECK_OK(progcache_store_get(&buf, store, "long", 4));
    CHECK(buf.data == first && buf.size == 23);
    progcache_buf_free(&buf);

    /* Arguments are checked by the store wrappers. */
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_put(store, "k", 0, "v", 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_put(store, "k", 1, NULL, 1));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_get(NULL, store, "k", 1));
    progcache_store_free(store);
}

/* Cap 100, values of 30 bytes: the fourth put evicts one entry. */
static void test_lru_order(void)
{
    char v[30];
    memset(v, 'v', sizeof v);
    progcache_store *store = new_store(100);
    CHECK_OK(progcache_store_put(store, "a", 1, v, 30));
    CHECK_OK(progcache_store_put(store, "b", 1, v, 30));
    CHECK_OK(progcache_store_put(store, "c", 1, v, 30));
    expect_accounting(store, 3, 90);

    /* Recency now a, c, b (most recent first): the get refreshed a, so b
     * is the least recently used and goes first. */
    expect_value(store, "a", 1, v, 30);
    CHECK_OK(progcache_store_put(store, "d", 1, v, 30));
    expect_accounting(store, 3, 90);
    expect_miss(store, "b", 1); /* a miss changes no recency */

    /* Recency d, a, c: the next put evicts c. */
    CHECK_OK(progcache_store_put(store, "e", 1, v, 30));
    expect_miss(store, "c", 1);
    expect_accounting(store, 3, 90);
    /* Recency e, d, a. Replacing a refreshes it too: the next put evicts d. */
    CHECK_OK(progcache_store_put(store, "a", 1, v, 20));
    CHECK_OK(progcache_store_put(store, "f", 1, v, 30));
    expect_miss(store, "d", 1);
    expect_accounting(store, 3, 80);

    /* A value larger than the cap is not kept, and drops the older value. */
    char big[101];
    memset(big, 'B', sizeof big);
    CHECK_OK(progcache_store_put(store, "a", 1, big, sizeof big));
    expect_miss(store, "a", 1);
    expect_accounting(store, 2, 60);
    CHECK_OK(progcache_store_put(store, "z", 1, big, sizeof big));
    expect_miss(store, "z", 1);
    expect_accounting(store, 2, 60);

    /* A value of exactly the cap is kept and evicts all the others. */
    CHECK_OK(progcache_store_put(store, "full", 4, big, 100));
    expect_accounting(store, 1, 100);
    expect_value(store, "full", 4, big, 100);
    expect_miss(store, "e", 1);
    expect_miss(store, "f", 1);

    /* Growing a value in place evicts the others, not itself. */
    CHECK_OK(progcache_store_put(store, "x", 1, v, 10));
    CHECK_OK(progcache_store_put(store, "y", 1, v, 10));
    expect_accounting(store, 2, 20);
    CHECK_OK(progcache_store_put(store, "x", 1, big, 95));
    expect_accounting(store, 1, 95);
    expect_value(store, "x", 1, big, 95);
    progcache_store_free(store);

    /* Random sizes: the total never goes over the cap. */
    store = new_store(5000);
    unsigned char data[3000];
    memset(data, 1, sizeof data);
    uint32_t seed = 12345;
    for (int i = 0; i < 5000; i++) {
        seed = seed * 1103515245u + 12345u;
        char key[16];
        snprintf(key, sizeof key, "k%u", (seed >> 8) % 200);
        size_t size = (seed >> 4) % sizeof data;
        CHECK_OK(progcache_store_put(store, key, strlen(key), data, size));
        uint64_t total = 0;
        CHECK_OK(progcache_store_total_size(&total, store));
        CHECK(total <= 5000);
        CHECK(total >= size);
        expect_value(store, key, strlen(key), data, size);
    }
    progcache_store_free(store);
}

static void test_key_bytes(void)
{
    progcache_store *store = new_store(0);
    /* Same prefix, different lengths; embedded NULs; differing last byte. */
    static const struct {
        const char *key;
        size_t len;
    } keys[] = {
        {"a", 1},        {"ab", 2},       {"abc", 3},      {"ab\0c", 4},
        {"ab\0d", 4},    {"ab\0", 3},     {"\0", 1},       {"\0\0", 2},
        {"abc\0\0", 5},  {"\xff", 1},     {"\xff\xfe", 2},
    };
    size_t n = sizeof keys / sizeof keys[0];
    for (size_t i = 0; i < n; i++) {
        unsigned char value[16];
        memset(value, (int)i + 1, sizeof value);
        CHECK_OK(progcache_store_put(store, keys[i].key, keys[i].len, value, i + 1));
    }
    expect_accounting(store, n, n * (n + 1) / 2);
    for (size_t i = 0; i < n; i++) {
        unsigned char value[16];
        memset(value, (int)i + 1, sizeof value);
        expect_value(store, keys[i].key, keys[i].len, value, i + 1);
    }
    CHECK_OK(progcache_store_remove(store, "ab\0c", 4));
    expect_miss(store, "ab\0c", 4);
    expect_value(store, "ab\0d", 4, "\5\5\5\5\5", 5);
    expect_value(store, "ab\0", 3, "\6\6\6\6\6\6", 6);

    /* Long keys that differ only in their last byte. */
    unsigned char long_key[1000];
    memset(long_key, 'k', sizeof long_key);
    for (int i = 0; i < 3; i++) {
        long_key[999] = (unsigned char)i;
        CHECK_OK(progcache_store_put(store, long_key, sizeof long_key, &i, sizeof i));
    }
    for (int i = 0; i < 3; i++) {
        long_key[999] = (unsigned char)i;
        expect_value(store, long_key, sizeof long_key, &i, sizeof i);
    }
    progcache_store_free(store);
}

/* Enough entries that the table grows several times. */
static void test_many_entries(void)
{
    progcache_store *store = new_store(0);
    const uint32_t n = 20000;
    for (uint32_t i = 0; i < n; i++)
        CHECK_OK(progcache_store_put(store, &i, sizeof i, &i, sizeof i));
    expect_accounting(store, n, (uint64_t)n * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++)
        expect_value(store, &i, sizeof i, &i, sizeof i);
    /* Replacing entries that share buckets keeps the rest of each chain. */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)i << 32 | i;
        CHECK_OK(progcache_store_put(store, &i, sizeof i, &v, sizeof v));
    }
    expect_accounting(store, n, (uint64_t)n * sizeof(uint64_t));
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)i << 32 | i;
        expect_value(store, &i, sizeof i, &v, sizeof v);
    }
    for (uint32_t i = 0; i < n; i++)
        CHECK_OK(progcache_store_put(store, &i, sizeof i, &i, sizeof i));
    for (uint32_t i = 0; i < n; i += 2)
        CHECK_OK(progcache_store_remove(store, &i, sizeof i));
    expect_accounting(store, n / 2, (uint64_t)n / 2 * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) {
        if (i % 2)
            expect_value(store, &i, sizeof i, &i, sizeof i);
        else
            expect_miss(store, &i, sizeof i);
    }
    progcache_store_free(store);
}

static void test_alloc_failure(void)
{
    /* Each allocation of the constructor in turn. */
    for (long n = 1;; n++) {
        progcache_store *store = (progcache_store *)1;
        progcache__alloc_fail_after(n);
        int rc = progcache_store_memory_new(&store, NULL);
        progcache__alloc_fail_after(0);
        if (rc == PROGCACHE_OK) {
            CHECK(n > 1);
            progcache_store_free(store);
            break;
        }
        CHECK_RC(PROGCACHE_ENOMEM, rc);
        CHECK(store == NULL);
        CHECK(n < 10);
    }

    progcache_store *store = new_store(0);
    put_str(store, "a", "old");

    /* A failed put changes nothing: not the count, not an older value. */
    progcache__alloc_fail_after(1);
    CHECK_RC(PROGCACHE_ENOMEM, progcache_store_put(store, "b", 1, "new", 3));
    progcache__alloc_fail_after(0);
    CHECK(strstr(progcache_error_last(), "memory") != NULL);
    progcache__alloc_fail_after(1);
    CHECK_RC(PROGCACHE_ENOMEM, progcache_store_put(store, "a", 1, "new", 3));
    progcache__alloc_fail_after(0);
    expect_accounting(store, 1, 3);
    expect_value(store, "a", 1, "old", 3);
    expect_miss(store, "b", 1);

    /* A hit into a buffer that must grow reports ENOMEM, and the entry is
     * still there. */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache__alloc_fail_after(1);
    CHECK_RC(PROGCACHE_ENOMEM, progcache_store_get(&buf, store, "a", 1));
    progcache__alloc_fail_after(0);
    CHECK(buf.data == NULL);
    expect_value(store, "a", 1, "old", 3);

    /* The second allocation of a put can only be growing the table: a
     * failure there is harmless and every put still succeeds. */
    for (uint32_t i = 0; i < 1000; i++) {
        progcache__alloc_fail_after(2);
        CHECK_OK(progcache_store_put(store, &i, sizeof i, &i, sizeof i));
        progcache__alloc_fail_after(0);
    }
    expect_accounting(store, 1001, 3 + 1000 * sizeof(uint32_t));
    for (uint32_t i = 0; i < 1000; i++)
        expect_value(store, &i, sizeof i, &i, sizeof i);
    /* And the table still grows once allocations work again. */
    for (uint32_t i = 1000; i < 5000; i++)
        CHECK_OK(progcache_store_put(store, &i, sizeof i, &i, sizeof i));
    for (uint32_t i = 0; i < 5000; i++)
        expect_value(store, &i, sizeof i, &i, sizeof i);
    expect_accounting(store, 5001, 3 + 5000 * sizeof(uint32_t));
    progcache_store_free(store);
}

/* ---- many threads ------------------------------------------------------ */

#define STRESS_THREADS 8
#define STRESS_OPS 20000
#define STRESS_KEYS 1000
#define STRESS_CAP (1u << 20)

/* Key i has a length that varies with i, and a value whose size and bytes
 * are a function of i, so any get can be checked without shared state. */
static size_t stress_key(unsigned char *key, uint32_t i)
{
    size_t len = 4 + i % 13;
    memset(key, 0, len);
    memcpy(key, &i, sizeof i);
    return len;
}

static size_t stress_value(unsigned char *value, uint32_t i)
{
    size_t size = (i * 2654435761u) % 3000;
    for (size_t j = 0; j < size; j++)
        value[j] = (unsigned char)(i * 31 + j * 7);
    return size;
}

typedef struct {
    progcache_store *store;
    uint32_t seed;
    int hits;
} stress_arg;

static void *stress_thread(void *p)
{
    stress_arg *arg = p;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned char key[32], value[3000];
    uint32_t x = arg->seed;
    for (int op = 0; op < STRESS_OPS; op++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        uint32_t i = x % STRESS_KEYS;
        size_t key_len = stress_key(key, i);
        uint32_t what = (x >> 16) % 100;
        if (what < 55) {
            int rc = progcache_store_get(&buf, arg->store, key, key_len);
            if (rc == PROGCACHE_OK) {
                size_t size = stress_value(value, i);
                CHECK(buf.size == size);
                CHECK(memcmp(buf.data, value, size) == 0);
                arg->hits++;
            } else {
                CHECK_RC(PROGCACHE_ENOTFOUND, rc);
            }
        } else if (what < 93) {
            size_t size = stress_value(value, i);
            CHECK_OK(progcache_store_put(arg->store, key, key_len, value, size));
        } else if (what < 98) {
            int rc = progcache_store_remove(arg->store, key, key_len);
            CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
        } else {
            uint64_t total = 0, count = 0;
            CHECK_OK(progcache_store_total_size(&total, arg->store));
            CHECK_OK(progcache_store_count(&count, arg->store));
            CHECK(total <= STRESS_CAP);
            CHECK(count <= STRESS_KEYS);
        }
    }
    progcache_buf_free(&buf);
    return NULL;
}

static void test_threads(void)
{
    progcache_store *store = new_store(STRESS_CAP);
    pthread_t threads[STRESS_THREADS];
    stress_arg args[STRESS_THREADS];
    for (int t = 0; t < STRESS_THREADS; t++) {
        args[t].store = store;
        args[t].seed = 0x9e3779b9u * (uint32_t)(t + 1);
        args[t].hits = 0;
        CHECK(pthread_create(&threads[t], NULL, stress_thread, &args[t]) == 0);
    }
    int hits = 0;
    for (int t = 0; t < STRESS_THREADS; t++) {
        CHECK(pthread_join(threads[t], NULL) == 0);
        hits += args[t].hits;
    }
    CHECK(hits > 0);

    /* What every key now reads back must add up to the store's accounting. */
    uint64_t count = 0, total = 0;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned char key[32], value[3000];
    for (uint32_t i = 0; i < STRESS_KEYS; i++) {
        size_t key_len = stress_key(key, i);
        int rc = progcache_store_get(&buf, store, key, key_len);
        if (rc == PROGCACHE_ENOTFOUND)
            continue;
        CHECK_OK(rc);
        size_t size = stress_value(value, i);
        CHECK(buf.size == size && memcmp(buf.data, value, size) == 0);
        count++;
        total += size;
    }
    progcache_buf_free(&buf);
    CHECK(count > 0);
    CHECK(total <= STRESS_CAP);
    expect_accounting(store, count, total);
    progcache_store_free(store);
}

int main(void)
{
    test_options();
    test_basic();
    test_lru_order();
    test_key_bytes();
    test_many_entries();
    test_alloc_failure();
    test_threads();
    printf("test_store_memory: ok\n");
    return 0;
}
