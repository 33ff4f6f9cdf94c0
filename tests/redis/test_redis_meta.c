/* The Redis store's version-2 interface against a real redis-server:
 * kind and records travel inside the envelope (put_meta / get_meta, sync
 * and queued, with and without a secret), and through a cache's remote hit
 * into its home directory; a value copied under another key's name is
 * rejected without a secret; values of envelope format 1 (as the previous
 * progcache wrote them) are still read, with no records and seal NONE; a
 * value of a newer format is a counted, logged miss; the records' bound. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <pthread.h>

#include "buf.h"
#include "cache/cache_stats.h"
#include "check.h"
#include "error.h"
#include "progcache/file.h"
#include "redis_fixture.h"

static const char SECRET[] = "a shared secret of 32 bytes....";
static test_redis server;

static progcache_store *open_store(const char *prefix, unsigned int flags, const char *secret,
                                   log_capture *log, uint64_t max_artifact_size)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = server.url;
    opts.flags = flags;
    opts.key_prefix = prefix;
    opts.connect_timeout_ms = opts.command_timeout_ms = 2000;
    opts.max_artifact_size = max_artifact_size;
    if (secret) {
        opts.secret = secret;
        opts.secret_len = strlen(secret);
    }
    if (log) {
        opts.log = test_log_capture;
        opts.log_ctx = log;
    }
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &opts));
    return s;
}

static const char LOWERED[] = "_Z6kernelPf\0kernel";
static const char USER_RECORD[] = "a record of the user's own";

static void fill_meta(progcache_entry_meta *m, progcache_kind kind)
{
    progcache_entry_meta_clear(m);
    m->kind = kind;
    CHECK_OK(progcache_entry_meta_add(m, PROGCACHE_RECORD_LOWERED_NAMES, LOWERED,
                                      sizeof LOWERED));
    CHECK_OK(progcache_entry_meta_add(m, 0x10001u, USER_RECORD, sizeof USER_RECORD));
}

/* got holds exactly the records of want. */
static void check_records(const progcache_entry_meta *got, const progcache_entry_meta *want)
{
    CHECK(got->records.size == want->records.size);
    CHECK(memcmp(got->records.data, want->records.data, want->records.size) == 0);
    const unsigned char *data;
    size_t len;
    CHECK_OK(progcache_entry_meta_find(&data, &len, got, PROGCACHE_RECORD_LOWERED_NAMES));
    CHECK(len == sizeof LOWERED && memcmp(data, LOWERED, len) == 0);
    CHECK_OK(progcache_entry_meta_find(&data, &len, got, 0x10001u));
    CHECK(len == sizeof USER_RECORD && memcmp(data, USER_RECORD, len) == 0);
}

static void check_get_meta(progcache_store *s, const char *key, const char *want,
                           progcache_entry_meta *got)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get_meta(&buf, got, s, key, strlen(key)));
    CHECK(buf.size == strlen(want) && memcmp(buf.data, want, buf.size) == 0);
    progcache_buf_free(&buf);
}

static void check_miss(progcache_store *s, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache_entry_meta got = PROGCACHE_ENTRY_META_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get_meta(&buf, &got, s, key, strlen(key)));
    CHECK(got.records.size == 0 && got.seal == PROGCACHE_SEAL_NONE);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, key, strlen(key)));
    progcache_entry_meta_release(&got);
    progcache_buf_free(&buf);
}

