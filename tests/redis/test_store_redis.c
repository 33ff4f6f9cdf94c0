/* The Redis store against a real redis-server: round trips, key names,
 * TTL, prefixes, read-only mode, the background put queue, count/size/
 * clear, read-through fill of a file tier, damaged values, HMAC and the
 * bound on value sizes (max_artifact_size). */
#include <pthread.h>
#include <unistd.h>

#include "check.h"
#include "error.h"
#include "redis_fixture.h"
#include "sha256.h"

static const char SECRET[] = "a shared secret of 32 bytes....";
static const char OTHER_SECRET[] = "another secret, also 32 bytes...";

static test_redis server;

static progcache_store *open_store(const char *url, unsigned int flags, const char *prefix,
                                   const char *secret)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = url;
    opts.flags = flags;
    opts.key_prefix = prefix;
    /* Generous timeouts: a loaded CI machine must not turn hits into misses. */
    opts.connect_timeout_ms = 2000;
    opts.command_timeout_ms = 2000;
    if (secret) {
        opts.secret = secret;
        opts.secret_len = strlen(secret);
    }
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &opts));
    return s;
}

static void check_get(progcache_store *s, const void *key, size_t key_len, const void *want,
                      size_t want_len)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, key, key_len));
    CHECK(buf.size == want_len);
    CHECK(want_len == 0 || memcmp(buf.data, want, want_len) == 0);
    CHECK(buf.data[buf.size] == '\0');
    progcache_buf_free(&buf);
}

static void check_miss(progcache_store *s, const void *key, size_t key_len)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, key, key_len));
    progcache_buf_free(&buf);
}


/* Connections the server has accepted since it started. */
static long long connections_received(void)
{
    return test_redis_info(&server, "stats", "total_connections_received");
}

static void test_round_trip(void)
{
    progcache_store *s = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, NULL, NULL);
    const unsigned char key[] = {0, 1, 2, 0, 0xff, 'k'}; /* any bytes, NULs too */
    size_t sizes[] = {0, 1, 1000, (size_t)3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *v = test_pattern(sizes[i], (unsigned int)i);
        CHECK_OK(progcache_store_put(s, key, sizeof key, v, sizes[i]));
        check_get(s, key, sizeof key, v, sizes[i]);
        free(v);
    }
    check_miss(s, "absent", 6);

    /* The Redis name is prefix + hex SHA-256 of the key; no expiry. */
    char name[300];
    test_redis_name(name, sizeof name, "progcache:", key, sizeof key);
    const char *ttl[] = {"TTL", name};
    CHECK(test_redis_int(&server, 2, ttl) == -1);

    CHECK_OK(progcache_store_remove(s, key, sizeof key));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(s, key, sizeof key));
    check_miss(s, key, sizeof key);

    /* Sequential calls reuse one pooled connection: the only new one is
     * the raw client's own INFO. */
    long long before = connections_received();
    for (int i = 0; i < 50; i++)
        check_miss(s, "absent", 6);
    CHECK(connections_received() - before == 1);

    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.hits == 4 && c.misses == 52 && c.stores == 4);
    CHECK(c.errors == 0 && c.rejected == 0 && c.store_errors == 0 && c.skipped_backoff == 0);
    progcache_store_free(s);
}

static void test_ttl_and_prefix(void)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = server.url;
    opts.ttl_seconds = 120;
    opts.key_prefix = "team-a:";
    opts.flags = PROGCACHE_REDIS_SYNC_PUT;
    progcache_store *a = NULL;
    CHECK_OK(progcache_store_redis_new(&a, &opts));
    progcache_store *b = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "team-b:", NULL);
    CHECK_OK(progcache_store_put(a, "k", 1, "va", 2));
    char name[300];
    test_redis_name(name, sizeof name, "team-a:", "k", 1);
    const char *ttl[] = {"TTL", name};
    long long t = test_redis_int(&server, 2, ttl);
    CHECK(t > 0 && t <= 120);
    check_get(a, "k", 1, "va", 2);
    check_miss(b, "k", 1); /* other prefix, other entries */
    progcache_store_free(a);
    progcache_store_free(b);
}

