/* The Redis store's options and URL parsing (src/store/redis/redis_config.c),
 * and the entry points' behaviour with and without hiredis. Needs no
 * server: runs in every build. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "store/redis/redis_config.h"

static progcache__redis_url parse_ok(const char *url)
{
    progcache__redis_url u;
    int rc = progcache__redis_url_parse(&u, url);
    if (rc)
        fprintf(stderr, "%s: %s\n", url, progcache_error_last());
    CHECK_OK(rc);
    return u;
}

static void parse_bad(const char *url, const char *says)
{
    progcache__redis_url u;
    int rc = progcache__redis_url_parse(&u, url);
    if (rc != PROGCACHE_EINVAL)
        fprintf(stderr, "accepted: %s\n", url);
    CHECK_RC(PROGCACHE_EINVAL, rc);
    if (!strstr(progcache_error_last(), says))
        fprintf(stderr, "%s: message \"%s\" lacks \"%s\"\n", url, progcache_error_last(), says);
    CHECK(strstr(progcache_error_last(), says) != NULL);
    CHECK(u.host == NULL && u.password == NULL);
}

static void test_tcp_urls(void)
{
    progcache__redis_url u = parse_ok("redis://cachehost");
    CHECK(strcmp(u.host, "cachehost") == 0 && u.port == 6379 && u.db == 0);
    CHECK(!u.path && !u.user && !u.password);
    progcache__redis_url_release(&u);

    u = parse_ok("redis://10.1.2.3:7000/3");
    CHECK(strcmp(u.host, "10.1.2.3") == 0 && u.port == 7000 && u.db == 3);
    progcache__redis_url_release(&u);

    u = parse_ok("redis://:pw@h/");
    CHECK(!u.user && strcmp(u.password, "pw") == 0 && u.db == 0);
    progcache__redis_url_release(&u);

    u = parse_ok("redis://alice:p%40ss%3Aw@h:1/15");
    CHECK(strcmp(u.user, "alice") == 0 && strcmp(u.password, "p@ss:w") == 0);
    CHECK(u.port == 1 && u.db == 15);
    char shown[300];
    progcache__redis_url_describe(shown, sizeof shown, &u);
    CHECK(strcmp(shown, "redis://alice:***@h:1/15") == 0);
    progcache__redis_url_release(&u);

    /* A raw '@' in the password: the last '@' ends the credentials. */
    u = parse_ok("redis://:a@b@h");
    CHECK(strcmp(u.password, "a@b") == 0 && strcmp(u.host, "h") == 0);
    progcache__redis_url_release(&u);

    u = parse_ok("redis://[::1]:6380/2");
    CHECK(strcmp(u.host, "::1") == 0 && u.port == 6380 && u.db == 2);
    progcache__redis_url_describe(shown, sizeof shown, &u);
    CHECK(strcmp(shown, "redis://[::1]:6380/2") == 0);
    progcache__redis_url_release(&u);
}

static void test_unix_urls(void)
{
    progcache__redis_url u = parse_ok("unix:/run/redis/redis.sock");
    CHECK(strcmp(u.path, "/run/redis/redis.sock") == 0 && !u.host && u.db == 0);
    progcache__redis_url_release(&u);

    u = parse_ok("unix:///tmp/r%20s.sock?db=4&user=bob&password=x%26y");
    CHECK(strcmp(u.path, "/tmp/r s.sock") == 0 && u.db == 4);
    CHECK(strcmp(u.user, "bob") == 0 && strcmp(u.password, "x&y") == 0);
    char shown[300];
    progcache__redis_url_describe(shown, sizeof shown, &u);
    CHECK(strstr(shown, "x&y") == NULL);
    progcache__redis_url_release(&u);
    progcache__redis_url_release(NULL);
}