static void test_round_trip(void)
{
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT, got = PROGCACHE_ENTRY_META_INIT;
    fill_meta(&meta, PROGCACHE_KIND_CUBIN);
    const char *secrets[] = {NULL, SECRET};
    for (int i = 0; i < 2; i++) {
        progcache_store *s = open_store("meta:", PROGCACHE_REDIS_SYNC_PUT, secrets[i], NULL, 0);
        CHECK_OK(progcache_store_put_meta(s, "k", 1, "the bytes", 9, &meta));
        check_get_meta(s, "k", "the bytes", &got);
        CHECK(got.kind == PROGCACHE_KIND_CUBIN && got.seal == PROGCACHE_SEAL_MATCHED);
        check_records(&got, &meta);

        /* A put without metadata: no records, kind unknown, still bound. */
        CHECK_OK(progcache_store_put(s, "plain", 5, "p", 1));
        check_get_meta(s, "plain", "p", &got); /* got's records are replaced */
        CHECK(got.kind == PROGCACHE_KIND_UNKNOWN && got.seal == PROGCACHE_SEAL_MATCHED);
        CHECK(got.records.size == 0);
        check_miss(s, "absent");
        CHECK(test_redis_counters(s).hits == 2 && test_redis_counters(s).rejected == 0);
        progcache_store_free(s);
    }
    /* Written with the secret, read without: the digest alone. */
    progcache_store *plain = open_store("meta:", PROGCACHE_REDIS_SYNC_PUT, NULL, NULL, 0);
    check_get_meta(plain, "k", "the bytes", &got);
    CHECK(got.seal == PROGCACHE_SEAL_MATCHED);
    check_records(&got, &meta);

    /* The envelope in Redis: format 2, the kind, the records' length. */
    char name[300];
    size_t len;
    test_redis_name(name, sizeof name, "meta:", "k", 1);
    unsigned char *v = (unsigned char *)test_redis_get(&server, name, &len);
    CHECK(v && len == 88 + meta.records.size + 9);
    CHECK(v[4] == 2 && v[5] == 1 && v[6] == PROGCACHE_KIND_CUBIN);
    CHECK(v[16] + 256u * v[17] == meta.records.size);
    free(v);

    /* Queued puts carry a copy of the records: changing the caller's
     * meta after the put changes nothing stored. */
    progcache_store *q = open_store("meta-q:", 0, NULL, NULL, 0);
    CHECK_OK(progcache_store_put_meta(q, "k", 1, "queued", 6, &meta));
    progcache_entry_meta changed = PROGCACHE_ENTRY_META_INIT;
    fill_meta(&changed, PROGCACHE_KIND_PTX);
    memset(meta.records.data, 'x', 8);
    CHECK_OK(progcache_store_flush(q));
    check_get_meta(q, "k", "queued", &got);
    CHECK(got.kind == PROGCACHE_KIND_CUBIN);
    check_records(&got, &changed); /* the same records as before the change */
    progcache_store_free(q);
    progcache_store_free(plain);
    progcache_entry_meta_release(&changed);
    progcache_entry_meta_release(&meta);
    progcache_entry_meta_release(&got);
}

/* Records up to PROGCACHE_RECORDS_MAX are written and read even with a
 * small max_artifact_size (the read bound adds them); larger ones are not
 * written: counted, logged, and the put still succeeds. */
static void test_records_bound(void)
{
    log_capture log = LOG_CAPTURE_INIT;
    progcache_store *s = open_store("rec:", PROGCACHE_REDIS_SYNC_PUT, NULL, &log, 1000);
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT, got = PROGCACHE_ENTRY_META_INIT;
    char *big = calloc(1, PROGCACHE_RECORDS_MAX);
    CHECK(big != NULL);
    CHECK_OK(progcache_entry_meta_add(&meta, 7, big, PROGCACHE_RECORDS_MAX - 8));
    CHECK(meta.records.size == PROGCACHE_RECORDS_MAX);
    char payload[1000];
    memset(payload, 'p', sizeof payload);
    CHECK_OK(progcache_store_put_meta(s, "full", 4, payload, sizeof payload, &meta));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get_meta(&buf, &got, s, "full", 4));
    CHECK(buf.size == 1000 && got.records.size == PROGCACHE_RECORDS_MAX);
    CHECK(memcmp(got.records.data, meta.records.data, PROGCACHE_RECORDS_MAX) == 0);

    /* One byte more than the bound (built by hand: meta_add refuses). */
    CHECK_OK(progcache__buf_reserve(&meta.records, PROGCACHE_RECORDS_MAX + 1));
    progcache__buf_set_size(&meta.records, PROGCACHE_RECORDS_MAX + 1);
    uint64_t errors = test_redis_counters(s).store_errors;
    CHECK_OK(progcache_store_put_meta(s, "over", 4, "x", 1, &meta));
    CHECK(test_redis_counters(s).store_errors == errors + 1 && test_redis_counters(s).stores == 1);
    test_expect_logged(&log, 1, "records are 1048577 bytes");
    check_miss(s, "over");
    progcache_store_free(s);
    progcache_entry_meta_release(&meta);
    progcache_entry_meta_release(&got);
    progcache_buf_free(&buf);
    free(big);
}

/* Without any secret, a good value copied to another key's Redis name is
 * rejected: the digest covers the key's hash. */
static void test_copied_value(void)
{
    log_capture log = LOG_CAPTURE_INIT;
    progcache_store *s = open_store("copy:", PROGCACHE_REDIS_SYNC_PUT, NULL, &log, 0);
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    fill_meta(&meta, PROGCACHE_KIND_PTX);
    CHECK_OK(progcache_store_put_meta(s, "key-a", 5, "code for a", 10, &meta));
    CHECK_OK(progcache_store_put(s, "key-b", 5, "code for b", 10));
    char a[300], b[300];
    size_t len;
    test_redis_name(a, sizeof a, "copy:", "key-a", 5);
    test_redis_name(b, sizeof b, "copy:", "key-b", 5);
    char *value = test_redis_get(&server, a, &len);
    CHECK(value != NULL);
    test_redis_set(&server, b, value, len);

    progcache__error(PROGCACHE_EIO, "marker");
    uint64_t misses = test_redis_counters(s).misses;
    check_miss(s, "key-b"); /* twice: get_meta and get */
    CHECK(strcmp(progcache_error_last(), "marker") == 0);
    CHECK(test_redis_counters(s).rejected == 2 && test_redis_counters(s).misses == misses);
    test_expect_logged(&log, 2, "written for another key");
    progcache_entry_meta got = PROGCACHE_ENTRY_META_INIT;
    check_get_meta(s, "key-a", "code for a", &got); /* the original is fine */
    progcache_entry_meta_release(&got);
    progcache_entry_meta_release(&meta);
    free(value);
    progcache_store_free(s);
}