/* The default: put queues and returns; flush and free write it all. */
static void test_async_put(void)
{
    progcache_store *s = open_store(server.url, 0, "async:", NULL);
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        CHECK_OK(progcache_store_put(s, key, strlen(key), key, strlen(key)));
    }
    CHECK_OK(progcache_store_flush(s));
    CHECK(test_redis_counters(s).stores == 50);
    check_get(s, "key-49", 6, "key-49", 6);
    for (int i = 50; i < 100; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        CHECK_OK(progcache_store_put(s, key, strlen(key), key, strlen(key)));
    }
    progcache_store_free(s); /* drains the queue */
    s = open_store(server.url, 0, "async:", NULL);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        check_get(s, key, strlen(key), key, strlen(key));
    }
    uint64_t n = 0;
    CHECK_OK(progcache_store_count(&n, s));
    CHECK(n == 100);
    progcache_store_free(s);
}

static void test_count_size_clear(void)
{
    const char *prefix = "glob*[x]?:"; /* glob characters must be escaped in SCAN */
    progcache_store *s = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, prefix, NULL);
    uint64_t n = 1, size = 1;
    CHECK_OK(progcache_store_count(&n, s));
    CHECK_OK(progcache_store_total_size(&size, s));
    CHECK(n == 0 && size == 0);
    uint64_t want = 0;
    for (unsigned int i = 0; i < 5; i++) {
        unsigned char *v = test_pattern(100 * i + 7, i);
        char key[8] = {'k', (char)('0' + i)};
        CHECK_OK(progcache_store_put(s, key, 2, v, 100 * i + 7));
        want += 100 * i + 7;
        free(v);
    }
    /* A lease under the prefix and a key matching the unescaped glob are
     * not entries. */
    progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
    CHECK_OK(progcache_store_lease_acquire(&lease, s, "k0", 2, 60000));
    CHECK(lease.held);
    test_redis_set(&server, "globA[x]Z:other", "x", 1);
    CHECK_OK(progcache_store_count(&n, s));
    CHECK_OK(progcache_store_total_size(&size, s));
    CHECK(n == 5 && size == want);

    CHECK_OK(progcache_store_clear(s));
    CHECK_OK(progcache_store_count(&n, s));
    CHECK(n == 0);
    check_miss(s, "k1", 2);
    const char *exists[] = {"EXISTS", "globA[x]Z:other"};
    CHECK(test_redis_int(&server, 2, exists) == 1);
    progcache_store_free(s);
}

static void test_read_only(void)
{
    progcache_store *w = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "ro:", NULL);
    progcache_store *r = open_store(server.url, PROGCACHE_REDIS_READONLY, "ro:", NULL);
    CHECK_OK(progcache_store_put(w, "have", 4, "old", 3));
    CHECK_OK(progcache_store_put(r, "have", 4, "new", 3)); /* ignored */
    CHECK_OK(progcache_store_put(r, "new", 3, "x", 1));
    check_get(r, "have", 4, "old", 3);
    check_miss(r, "new", 3);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(r, "have", 4));
    CHECK_OK(progcache_store_clear(r));
    check_get(w, "have", 4, "old", 3);
    progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
    CHECK_RC(PROGCACHE_EREMOTE, progcache_store_lease_acquire(&lease, r, "have", 4, 1000));
    CHECK(!lease.held);
    CHECK(test_redis_counters(r).stores == 0);
    progcache_store_free(r);
    progcache_store_free(w);
}

