/* The Redis store when the server misbehaves: nothing listening, a server
 * that accepts no connection (connect timeout), one killed mid-run and
 * restarted, one stopped with SIGSTOP (command timeout). Every call must
 * end as a miss or a dropped write, the counters must say what happened,
 * and back-off must stop the store from paying a timeout per call. The
 * wall-clock bounds are deliberately loose (seconds against 100 ms
 * timeouts); the counters carry the precise assertions. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "redis_fixture.h"

static progcache_store *open_store(const char *url, unsigned int flags,
                                   unsigned int timeout_ms, unsigned int backoff_ms)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = url;
    opts.flags = flags;
    opts.connect_timeout_ms = timeout_ms;
    opts.command_timeout_ms = timeout_ms;
    opts.backoff_ms = backoff_ms;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &opts));
    return s;
}

static int get_rc(progcache_store *s, const char *key)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int rc = progcache_store_get(&buf, s, key, strlen(key));
    progcache_buf_free(&buf);
    return rc;
}

/* The slowest of n gets of "k", each of which must miss. */
static double worst_misses_ms(progcache_store *s, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double t0 = test_now_ms();
        CHECK_RC(PROGCACHE_ENOTFOUND, get_rc(s, "k"));
        double t = test_now_ms() - t0;
        worst = t > worst ? t : worst;
    }
    return worst;
}

/* Nothing listening: refused at once, three errors, then back-off. */
static void test_down_at_start(void)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", test_free_port());
    progcache_store *s = open_store(url, PROGCACHE_REDIS_SYNC_PUT, 100, 0);
    double t0 = test_now_ms();
    for (int i = 0; i < 200; i++)
        CHECK_RC(PROGCACHE_ENOTFOUND, get_rc(s, "k"));
    for (int i = 0; i < 50; i++)
        CHECK_OK(progcache_store_put(s, "k", 1, "v", 1));
    double elapsed = test_now_ms() - t0;
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.errors == 3 && c.backoffs == 1 && c.timeouts == 0);
    CHECK(c.skipped_backoff == 247);
    CHECK(c.hits == 0 && c.misses == 0 && c.stores == 0);
    CHECK(elapsed < 5000);

    progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
    CHECK_RC(PROGCACHE_EREMOTE, progcache_store_lease_acquire(&lease, s, "k", 1, 1000));
    CHECK_RC(PROGCACHE_EREMOTE, progcache_store_lease_wait(s, "k", 1, 1000));
    uint64_t n;
    CHECK_RC(PROGCACHE_EREMOTE, progcache_store_count(&n, s));
    CHECK(strstr(progcache_error_last(), "backing off") != NULL);
    progcache_store_free(s);

    /* Below a file tier, a dead remote changes nothing for the cache. */
    char *dir = test_mkdtemp("redis-down");
    progcache_store *file = NULL;
    CHECK_OK(progcache_store_file_new(&file, dir, NULL));
    progcache_store *remote = open_store(url, 0, 100, 0); /* async puts */
    progcache_store *tiers[] = {file, remote};
    progcache *cache = NULL;
    CHECK_OK(progcache_open_tiers(&cache, tiers, 2, NULL));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, "key", 3));
    CHECK_OK(progcache_put(cache, "key", 3, "value", 5));
    CHECK_OK(progcache_get(&buf, cache, "key", 3));
    CHECK(buf.size == 5 && memcmp(buf.data, "value", 5) == 0);
    CHECK_OK(progcache_store_flush(remote));
    c = test_redis_counters(remote);
    CHECK(c.misses == 0 && c.stores == 0 && c.errors + c.skipped_backoff >= 2);
    progcache_buf_free(&buf);
    progcache_close(cache);
    test_rmtree(dir);
    free(dir);
}

/* A listener whose accept queue is full: SYNs are dropped, so connecting
 * hangs until the connect timeout. */
static void test_connect_timeout(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(lfd, 0) == 0);
    CHECK(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
    int fillers[4];
    for (int i = 0; i < 4; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fillers[i], (struct sockaddr *)&a, sizeof a);
    }
    test_sleep_ms(100);

    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", ntohs(a.sin_port));
    progcache_store *s = open_store(url, PROGCACHE_REDIS_SYNC_PUT, 100, 60000);
    double worst = worst_misses_ms(s, 10);
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.errors == 3 && c.timeouts == 3 && c.backoffs == 1 && c.skipped_backoff == 7);
    CHECK(worst < 2000);
    progcache_store_free(s);
    for (int i = 0; i < 4; i++)
        close(fillers[i]);
    close(lfd);
}

/* Fill s's pool with several idle connections: threads get at the same
 * time until the server counts at least `want` clients. */
typedef struct racer {
    progcache_store *store;
    pthread_barrier_t *go;
} racer;

static void *race_get(void *arg)
{
    racer *r = arg;
    for (int i = 0; i < 20; i++) {
        pthread_barrier_wait(r->go);
        (void)get_rc(r->store, "k");
    }
    return NULL;
}

static long long connected_clients(const test_redis *server)
{
    return test_redis_info(server, "clients", "connected_clients");
}