/* A value of envelope format 1, laid out as the previous progcache wrote
 * it: "pcEV", version 1, flags, u64 payload length at 8, SHA-256 of the
 * payload at 16, with a secret the tag at 48 (HMAC over u64le(key_len) ||
 * key || bytes 0..47 || payload), then the payload. */
static unsigned char *craft_v1(size_t *len, const char *key, const char *payload, int tagged)
{
    size_t size = strlen(payload), key_len = strlen(key), header = tagged ? 80 : 48;
    unsigned char *v = calloc(1, header + size);
    CHECK(v != NULL);
    memcpy(v, "pcEV", 4);
    v[4] = 1;
    v[5] = tagged ? 1 : 0;
    for (int i = 0; i < 8; i++)
        v[8 + i] = (unsigned char)((uint64_t)size >> (8 * i));
    SHA256((const unsigned char *)payload, size, v + 16);
    if (tagged) {
        unsigned char *msg = malloc(8 + key_len + 48 + size);
        CHECK(msg != NULL);
        for (int i = 0; i < 8; i++)
            msg[i] = (unsigned char)((uint64_t)key_len >> (8 * i));
        memcpy(msg + 8, key, key_len);
        memcpy(msg + 8 + key_len, v, 48);
        memcpy(msg + 8 + key_len + 48, payload, size);
        unsigned int n = 0;
        CHECK(HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), msg, 8 + key_len + 48 + size,
                   v + 48, &n) != NULL && n == 32);
        free(msg);
    }
    memcpy(v + header, payload, size);
    *len = header + size;
    return v;
}

static void test_format_1(void)
{
    char name[300];
    size_t len;
    progcache_entry_meta got = PROGCACHE_ENTRY_META_INIT;
    progcache_store *s = open_store("v1:", PROGCACHE_REDIS_SYNC_PUT, NULL, NULL, 0);
    progcache_store *sec = open_store("v1:", PROGCACHE_REDIS_SYNC_PUT, SECRET, NULL, 0);

    unsigned char *v = craft_v1(&len, "old", "old bytes", 0);
    test_redis_name(name, sizeof name, "v1:", "old", 3);
    test_redis_set(&server, name, v, len);
    free(v);
    got.kind = PROGCACHE_KIND_PTX; /* replaced by the get */
    check_get_meta(s, "old", "old bytes", &got);
    CHECK(got.kind == PROGCACHE_KIND_UNKNOWN && got.seal == PROGCACHE_SEAL_NONE);
    CHECK(got.records.size == 0);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&buf, s, "old", 3));
    CHECK(buf.size == 9 && memcmp(buf.data, "old bytes", 9) == 0);
    CHECK(test_redis_counters(s).hits == 2 && test_redis_counters(s).rejected == 0);
    /* Untagged: a reader with a secret refuses it, as before. */
    check_miss(sec, "old");
    CHECK(test_redis_counters(sec).rejected == 2);

    /* Tagged with the secret: read by both, seal NONE all the same. */
    v = craft_v1(&len, "old-tagged", "tagged bytes", 1);
    test_redis_name(name, sizeof name, "v1:", "old-tagged", 10);
    test_redis_set(&server, name, v, len);
    free(v);
    check_get_meta(sec, "old-tagged", "tagged bytes", &got);
    CHECK(got.seal == PROGCACHE_SEAL_NONE && got.records.size == 0);
    check_get_meta(s, "old-tagged", "tagged bytes", &got);

    /* count and total_size read bytes 0..15, the same in both formats;
     * total_size counts payloads, not records. */
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    fill_meta(&meta, PROGCACHE_KIND_CUBIN);
    CHECK_OK(progcache_store_put_meta(s, "new", 3, "12345", 5, &meta));
    uint64_t n = 0, total = 0;
    CHECK_OK(progcache_store_count(&n, s));
    CHECK_OK(progcache_store_total_size(&total, s));
    CHECK(n == 3 && total == 9 + 12 + 5);
    progcache_entry_meta_release(&meta);
    progcache_entry_meta_release(&got);
    progcache_buf_free(&buf);
    progcache_store_free(s);
    progcache_store_free(sec);
}

/* A value of an envelope format above 2: a miss, counted as newer (part
 * of misses, not rejected), logged, the caller's error untouched. */
