/* Faults of the remote tier that must lose nothing and serve nothing
 * wrong (issue 15, item 3), each against this test's own redis-server and
 * through a cache (progcache_compile_or_load with NVRTC, or progcache_get
 * and progcache_put for large values). Every outcome is a miss and a local
 * compile, or a hit with the right bytes, and the counters of
 * `progcache stats` say what happened:
 *  - the server restarted mid-run (empty again);
 *  - the server flushed (FLUSHALL);
 *  - the server evicting under maxmemory with allkeys-lru;
 *  - the connection dropped in the middle of a large value (a proxy that
 *    cuts it);
 *  - a value larger than max_artifact_size: refused on put, on get;
 *  - a value written by a newer progcache: ignored, counted;
 *  - an HMAC tag that does not verify (another secret): rejected, counted.
 * No wait here is longer than the configured timeouts: the longest call
 * is bounded by the 2 s command timeout. */
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "redis_fixture.h"
#include "remote_node.h"

static test_redis server;
static char *scratch;

static progcache_redis_options remote_at(const char *url)
{
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = url;
    ro.command_timeout_ms = 2000;
    ro.connect_timeout_ms = 2000;
    /* A short back-off: a node whose calls failed is usable again soon. */
    ro.backoff_ms = 200;
    return ro;
}

/* Compile k on node `node` (a cache directory of its own); the result's
 * status, after checking the bytes. */
static int compile_on(progcache *c, const test_kernel *k)
{
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, c, &k->program));
    progcache_buf ref = PROGCACHE_BUF_INIT;
    test_kernel_reference(&ref, k);
    CHECK(r.artifact.size == ref.size && !memcmp(r.artifact.data, ref.data, ref.size));
    progcache_buf_free(&ref);
    int status = r.status;
    progcache_program_result_release(&r);
    return status;
}

static progcache *node(const char *name, const progcache_redis_options *ro, test_log *log)
{
    return test_node_open(scratch, name, ro, log);
}

static void cmd(const char *a, const char *b, const char *c)
{
    const char *argv[] = {a, b, c};
    test_reply *r = test_redis_cmd(&server, b ? (c ? 3 : 2) : 1, argv, NULL);
    CHECK(r != NULL && r->type != '-');
    test_reply_free(r);
}

static void test_restart_mid_run(void)
{
    progcache_redis_options ro = remote_at(server.url);
    test_log log;
    test_log_init(&log);
    progcache *a = node("restart-a", &ro, NULL), *b = node("restart-b", &ro, &log);
    test_kernel k1, k2;
    test_kernel_init(&k1, "restart_one");
    test_kernel_init(&k2, "restart_two");
    CHECK(compile_on(a, &k1) == PROGCACHE_STATUS_MISS);
    CHECK_OK(progcache_flush(a));
    /* Down: B compiles on its own, says so once, counts it. */
    test_redis_kill(&server);
    CHECK(compile_on(b, &k2) == PROGCACHE_STATUS_MISS);
    progcache_stats st = test_node_stats(b);
    CHECK(st.remote_errors >= 1 && st.remote_hits == 0);
    char where[300];
    snprintf(where, sizeof where, "Redis redis://127.0.0.1:%d/0: cannot connect", server.port);
    if (test_log_count(&log, PROGCACHE_LOG_WARN, where) != 1)
        test_log_dump(&log);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, where) == 1);
    /* Back, empty: B's open handle misses k1 there, compiles it, shares it. */
    test_redis_restart(&server);
    test_sleep_ms(250); /* past B's back-off, if it backed off */
    CHECK(compile_on(b, &k1) == PROGCACHE_STATUS_MISS);
    CHECK_OK(progcache_flush(b));
    progcache *c = node("restart-c", &ro, NULL);
    CHECK(compile_on(c, &k1) == PROGCACHE_STATUS_HIT);
    CHECK(test_node_stats(c).remote_hits == 1);
    progcache_close(a);
    progcache_close(b);
    progcache_close(c);
    test_log_free(&log);
}