static void test_bad_urls(void)
{
    parse_bad("", "empty");
    parse_bad("rediss://h:6380", "TLS");
    parse_bad("http://h", "unknown scheme");
    parse_bad("redis://", "host is empty");
    parse_bad("redis://:pw@", "host is empty");
    parse_bad("redis://h:0", "port");
    parse_bad("redis://h:65536", "port");
    parse_bad("redis://h:12x", "port");
    parse_bad("redis://h/x", "database number");
    parse_bad("redis://h/1?db=2", "no query");
    parse_bad("redis://pw@h", "has no ':'");
    parse_bad("redis://::1:6379", "brackets");
    parse_bad("redis://[::1", "closing");
    parse_bad("redis://:p%zz@h", "%-escape");
    parse_bad("redis://:p%00@h", "%-escape");
    parse_bad("unix:relative.sock", "absolute");
    parse_bad("unix:", "absolute");
    parse_bad("unix:/s?db=x", "database number");
    parse_bad("unix:/s?color=red", "unknown query item");
    parse_bad("unix:/s?db", "no '='");

    /* Messages never show a password. */
    progcache__redis_url u;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_url_parse(&u, "redis://u:hunter2@h:99999"));
    CHECK(strstr(progcache_error_last(), "hunter2") == NULL);
    CHECK(strstr(progcache_error_last(), "u:***@h") != NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_url_parse(&u, "unix:rel?password=hunter2"));
    CHECK(strstr(progcache_error_last(), "hunter2") == NULL);

    /* Issue 29: password= twice is an error (the mask hid the first, the
     * parser kept the last), showing neither value. */
    parse_bad("unix:/s?password=first1&password=second2", "password= is given twice");
    CHECK(!strstr(progcache_error_last(), "first1") && !strstr(progcache_error_last(), "second2"));
    parse_bad("unix:/s?db=1&db=2", "db= is given twice");
    /* A name that ends in password=: unknown, its value not shown. */
    parse_bad("unix:/s?xpassword=a&password=hunter2", "unknown query item");
    CHECK(strstr(progcache_error_last(), "hunter2") == NULL);
    parse_bad("unix:/s?password=hunter2&pass=x", "unknown query item");
    CHECK(strstr(progcache_error_last(), "hunter2") == NULL);
    parse_bad("unix:/s?password=hun#ter2&db=x", "database number");
    CHECK(strstr(progcache_error_last(), "ter2") == NULL);
    /* '/', '?' and '#' in a redis:// password: the last '@' ends it. */
    u = parse_ok("redis://user:pa/ss?#@127.0.0.1:7/1");
    CHECK(!strcmp(u.password, "pa/ss?#") && !strcmp(u.host, "127.0.0.1") && u.db == 1);
    progcache__redis_url_release(&u);
    parse_bad("redis://user:pa/ss?#@h:99999", "port");
    CHECK(strstr(progcache_error_last(), "ss?#") == NULL);
    CHECK(strstr(progcache_error_last(), "redis://user:***@h:99999") != NULL);
    char shown[200];
    progcache_url_mask(shown, sizeof shown, "unix:/s?db=1&user=u&password=a&password=b&x=c&y");
    CHECK(!strcmp(shown, "unix:/s?db=1&user=u&password=***&password=***&x=***&***"));
}

static void test_config(void)
{
    progcache__redis_config cfg;
    progcache_redis_options opts;
    progcache_redis_options_init(NULL);
    progcache_redis_options_init(&opts);
    CHECK(opts.version == PROGCACHE_REDIS_OPTIONS_VERSION);

    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts)); /* no url */
    opts.url = "redis://h";
    CHECK_OK(progcache__redis_config_init(&cfg, &opts));
    CHECK(strcmp(cfg.prefix, "progcache:") == 0 && cfg.prefix_len == 10);
    CHECK(cfg.connect_timeout_ms == 100 && cfg.command_timeout_ms == 100);
    CHECK(cfg.failures_before_backoff == 3 && cfg.backoff_ms == 5000);
    CHECK(cfg.max_queue_bytes == (UINT64_C(64) << 20) && cfg.ttl_seconds == 0);
    CHECK(cfg.hmac == NULL);
    CHECK(strcmp(cfg.where, "redis://h:6379/0") == 0);
    progcache__redis_config_release(&cfg);

    opts.key_prefix = "team-a:";
    opts.connect_timeout_ms = 7;
    opts.command_timeout_ms = 9;
    opts.backoff_ms = 11;
    opts.failures_before_backoff = 1;
    opts.secret = "0123456789abcdef";
    opts.secret_len = 16;
    CHECK_OK(progcache__redis_config_init(&cfg, &opts));
    CHECK(strcmp(cfg.prefix, "team-a:") == 0 && cfg.connect_timeout_ms == 7);
    CHECK(cfg.command_timeout_ms == 9 && cfg.backoff_ms == 11);
    CHECK(cfg.failures_before_backoff == 1 && cfg.hmac != NULL);
    progcache__redis_config_release(&cfg);

    opts.secret_len = 15;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
    CHECK(strstr(progcache_error_last(), "secret") != NULL);
    opts.secret_len = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
    opts.secret = NULL;
    opts.secret_len = 16;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
    opts.secret_len = 0;

    char long_prefix[PROGCACHE__REDIS_MAX_PREFIX + 2];
    memset(long_prefix, 'p', sizeof long_prefix - 1);
    long_prefix[sizeof long_prefix - 1] = '\0';
    opts.key_prefix = long_prefix;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
    CHECK(strstr(progcache_error_last(), "key_prefix") != NULL);
    opts.key_prefix = NULL;

    opts.flags = 0x80;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
    opts.flags = 0;
    opts.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
    CHECK(strstr(progcache_error_last(), "PROGCACHE_REDIS_OPTIONS_INIT") != NULL);
    opts.version = PROGCACHE_REDIS_OPTIONS_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache__redis_config_init(&cfg, &opts));
}

