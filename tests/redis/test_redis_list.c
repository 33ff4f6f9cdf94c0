/* The Redis store's exists and foreach (src/store/redis/redis_list.c)
 * against a real redis-server, among what else lives under the prefix: a
 * lease, another program's key, a damaged value, a key of another type.
 * Names are the hex SHA-256 of the key; sizes come from the header alone
 * without READ; with READ the bytes are exact or the entry carries an
 * error; records with RECORDS; with a shared secret, READ says it cannot
 * authenticate; a callback's non-zero return stops the walk. */
#include <openssl/sha.h>

#include "check.h"
#include "progcache/sys/store.h"
#include "redis_fixture.h"

static const char SECRET[] = "a shared secret of 32 bytes....";
static test_redis server;

static progcache_store *open_store(const char *secret)
{
    progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
    o.url = server.url;
    o.flags = PROGCACHE_REDIS_SYNC_PUT;
    o.key_prefix = "ls:";
    o.connect_timeout_ms = o.command_timeout_ms = 5000;
    if (secret) {
        o.secret = secret;
        o.secret_len = strlen(secret);
    }
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &o));
    return s;
}

static void hex_of(char out[65], const char *key)
{
    unsigned char h[32];
    SHA256((const unsigned char *)key, strlen(key), h);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

typedef struct listing {
    int n, with_data, with_error, with_meta, stop_after;
    char names[8][65];
    uint64_t sizes[8];
    char errors[8][512];
    size_t records[8];
    int good_bytes; /* entries whose bytes are the pattern put */
} listing;

static int on_entry(void *ctx, const progcache_entry *e)
{
    listing *l = ctx;
    CHECK(l->n < 8);
    memcpy(l->names[l->n], e->name, 65);
    l->sizes[l->n] = e->size;
    snprintf(l->errors[l->n], sizeof l->errors[0], "%s", e->error ? e->error : "");
    l->records[l->n] = e->meta ? e->meta->records.size : 0;
    l->with_data += e->data != NULL;
    l->with_error += e->error != NULL;
    l->with_meta += e->meta != NULL;
    if (e->data && e->size >= 4 && memcmp(e->data, "PTX!", 4) == 0)
        l->good_bytes++;
    l->n++;
    return l->stop_after && l->n == l->stop_after ? 42 : 0;
}

static int index_of(const listing *l, const char *key)
{
    char hex[65];
    hex_of(hex, key);
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], hex))
            return i;
    return -1;
}

static listing list(progcache_store *s, unsigned int flags, int expect_rc)
{
    listing l;
    memset(&l, 0, sizeof l);
    CHECK_RC(expect_rc, progcache_store_foreach(s, flags, on_entry, &l));
    return l;
}

int main(void)
{
    test_redis_require();
    test_redis_start(&server, NULL);
    progcache_store *s = open_store(NULL);
    char v[3000];
    memset(v, 'x', sizeof v);
    memcpy(v, "PTX!", 4);
    CHECK_OK(progcache_store_put(s, "one", 3, v, 100));
    CHECK_OK(progcache_store_put(s, "two", 3, v, 3000));
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    meta.kind = PROGCACHE_KIND_PTX;
    CHECK_OK(progcache_buf_set(&meta.records, "records!", 8));
    CHECK_OK(progcache_store_put_meta(s, "three", 5, v, 200, &meta));
    CHECK_OK(progcache_store_put(s, "damaged", 7, v, 500));
    char name[300];
    test_redis_name(name, sizeof name, "ls:", "damaged", 7);
    size_t len;
    char *damaged = test_redis_get(&server, name, &len);
    CHECK(damaged && len == 56 + 500);
    damaged[56 + 7] ^= 1;
    test_redis_set(&server, name, damaged, len);
    free(damaged);
    /* What else lives under the prefix: never listed as entries, or (a key
     * of another type at an entry's name) listed with its error. */
    char lease[400], other[400];
    test_redis_name(other, sizeof other, "ls:", "wrongtype", 9);
    const char *push[] = {"RPUSH", other, "x"};
    test_redis_int(&server, 3, push);
    test_redis_name(name, sizeof name, "ls:", "leased", 6);
    snprintf(lease, sizeof lease, "ls:lease:%s", name + 3);
    test_redis_set(&server, lease, "token", 5);
    test_redis_set(&server, "ls:someone-elses-key", "v", 1);

    /* exists: no download; a key of another type is no entry. */
    CHECK_OK(progcache_store_exists(s, "one", 3));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_exists(s, "absent", 6));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_exists(s, "wrongtype", 9));

    /* Names and sizes from the headers. */
    listing l = list(s, 0, PROGCACHE_OK);
    CHECK(l.n == 5 && l.with_data == 0 && l.with_meta == 0);
    CHECK(l.sizes[index_of(&l, "one")] == 100 && l.sizes[index_of(&l, "two")] == 3000);
    CHECK(l.sizes[index_of(&l, "three")] == 200 && l.sizes[index_of(&l, "damaged")] == 500);
    int wt = index_of(&l, "wrongtype");
    CHECK(wt >= 0 && strstr(l.errors[wt], "WRONGTYPE") && l.with_error == 1);

    /* With the bytes: exact, or the error saying why. */
    l = list(s, PROGCACHE_ENTRIES_READ, PROGCACHE_OK);
    CHECK(l.n == 5 && l.with_data == 3 && l.good_bytes == 3 && l.with_error == 2);
    int d = index_of(&l, "damaged");
    fprintf(stderr, "  damaged: %s\n", l.errors[d]);
    CHECK(strstr(l.errors[d], "SHA-256 does not match"));

    /* With the records. */
    l = list(s, PROGCACHE_ENTRIES_RECORDS, PROGCACHE_OK);
    CHECK(l.records[index_of(&l, "three")] == 8 && l.with_meta == 3);

    /* A callback that stops the walk: its value is returned. */
    listing stop;
    memset(&stop, 0, sizeof stop);
    stop.stop_after = 2;
    CHECK_RC(42, progcache_store_foreach(s, 0, on_entry, &stop));
    CHECK(stop.n == 2);

    /* With a secret: sizes, but no bytes handed over unauthenticated. */
    progcache_store *sealed = open_store(SECRET);
    l = list(sealed, 0, PROGCACHE_OK);
    CHECK(l.n == 5 && l.sizes[index_of(&l, "two")] == 3000);
    l = list(sealed, PROGCACHE_ENTRIES_READ, PROGCACHE_OK);
    CHECK(l.with_data == 0 && l.with_error == 5);
    CHECK(strstr(l.errors[index_of(&l, "one")], "a shared secret is configured"));
    progcache_store_free(sealed);

    /* A server that is gone: the listing fails, saying so. */
    progcache_entry_meta_release(&meta);
    test_redis_stop(&server);
    CHECK_RC(PROGCACHE_EREMOTE, progcache_store_foreach(s, 0, on_entry, &l));
    CHECK(strstr(progcache_error_last(), "progcache_store_foreach: Redis"));
    progcache_store_free(s);
    return 0;
}