static void test_flushall(void)
{
    progcache_redis_options ro = remote_at(server.url);
    progcache *a = node("flush-a", &ro, NULL), *b = node("flush-b", &ro, NULL);
    test_kernel k;
    test_kernel_init(&k, "flushed");
    CHECK(compile_on(a, &k) == PROGCACHE_STATUS_MISS);
    CHECK_OK(progcache_flush(a));
    cmd("FLUSHALL", NULL, NULL);
    CHECK(compile_on(b, &k) == PROGCACHE_STATUS_MISS); /* gone: compiled again */
    CHECK_OK(progcache_flush(b));
    progcache_stats st = test_node_stats(b);
    CHECK(st.remote_misses >= 1 && st.remote_hits == 0);
    CHECK(st.remote_rejected == 0 && st.remote_errors == 0);
    progcache *c = node("flush-c", &ro, NULL);
    CHECK(compile_on(c, &k) == PROGCACHE_STATUS_HIT);
    progcache_close(a);
    progcache_close(b);
    progcache_close(c);
}

/* A value of `size` bytes that belongs to key i only. */
static unsigned char *value_for(int i, size_t size)
{
    unsigned char *v = malloc(size);
    CHECK(v != NULL);
    for (size_t j = 0; j < size; j++)
        v[j] = (unsigned char)(j * 31 + (size_t)i * 7 + j / 4096);
    return v;
}

static void test_eviction(void)
{
    const char *policy[] = {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"};
    test_reply_free(test_redis_cmd(&server, 4, policy, NULL));
    const char *cap[] = {"CONFIG", "SET", "maxmemory", "4mb"};
    test_reply_free(test_redis_cmd(&server, 4, cap, NULL));
    progcache_redis_options ro = remote_at(server.url);
    progcache *a = node("evict-a", &ro, NULL), *b = node("evict-b", &ro, NULL);
    enum { N = 32, SIZE = 512 * 1024 };
    for (int i = 0; i < N; i++) {
        unsigned char key[8] = {'e', 'v', 'i', 'c', 't', 0, 0, (unsigned char)i};
        unsigned char *v = value_for(i, SIZE);
        CHECK_OK(progcache_put(a, key, sizeof key, v, SIZE));
        CHECK_OK(progcache_flush(a)); /* one at a time: the server evicts as it goes */
        free(v);
    }
    int hits = 0, misses = 0;
    for (int i = 0; i < N; i++) {
        unsigned char key[8] = {'e', 'v', 'i', 'c', 't', 0, 0, (unsigned char)i};
        progcache_buf out = PROGCACHE_BUF_INIT;
        int rc = progcache_get(&out, b, key, sizeof key);
        if (rc == PROGCACHE_OK) {
            unsigned char *v = value_for(i, SIZE);
            CHECK(out.size == SIZE && !memcmp(out.data, v, SIZE));
            free(v);
            hits++;
        } else {
            CHECK_RC(PROGCACHE_ENOTFOUND, rc);
            misses++;
        }
        progcache_buf_free(&out);
    }
    /* 16 MiB written under a 4 MiB cap: some evicted, the rest intact. */
    CHECK(hits >= 1 && misses >= 1);
    progcache_stats st = test_node_stats(b);
    CHECK(st.remote_hits == (uint64_t)hits && st.remote_misses == (uint64_t)misses);
    CHECK(st.remote_rejected == 0 && st.remote_errors == 0);
    CHECK(test_node_stats(a).remote_store_errors == 0);
    progcache_close(a);
    progcache_close(b);
    const char *uncap[] = {"CONFIG", "SET", "maxmemory", "0"};
    test_reply_free(test_redis_cmd(&server, 4, uncap, NULL));
    cmd("FLUSHALL", NULL, NULL);
}

/* ---- a proxy that cuts connections in the middle of a reply ------------ */

typedef struct proxy {
    int listen_fd, port;
    atomic_int cut_after; /* bytes of replies per connection; 0: never cut */
    atomic_int cuts;
    atomic_int stop;
    pthread_t thread;
} proxy;

static int connect_server(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* One client at a time, as the store's calls here come one by one. */
static void *proxy_main(void *arg)
{
    proxy *p = arg;
    while (!atomic_load(&p->stop)) {
        struct pollfd l = {.fd = p->listen_fd, .events = POLLIN};
        if (poll(&l, 1, 50) <= 0)
            continue;
        int client = accept(p->listen_fd, NULL, NULL);
        if (client < 0)
            continue;
        int up = connect_server();
        long long sent = 0;
        int limit = atomic_load(&p->cut_after);
        char buf[16384];
        for (;;) {
            struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = up, .events = POLLIN}};
            if (poll(fds, 2, 50) < 0 || atomic_load(&p->stop))
                break;
            if (fds[0].revents) {
                ssize_t n = read(client, buf, sizeof buf);
                if (n <= 0 || write(up, buf, (size_t)n) != n)
                    break;
            }
            if (fds[1].revents) {
                ssize_t n = read(up, buf, sizeof buf);
                if (n <= 0)
                    break;
                if (limit && sent + n > limit) {
                    /* Half the reply, then the connection is gone. */
                    n = limit - sent > 0 ? (ssize_t)(limit - sent) : 0;
                    if (n)
                        (void)!write(client, buf, (size_t)n);
                    atomic_fetch_add(&p->cuts, 1);
                    break;
                }
                if (write(client, buf, (size_t)n) != n)
                    break;
                sent += n;
            }
        }
        close(up);
        close(client);
    }
    return NULL;
}