/* A socket path longer than sun_path holds is refused with the limit
 * named (hiredis would cut it): a listener at the cut path, the path
 * hiredis would connect to, is never reached (issue 29). */
static void test_long_socket_path(void)
{
    char *dir = test_mkdtemp("sockpath");
    const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
    char cut[512], url[600];
    int n = snprintf(cut, sizeof cut, "%s/", dir);
    CHECK(n > 0 && (size_t)n < max);
    memset(cut + n, 's', max - (size_t)n);
    cut[max] = '\0';
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, cut, max);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 4) == 0);
    snprintf(url, sizeof url, "unix:%s.sock?db=0", cut);

    char says[64];
    snprintf(says, sizeof says, "holds at most %zu", max);
    parse_bad(url, says);
    /* Exactly the limit is a path hiredis keeps whole. */
    char whole[600];
    snprintf(whole, sizeof whole, "unix:%s", cut);
    progcache__redis_url u = parse_ok(whole);
    progcache__redis_url_release(&u);

    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = url;
    progcache_store *s = NULL;
    int rc = progcache_store_redis_new(&s, &opts);
    if (rc == PROGCACHE_OK) { /* the old code: it would connect to the cut path */
        progcache_redis_status st = PROGCACHE_REDIS_STATUS_INIT;
        (void)progcache_redis_status_get(&st, s, 1);
        progcache_store_free(s);
    }
    /* The command says the same and reports nothing reachable. */
    const char *bin = getenv("PROGCACHE_BIN");
    if (bin) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "'%s' remote --url '%s' 2>&1", bin, url);
        FILE *p = popen(cmd, "r");
        CHECK(p != NULL);
        char text[4096];
        size_t got = fread(text, 1, sizeof text - 1, p);
        text[got] = '\0';
        int status = pclose(p);
        CHECK(status != 0 && strstr(text, says) && !strstr(text, "reachable"));
    }
    int peer = accept(ls, NULL, NULL);
    CHECK(peer < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    CHECK(rc != PROGCACHE_OK && s == NULL);
    close(ls);
    test_rmdtemp(dir);
}

/* The public entry points: real with hiredis, a clear refusal without. */
static void test_entry_points(void)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    progcache_store *s = NULL, *mem = NULL;
    opts.url = "redis://127.0.0.1:1"; /* nothing is contacted by new */
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_redis_new(NULL, &opts));
    int rc = progcache_store_redis_new(&s, &opts);
    progcache_redis_counters c = PROGCACHE_REDIS_COUNTERS_INIT;
    progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
    if (rc == PROGCACHE_EREMOTE) {
        CHECK(s == NULL);
        CHECK(strstr(progcache_error_last(), "built without hiredis") != NULL);
        CHECK_RC(PROGCACHE_EREMOTE, progcache_redis_counters_get(&c, NULL));
        printf("test_redis_config: ok (built without hiredis)\n");
        return;
    }
    CHECK_OK(rc);
    
    CHECK_OK(progcache_redis_counters_get(&c, s));
    CHECK(c.hits == 0 && c.errors == 0 && c.stores == 0);
    CHECK_OK(progcache_store_flush(s));
    /* What the cache sees: a shared tier with leases and counters. */
    progcache_store_counters sc = PROGCACHE_STORE_COUNTERS_INIT;
    CHECK_OK(progcache_store_counters_get(&sc, s));
    CHECK(sc.hits == 0 && sc.errors == 0);

    /* Another kind of store, NULLs and bad versions are refused; a store
     * without leases says so with ENOTFOUND. */
    CHECK_OK(progcache_store_memory_new(&mem, NULL));
    CHECK_OK(progcache_store_flush(mem)); /* queues nothing */
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_flush(NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_redis_counters_get(&c, mem));
    CHECK_RC(PROGCACHE_EINVAL, progcache_redis_counters_get(NULL, s));
    c.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_redis_counters_get(&c, s));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_acquire(&lease, mem, "k", 1, 10));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_lease_acquire(&lease, s, "k", 1, 0));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_lease_acquire(&lease, s, NULL, 0, 10));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_lease_renew(s, &lease, 10)); /* not held */
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_release(s, &lease));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_wait(mem, "k", 1, 10));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_lease_wait(s, "", 0, 10));

    opts.url = "rediss://h";
    progcache_store *bad = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_redis_new(&bad, &opts));
    CHECK(bad == NULL && strstr(progcache_error_last(), "TLS") != NULL);
    progcache_store_free(mem);
    progcache_store_free(s);
    printf("test_redis_config: ok\n");
}

int main(void)
{
    test_tcp_urls();
    test_unix_urls();
    test_bad_urls();
    test_long_socket_path();
    test_config();
    test_entry_points();
    return 0;
}