static void test_unix_socket_and_db(void)
{
    progcache_store *s = open_store(server.unix_url, PROGCACHE_REDIS_SYNC_PUT, "sock:", NULL);
    CHECK_OK(progcache_store_put(s, "u", 1, "via socket", 10));
    check_get(s, "u", 1, "via socket", 10);
    progcache_store_free(s);

    char url[300];
    snprintf(url, sizeof url, "%s/5", server.url);
    s = open_store(url, PROGCACHE_REDIS_SYNC_PUT, "db:", NULL);
    CHECK_OK(progcache_store_put(s, "d", 1, "in db 5", 7));
    char name[300];
    test_redis_name(name, sizeof name, "db:", "d", 1);
    const char *exists[] = {"EXISTS", name};
    CHECK(test_redis_int(&server, 2, exists) == 0);
    server.db = 5;
    CHECK(test_redis_int(&server, 2, exists) == 1);
    server.db = 0;
    progcache_store_free(s);
}

/* Tiers {file, redis}: a remote hit is copied into the file tier. */
static void test_read_through_fill(void)
{
    char *dir = test_mkdtemp("redis-fill");
    progcache_store *writer = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "fill:", NULL);
    CHECK_OK(progcache_store_put(writer, "kernel", 6, "CUBIN bytes", 11));
    progcache_store_free(writer);

    progcache_store *file = NULL;
    CHECK_OK(progcache_store_file_new(&file, dir, NULL));
    progcache_store *redis = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "fill:", NULL);
    progcache_store *tiers[] = {file, redis};
    progcache *cache = NULL;
    CHECK_OK(progcache_open_tiers(&cache, tiers, 2, NULL));

    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, cache, "kernel", 6));
    CHECK(buf.size == 11 && memcmp(buf.data, "CUBIN bytes", 11) == 0);
    CHECK(test_redis_counters(redis).hits == 1);
    CHECK_OK(progcache_get(&buf, cache, "kernel", 6)); /* now from the file tier */
    CHECK(test_redis_counters(redis).hits == 1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, "nothing", 7));
    progcache_close(cache);

    progcache_store *check = NULL;
    CHECK_OK(progcache_store_file_new(&check, dir, NULL));
    check_get(check, "kernel", 6, "CUBIN bytes", 11);
    progcache_store_free(check);
    progcache_buf_free(&buf);
    test_rmtree(dir);
    free(dir);
}

/* Overwrite the stored value of key with bytes and expect a rejection. */
static void expect_rejected(progcache_store *s, const char *name, const void *key,
                            size_t key_len, const void *bytes, size_t len)
{
    test_redis_set(&server, name, bytes, len);
    uint64_t before = test_redis_counters(s).rejected, misses = test_redis_counters(s).misses;
    progcache__error(PROGCACHE_EIO, "marker");
    check_miss(s, key, key_len);
    /* A rejection is a miss: it leaves the caller's last error alone. */
    CHECK(strcmp(progcache_error_last(), "marker") == 0);
    CHECK(test_redis_counters(s).rejected == before + 1);
    CHECK(test_redis_counters(s).misses == misses);
}