static void proxy_start(proxy *p)
{
    memset(p, 0, sizeof *p);
    p->port = test_free_port();
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(p->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(p->listen_fd, 16) == 0);
    CHECK(pthread_create(&p->thread, NULL, proxy_main, p) == 0);
}

static void proxy_stop(proxy *p)
{
    atomic_store(&p->stop, 1);
    CHECK(pthread_join(p->thread, NULL) == 0);
    close(p->listen_fd);
}

static void test_dropped_mid_value(void)
{
    proxy px;
    proxy_start(&px);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", px.port);
    progcache_redis_options direct = remote_at(server.url), cut = remote_at(url);
    progcache *a = node("drop-a", &direct, NULL);
    enum { SIZE = 8 * 1024 * 1024 };
    unsigned char key[] = "a large value";
    unsigned char *v = value_for(99, SIZE);
    CHECK_OK(progcache_put(a, key, sizeof key, v, SIZE));
    CHECK_OK(progcache_flush(a));
    progcache_close(a);

    /* Every connection through the proxy is cut 256 KiB into a reply. */
    atomic_store(&px.cut_after, 256 * 1024);
    test_log log;
    test_log_init(&log);
    progcache *b = node("drop-b", &cut, &log);
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&out, b, key, sizeof key));
    CHECK(atomic_load(&px.cuts) >= 1);
    progcache_stats st = test_node_stats(b);
    CHECK(st.remote_errors >= 1 && st.remote_hits == 0 && st.remote_rejected == 0);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, url) >= 1);
    /* Whole replies again: the next get is a hit with every byte. */
    atomic_store(&px.cut_after, 0);
    test_sleep_ms(250); /* past the back-off, if the cuts caused one */
    CHECK_OK(progcache_get(&out, b, key, sizeof key));
    CHECK(out.size == SIZE && !memcmp(out.data, v, SIZE));
    CHECK(test_node_stats(b).remote_hits == 1);
    progcache_buf_free(&out);
    progcache_close(b);
    test_log_free(&log);
    free(v);
    proxy_stop(&px);
}

static void test_too_large(void)
{
    progcache_redis_options big = remote_at(server.url), small = remote_at(server.url);
    small.max_artifact_size = 1024 * 1024;
    progcache *a = node("large-a", &big, NULL);
    test_log log;
    test_log_init(&log);
    progcache *b = node("large-b", &small, &log);
    enum { SIZE = 2 * 1024 * 1024 };
    unsigned char key[] = "two MiB";
    unsigned char *v = value_for(2, SIZE);
    CHECK_OK(progcache_put(a, key, sizeof key, v, SIZE));
    CHECK_OK(progcache_flush(a));
    /* On get: refused unread, a miss, counted. */
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&out, b, key, sizeof key));
    progcache_stats st = test_node_stats(b);
    CHECK(st.remote_too_large == 1 && st.remote_rejected == 1 && st.remote_hits == 0);
    /* On put: stored in B's directory, refused for the server, counted. */
    unsigned char key2[] = "two MiB, from B";
    CHECK_OK(progcache_put(b, key2, sizeof key2, v, SIZE));
    CHECK_OK(progcache_flush(b));
    st = test_node_stats(b);
    CHECK(st.remote_too_large == 2 && st.remote_store_errors == 1 && st.remote_stores == 0);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, "max_artifact_size") >= 1);
    CHECK_OK(progcache_get(&out, b, key2, sizeof key2)); /* the local tier has it */
    CHECK(out.size == SIZE && !memcmp(out.data, v, SIZE));
    progcache *c = node("large-c", &big, NULL);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&out, c, key2, sizeof key2));
    progcache_buf_free(&out);
    free(v);
    progcache_close(a);
    progcache_close(b);
    progcache_close(c);
    test_log_free(&log);
}