static void test_newer_format(void)
{
    log_capture log = LOG_CAPTURE_INIT;
    progcache_store *s = open_store("newer:", PROGCACHE_REDIS_SYNC_PUT, NULL, &log, 0);
    CHECK_OK(progcache_store_put(s, "k", 1, "bytes", 5));
    char name[300];
    size_t len;
    test_redis_name(name, sizeof name, "newer:", "k", 1);
    char *v = test_redis_get(&server, name, &len);
    CHECK(v != NULL);
    v[4] = 3;
    test_redis_set(&server, name, v, len);

    progcache__error(PROGCACHE_EIO, "marker");
    check_miss(s, "k"); /* get_meta and get */
    CHECK(strcmp(progcache_error_last(), "marker") == 0);
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.newer == 2 && c.misses == 2 && c.rejected == 0 && c.hits == 0 && c.errors == 0);
    test_expect_logged(&log, 2, "written by a newer progcache (envelope format version 3");
    progcache_store_counters sc = PROGCACHE_STORE_COUNTERS_INIT;
    CHECK_OK(progcache_store_counters_get(&sc, s));
    CHECK(sc.misses == 2 && sc.rejected == 0);

    /* Whatever follows the version byte. */
    test_redis_set(&server, name, "pcEV\xff", 5);
    check_miss(s, "k");
    CHECK(test_redis_counters(s).newer == 4 && test_redis_counters(s).rejected == 0);
    free(v);
    progcache_store_free(s);
}

/* Two caches, two home directories, one Redis: what one puts with records
 * the other reads through its remote tier, and the copy lands in its home
 * directory (and memory tier) with the records. */
static void test_two_caches(void)
{
    char *dir_a = test_mkdtemp("redis-meta-a"), *dir_b = test_mkdtemp("redis-meta-b");
    progcache_store *file_a = NULL, *file_b = NULL, *mem = NULL;
    CHECK_OK(progcache_store_file_new(&file_a, dir_a, NULL));
    CHECK_OK(progcache_store_file_new(&file_b, dir_b, NULL));
    CHECK_OK(progcache_store_memory_new(&mem, NULL));
    progcache_store *tiers_a[] = {file_a, open_store("two:", 0, SECRET, NULL, 0)};
    progcache_store *redis_b = open_store("two:", 0, SECRET, NULL, 0);
    progcache_store *tiers_b[] = {mem, file_b, redis_b};
    progcache *a = NULL, *b = NULL;
    CHECK_OK(progcache_open_tiers(&a, tiers_a, 2, NULL));
    CHECK_OK(progcache_open_tiers(&b, tiers_b, 3, NULL));

    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT, got = PROGCACHE_ENTRY_META_INIT;
    fill_meta(&meta, PROGCACHE_KIND_UNKNOWN);
    const char key[] = "shared kernel key";
    CHECK_OK(progcache__cache_put_meta(a, key, sizeof key, "compiled once", 13, &meta));
    progcache_close(a); /* writes the queued remote put */

    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__cache_get_meta(&buf, &got, b, key, sizeof key));
    CHECK(buf.size == 13 && memcmp(buf.data, "compiled once", 13) == 0);
    CHECK(got.seal == PROGCACHE_SEAL_MATCHED);
    check_records(&got, &meta);
    CHECK(test_redis_counters(redis_b).hits == 1);
    /* Now from an upper tier, without asking Redis. (Whether the memory
     * tier keeps records is memory.c's business, not asserted here.) */
    CHECK_OK(progcache__cache_get_meta(&buf, &got, b, key, sizeof key));
    CHECK(buf.size == 13 && memcmp(buf.data, "compiled once", 13) == 0);
    CHECK(test_redis_counters(redis_b).hits == 1);
    progcache_close(b);

    const char *dirs[] = {dir_b, dir_a};
    for (int i = 0; i < 2; i++) {
        progcache_store *home = NULL;
        CHECK_OK(progcache_store_file_new(&home, dirs[i], NULL));
        CHECK_OK(progcache_store_get_meta(&buf, &got, home, key, sizeof key));
        CHECK(buf.size == 13 && got.seal >= PROGCACHE_SEAL_MATCHED);
        check_records(&got, &meta);
        progcache_store_free(home);
        test_rmtree(dirs[i]);
    }
    progcache_entry_meta_release(&meta);
    progcache_entry_meta_release(&got);
    progcache_buf_free(&buf);
    free(dir_a);
    free(dir_b);
}

int main(void)
{
    test_redis_require();
    test_redis_start(&server, NULL);
    test_round_trip();
    test_records_bound();
    test_copied_value();
    test_format_1();
    test_newer_format();
    test_two_caches();
    test_redis_stop(&server);
    printf("test_redis_meta: ok\n");
    return 0;
}