static void test_corruption(void)
{
    progcache_store *s = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "bad:", NULL);
    unsigned char *payload = test_pattern(1000, 3);
    char name[300];
    test_redis_name(name, sizeof name, "bad:", "key", 3);
    CHECK_OK(progcache_store_put(s, "key", 3, payload, 1000));
    size_t len;
    char *good = test_redis_get(&server, name, &len);
    CHECK(len == 56 + 1000);
    char *v = malloc(len);
    CHECK(v != NULL);

    expect_rejected(s, name, "key", 3, good, len - 1); /* truncated */
    memcpy(v, good, len);
    v[56 + 500] ^= 0x10; /* a flipped payload bit */
    expect_rejected(s, name, "key", 3, v, len);
    memcpy(v, good, len);
    v[4] = 0; /* a format version that never was (a newer one: test_redis_meta) */
    expect_rejected(s, name, "key", 3, v, len);
    memcpy(v, good, len);
    v[8] ^= 1; /* the length */
    expect_rejected(s, name, "key", 3, v, len);
    memcpy(v, good, len);
    v[30] ^= 1; /* the digest */
    expect_rejected(s, name, "key", 3, v, len);
    expect_rejected(s, name, "key", 3, "hello, not an envelope", 22);
    /* An empty value reads as no value (GETRANGE answers "" for both,
     * and a miss costs one round trip): a miss, not a rejection. */
    test_redis_set(&server, name, "", 0);
    uint64_t misses = test_redis_counters(s).misses;
    check_miss(s, "key", 3);
    CHECK(test_redis_counters(s).misses == misses + 1);
    /* A non-string value is a miss too (counted as an error). */
    const char *del[] = {"DEL", name};
    test_redis_int(&server, 2, del);
    const char *push[] = {"RPUSH", name, "x"};
    test_redis_int(&server, 3, push);
    uint64_t errors = test_redis_counters(s).errors;
    check_miss(s, "key", 3);
    CHECK(test_redis_counters(s).errors == errors + 1);

    /* The good bytes still work: damage was in the value, not the store. */
    test_redis_int(&server, 2, del);
    test_redis_set(&server, name, good, len);
    check_get(s, "key", 3, payload, 1000);
    CHECK(test_redis_counters(s).rejected == 6);
    free(v);
    free(good);
    free(payload);
    progcache_store_free(s);
}

/* Values over max_artifact_size are neither written nor read: a put is
 * refused (store_errors), a get is a miss (rejected), both logged, and a
 * huge value is not read whole to find that out. */
static void test_max_artifact_size(void)
{
    log_capture log = LOG_CAPTURE_INIT;
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = server.url;
    opts.flags = PROGCACHE_REDIS_SYNC_PUT;
    opts.key_prefix = "max:";
    opts.connect_timeout_ms = opts.command_timeout_ms = 2000;
    opts.max_artifact_size = 1000;
    opts.log = test_log_capture;
    opts.log_ctx = &log;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &opts));
    unsigned char *v = test_pattern((size_t)4 << 20, 5);
    char name[300];
    size_t len;

    CHECK_OK(progcache_store_put(s, "big", 3, v, 1001));
    CHECK(test_redis_counters(s).store_errors == 1 && test_redis_counters(s).stores == 0);
    test_expect_logged(&log, 1, "1001 bytes is more than max_artifact_size (1000 bytes)");
    test_redis_name(name, sizeof name, "max:", "big", 3);
    CHECK(test_redis_get(&server, name, &len) == NULL);
    CHECK_OK(progcache_store_put(s, "ok", 2, v, 1000)); /* at the bound */
    check_get(s, "ok", 2, v, 1000);

    /* Written by a store with the default bound, read by this one. */
    progcache_store *wide = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "max:", NULL);
    CHECK_OK(progcache_store_put(wide, "big", 3, v, 1001));
    check_get(wide, "big", 3, v, 1001);
    progcache__error(PROGCACHE_EIO, "marker");
    check_miss(s, "big", 3);
    CHECK(strcmp(progcache_error_last(), "marker") == 0); /* a miss says nothing */
    CHECK(test_redis_counters(s).rejected == 1);
    test_expect_logged(&log, 2, "it holds 1001 bytes, more than max_artifact_size (1000 bytes)");
    /* 4 MiB: its first part's header says how large it is, and nothing
     * more is read (redis_get.c). */
    CHECK_OK(progcache_store_put(wide, "huge", 4, v, (size_t)4 << 20));
    check_miss(s, "huge", 4);
    CHECK(test_redis_counters(s).rejected == 2);
    test_expect_logged(&log, 3, "it holds 4194304 bytes, more than max_artifact_size (1000");
    /* Not a failure, and the next call works. */
    check_get(s, "ok", 2, v, 1000);
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.errors == 0 && c.backoffs == 0 && c.hits == 2 && c.misses == 0);
    progcache_store_free(wide);
    progcache_store_free(s);

    /* Background puts: refused before they are queued. */
    opts.flags = 0;
    CHECK_OK(progcache_store_redis_new(&s, &opts));
    CHECK_OK(progcache_store_put(s, "async-big", 9, v, 5000));
    CHECK_OK(progcache_store_flush(s));
    CHECK(test_redis_counters(s).store_errors == 1 && test_redis_counters(s).stores == 0);
    test_redis_name(name, sizeof name, "max:", "async-big", 9);
    CHECK(test_redis_get(&server, name, &len) == NULL);
    progcache_store_free(s);
    free(v);
}