static void fill_pool(progcache_store *s, const test_redis *server, long long want)
{
    pthread_barrier_t go;
    pthread_t t[4];
    racer r = {s, &go};
    CHECK(pthread_barrier_init(&go, NULL, 4) == 0);
    for (int round = 0; round < 50 && connected_clients(server) < want + 1; round++) {
        for (int i = 0; i < 4; i++)
            CHECK(pthread_create(&t[i], NULL, race_get, &r) == 0);
        for (int i = 0; i < 4; i++)
            CHECK(pthread_join(t[i], NULL) == 0);
    }
    pthread_barrier_destroy(&go);
    CHECK(connected_clients(server) >= want + 1); /* + the raw client asking */
}

static void test_killed_and_restarted(void)
{
    test_redis server;
    test_redis_start(&server, NULL);
    progcache_store *s = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, 1000, 300);
    CHECK_OK(progcache_store_put(s, "k", 1, "v1", 2));
    CHECK_RC(PROGCACHE_OK, get_rc(s, "k"));

    /* A restart while connections sit idle in the pool costs no miss: the
     * first dead one found drops the others, and the call is retried once
     * on a fresh connection. */
    fill_pool(s, &server, 3);
    test_redis_restart(&server);
    CHECK_OK(progcache_store_put(s, "k", 1, "v2", 2));
    CHECK_RC(PROGCACHE_OK, get_rc(s, "k"));
    CHECK(test_redis_counters(s).errors == 0);

    test_redis_kill(&server);
    for (int i = 0; i < 20; i++) {
        CHECK_RC(PROGCACHE_ENOTFOUND, get_rc(s, "k"));
        CHECK_OK(progcache_store_put(s, "k", 1, "lost", 4));
    }
    progcache_redis_counters c = test_redis_counters(s);
    CHECK(c.errors >= 3 && c.backoffs >= 1 && c.skipped_backoff >= 1);
    CHECK(c.store_errors >= 1 && c.timeouts == 0);

    /* Back up (empty: no persistence): after the back-off period the store
     * works again. */
    test_redis_restart(&server);
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        CHECK_OK(progcache_store_put(s, "k", 1, "v3", 2));
        ok = get_rc(s, "k") == PROGCACHE_OK;
        if (!ok)
            test_sleep_ms(50);
    }
    CHECK(ok);
    progcache_redis_counters back = test_redis_counters(s);
    CHECK(back.hits == c.hits + 1 && back.stores > c.stores);
    c = back;

    /* That success ended the run of failures: one more failure is just a
     * miss, not a new back-off. */
    test_redis_kill(&server);
    CHECK_RC(PROGCACHE_ENOTFOUND, get_rc(s, "k"));
    progcache_redis_counters d = test_redis_counters(s);
    CHECK(d.errors == c.errors + 1 && d.backoffs == c.backoffs);
    progcache_store_free(s);
    test_redis_stop(&server);
}

/* Until one put and get succeed in a row: a loaded machine may time out a
 * first call at 100 ms, and a success resets the run of failures. */
static void warm_up(progcache_store *s)
{
    for (int i = 0; i < 50; i++) {
        CHECK_OK(progcache_store_put(s, "k", 1, "v", 1));
        CHECK_OK(progcache_store_flush(s));
        if (get_rc(s, "k") == PROGCACHE_OK)
            return;
        test_sleep_ms(20);
    }
    CHECK(!"the store reached the server");
}

static void test_stopped_server(void)
{
    test_redis server;
    test_redis_start(&server, NULL);
    progcache_store *s = open_store(server.url, PROGCACHE_REDIS_SYNC_PUT, 100, 60000);
    progcache_store *async = open_store(server.url, 0, 100, 60000);
    warm_up(s); /* leaves a pooled connection */
    warm_up(async);
    progcache_redis_counters base = test_redis_counters(s), abase = test_redis_counters(async);

    test_redis_pause(&server);
    double worst = worst_misses_ms(s, 10);
    progcache_redis_counters c = test_redis_counters(s);
    /* The pooled connection, then two new ones (the kernel completes the
     * TCP handshake for a stopped process), each ran out of time. */
    CHECK(c.timeouts - base.timeouts == 3 && c.errors - base.errors == 3);
    CHECK(c.backoffs - base.backoffs == 1 && c.skipped_backoff - base.skipped_backoff == 7);
    CHECK(worst < 2000);

    /* Background puts: the caller never waits; the writer times out three
     * times, then drops the rest without trying. */
    double t0 = test_now_ms();
    for (int i = 0; i < 5; i++)
        CHECK_OK(progcache_store_put(async, "b", 1, "v", 1));
    double put_ms = test_now_ms() - t0;
    CHECK_OK(progcache_store_flush(async));
    c = test_redis_counters(async);
    CHECK(c.stores == abase.stores && c.store_errors - abase.store_errors == 3);
    CHECK(c.timeouts - abase.timeouts == 3 && c.skipped_backoff - abase.skipped_backoff == 2);
    CHECK(put_ms < 1000);
    CHECK_RC(PROGCACHE_EREMOTE, progcache_store_lease_wait(s, "k", 1, 10000));

    test_redis_resume(&server);
    progcache_store_free(async);
    progcache_store_free(s);
    test_redis_stop(&server);
}

int main(void)
{
    test_redis_require();
    test_down_at_start();
    test_connect_timeout();
    test_killed_and_restarted();
    test_stopped_server();
    printf("test_store_redis_faults: ok\n");
    return 0;
}