static void test_newer_value(void)
{
    progcache_redis_options ro = remote_at(server.url);
    progcache *a = node("newer-a", &ro, NULL);
    test_kernel k;
    test_kernel_init(&k, "newer");
    CHECK(compile_on(a, &k) == PROGCACHE_STATUS_MISS);
    CHECK_OK(progcache_flush(a));
    progcache_close(a);
    /* The same entry as a newer progcache would write it: format 3. */
    unsigned char key[PROGCACHE_KEY_SIZE];
    test_kernel_key(key, &k);
    char name[300];
    test_redis_name(name, sizeof name, "progcache:", key, sizeof key);
    size_t len;
    char *value = test_redis_get(&server, name, &len);
    CHECK(value != NULL && len > 8);
    value[4] = 3;
    test_redis_set(&server, name, value, len);
    free(value);
    test_log log;
    test_log_init(&log);
    progcache *b = node("newer-b", &ro, &log);
    CHECK(compile_on(b, &k) == PROGCACHE_STATUS_MISS);
    progcache_stats st = test_node_stats(b);
    /* Counted at each read (the lookup, then again under the compile lock). */
    CHECK(st.remote_newer >= 1 && st.remote_misses >= st.remote_newer);
    CHECK(st.remote_rejected == 0 && st.remote_hits == 0);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, "newer progcache") == 1);
    progcache_close(b);
    test_log_free(&log);
}

static void test_hmac_mismatch(void)
{
    static const char one[] = "the first secret, 32 bytes long!";
    static const char two[] = "another secret, also 32 bytes...";
    progcache_redis_options ra = remote_at(server.url), rb = remote_at(server.url);
    ra.secret = one;
    ra.secret_len = 32;
    rb.secret = two;
    rb.secret_len = 32;
    progcache *a = node("hmac-a", &ra, NULL);
    test_kernel k;
    test_kernel_init(&k, "hmac");
    CHECK(compile_on(a, &k) == PROGCACHE_STATUS_MISS);
    CHECK_OK(progcache_flush(a));
    test_log log;
    test_log_init(&log);
    progcache *b = node("hmac-b", &rb, &log);
    CHECK(compile_on(b, &k) == PROGCACHE_STATUS_MISS); /* never A's bytes */
    progcache_stats st = test_node_stats(b);
    CHECK(st.remote_bad_tag >= 1 && st.remote_rejected == st.remote_bad_tag);
    CHECK(st.remote_hits == 0);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, "same secret file") == 1);
    /* B's compile replaced A's value with one tagged with B's secret: a
     * node with A's secret rejects that one in turn. */
    CHECK_OK(progcache_flush(b));
    progcache *c = node("hmac-c", &ra, NULL);
    CHECK(compile_on(c, &k) == PROGCACHE_STATUS_MISS);
    CHECK(test_node_stats(c).remote_bad_tag >= 1);
    progcache_close(a);
    progcache_close(b);
    progcache_close(c);
    test_log_free(&log);
}

int main(void)
{
    test_redis_require();
    scratch = test_mkdtemp("remote-faults");
    test_redis_start(&server, NULL);
    test_restart_mid_run();
    test_flushall();
    test_eviction();
    test_dropped_mid_value();
    test_too_large();
    test_newer_value();
    test_hmac_mismatch();
    test_redis_stop(&server);
    test_rmtree(scratch);
    free(scratch);
    printf("test_remote_faults: ok\n");
    return 0;
}