/* Recompute the digest of a format-2 value (header bytes before the
 * records): what anyone who can write to the server can do. */
static void redigest(unsigned char *v, size_t len, size_t header, const void *key,
                     size_t key_len)
{
    unsigned char *msg = malloc(24 + 32 + len - header);
    CHECK(msg != NULL);
    memcpy(msg, v, 24);
    msg[5] = 0;
    CHECK_OK(progcache__sha256_oneshot(msg + 24, key, key_len));
    memcpy(msg + 56, v + header, len - header);
    CHECK_OK(progcache__sha256_oneshot(v + 24, msg, 56 + len - header));
    free(msg);
}

static void test_hmac(void)
{
    progcache_store *w = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "mac:", SECRET);
    progcache_store *same = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "mac:", SECRET);
    progcache_store *wrong =
        open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "mac:", OTHER_SECRET);
    progcache_store *plain = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "mac:", NULL);
    char name[300], other[300];
    test_redis_name(name, sizeof name, "mac:", "kern", 4);
    test_redis_name(other, sizeof other, "mac:", "other", 5);

    CHECK_OK(progcache_store_put(w, "kern", 4, "trusted code", 12));
    size_t len;
    char *tagged = test_redis_get(&server, name, &len);
    CHECK(len == 88 + 12 && tagged[5] == 1);
    check_get(same, "kern", 4, "trusted code", 12);
    check_get(plain, "kern", 4, "trusted code", 12); /* no secret: digest only */
    check_miss(wrong, "kern", 4);
    CHECK(test_redis_counters(wrong).rejected == 1);

    /* Tampered payload with a recomputed digest: only the tag catches it. */
    char *evil = malloc(len);
    CHECK(evil != NULL);
    memcpy(evil, tagged, len);
    memcpy(evil + 88, "EVIL code!!!", 12);
    redigest((unsigned char *)evil, len, 88, "kern", 4);
    test_redis_set(&server, name, evil, len);
    check_miss(same, "kern", 4);
    CHECK(test_redis_counters(same).rejected == 1);
    check_get(plain, "kern", 4, "EVIL code!!!", 12); /* why a shared cache needs the secret */

    /* A valid tagged value copied under another key: the tag binds the key. */
    test_redis_set(&server, other, tagged, len);
    check_miss(same, "other", 5);
    CHECK(test_redis_counters(same).rejected == 2);

    /* Missing tag: written without the secret. */
    CHECK_OK(progcache_store_put(plain, "kern", 4, "untagged", 8));
    check_miss(same, "kern", 4);
    CHECK(test_redis_counters(same).rejected == 3);

    /* Missing tag: the tag stripped from a good value. */
    char *stripped = malloc(len);
    CHECK(stripped != NULL);
    memcpy(stripped, tagged, 56);
    stripped[5] = 0;
    memcpy(stripped + 56, tagged + 88, 12);
    test_redis_set(&server, name, stripped, 56 + 12);
    check_miss(same, "kern", 4);
    CHECK(test_redis_counters(same).rejected == 4);
    check_get(plain, "kern", 4, "trusted code", 12);

    test_redis_set(&server, name, tagged, len);
    check_get(same, "kern", 4, "trusted code", 12);
    CHECK(test_redis_counters(same).hits == 2);
    free(stripped);
    free(evil);
    free(tagged);
    progcache_store_free(w);
    progcache_store_free(same);
    progcache_store_free(wrong);
    progcache_store_free(plain);
}

/* With requirepass: the password from the URL is used; a wrong one makes
 * misses (counted errors), never a failure. */
static void test_password(void)
{
    test_redis locked;
    test_redis_start(&locked, "s3cret-pw");
    progcache_store *s = open_store(locked.url, PROGCACHE_REDIS_SYNC_PUT, NULL, NULL);
    CHECK_OK(progcache_store_put(s, "k", 1, "v", 1));
    check_get(s, "k", 1, "v", 1);
    progcache_store_free(s);

    char url[300];
    snprintf(url, sizeof url, "redis://default:s3cret-pw@127.0.0.1:%d/0", locked.port);
    s = open_store(url, PROGCACHE_REDIS_SYNC_PUT, NULL, NULL); /* ACL user form */
    check_get(s, "k", 1, "v", 1);
    progcache_store_free(s);

    s = open_store(locked.unix_url, PROGCACHE_REDIS_SYNC_PUT, NULL, NULL);
    check_get(s, "k", 1, "v", 1);
    progcache_store_free(s);

    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", locked.port);
    s = open_store(url, PROGCACHE_REDIS_SYNC_PUT, NULL, NULL);
    check_miss(s, "k", 1);
    CHECK_OK(progcache_store_put(s, "k", 1, "w", 1));
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.errors == 2 && c.hits == 0 && c.stores == 0 && c.store_errors == 1);
    CHECK(c.skipped_backoff == 0); /* two failures: below the limit of 3 */
    progcache_store_free(s);
    test_redis_stop(&locked);
}


/* Many threads on one store: the connection pool, the put queue and the
 * counters under contention. Each thread owns its keys, so every value it
 * reads back must be the one it wrote last. */
#define THREADS 8
#define PER_THREAD 200

typedef struct worker {
    progcache_store *store;
    int id;
    int bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    char key[32], value[64];
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(key, sizeof key, "t%d-k%d", w->id, i % 10);
        snprintf(value, sizeof value, "thread %d value %d", w->id, i);
        if (progcache_store_put(w->store, key, strlen(key), value, strlen(value)) ||
            progcache_store_get(&buf, w->store, key, strlen(key)) ||
            buf.size != strlen(value) || memcmp(buf.data, value, buf.size) != 0)
            w->bad++;
    }
    progcache_buf_free(&buf);
    return NULL;
}

static void test_threads(void)
{
    progcache_store *s = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, "mt:", SECRET);
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){s, i, 0};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].bad == 0);
    }
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.hits == THREADS * PER_THREAD && c.stores == THREADS * PER_THREAD);
    CHECK(c.errors == 0 && c.rejected == 0);
    progcache_store_free(s);

    /* Background puts from many threads: all written by flush. */
    s = open_store(server.url, 0, "mt-async:", NULL);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){s, i, 0};
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK_OK(progcache_store_flush(s));
    c = test_redis_counters(s);
    CHECK(c.stores == THREADS * PER_THREAD && c.errors == 0);
    uint64_t n = 0;
    CHECK_OK(progcache_store_count(&n, s));
    CHECK(n == THREADS * 10);
    progcache_store_free(s);
}

int main(void)
{
    test_redis_require();
    test_redis_start(&server, NULL);
    test_round_trip();
    test_ttl_and_prefix();
    test_async_put();
    test_count_size_clear();
    test_read_only();
    test_unix_socket_and_db();
    test_read_through_fill();
    test_corruption();
    test_max_artifact_size();
    test_hmac();
    test_password();
    test_threads();
    test_redis_stop(&server);
    printf("test_store_redis: ok\n");
    return 0;
}
