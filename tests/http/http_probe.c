/* The HTTP/S3 tier driven by test_http_tier.py, which starts the servers
 * (nginx, moto, a misbehaving one) and reads what this prints:
 *   http_probe contract URL          the store contract suite over the tier
 *   http_probe nodes DIR_A DIR_B     two cache directories as two nodes
 *                                    ($PROGCACHE_REMOTE): a MISS on A,
 *                                    put on A, a HIT on B
 *   http_probe get URL               one get of a key: "rc=.. ms=.. warn=.."
 *                                    and the tier's counters
 *   http_probe put URL               one put, flushed, and the counters
 *   http_probe hit DIR               node a's key looked up on node DIR
 *   http_probe leases URL N          N processes after one lease
 * Log lines go to stderr as "LOG <level> <message>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "progcache/progcache.h"
#include "progcache/sys/store.h"
#include "store_contract.h"

static int warns;

static void on_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level >= PROGCACHE_LOG_WARN)
        warns++;
    fprintf(stderr, "LOG %d %s\n", level, message);
}

static int url_factory(progcache_store **out, const char *url, const progcache_store_params *p,
                       void *ctx)
{
    (void)ctx;
    return progcache_store_open_url(out, url, p);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void print_counters(const progcache_store *s)
{
    progcache_store_counters c = PROGCACHE_STORE_COUNTERS_INIT;
    if (progcache_store_counters_get(&c, s) == PROGCACHE_OK)
        printf("hits=%llu misses=%llu errors=%llu stores=%llu rejected=%llu timeouts=%llu "
               "over_bound=%llu store_errors=%llu bad_tag=%llu\n",
               (unsigned long long)c.hits, (unsigned long long)c.misses,
               (unsigned long long)c.errors, (unsigned long long)c.stores,
               (unsigned long long)c.rejected, (unsigned long long)c.timeouts,
               (unsigned long long)c.over_bound, (unsigned long long)c.store_errors,
               (unsigned long long)c.bad_tag);
}

static progcache_store *open_store(const char *url)
{
    progcache_store_params p = PROGCACHE_STORE_PARAMS_INIT;
    p.max_artifact_size = 1 << 20;
    p.log = on_log;
    progcache_store *s = NULL;
    int rc = progcache_store_open_url(&s, url, &p);
    if (rc) {
        printf("open rc=%d: %s\n", rc, progcache_error_last());
        exit(2);
    }
    return s;
}

static int one_get(const char *url, int repeat)
{
    progcache_store *s = open_store(url);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int rc = 0;
    double worst = 0;
    for (int i = 0; i < repeat; i++) {
        double t0 = now_ms();
        rc = progcache_store_get(&buf, s, "probe-key", 9);
        double ms = now_ms() - t0;
        if (ms > worst)
            worst = ms;
    }
    printf("rc=%d ms=%.0f warn=%d size=%zu\n", rc, worst, warns, buf.size);
    print_counters(s);
    progcache_buf_free(&buf);
    progcache_store_free(s);
    return 0;
}

static int one_put(const char *url)
{
    progcache_store *s = open_store(url);
    static const char value[] = "a value put by http_probe";
    int rc = progcache_store_put(s, "probe-key", 9, value, sizeof value);
    progcache_store_flush(s);
    printf("rc=%d warn=%d\n", rc, warns);
    print_counters(s);
    progcache_store_free(s);
    return 0;
}

static progcache *open_node(const char *dir)
{
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_NO_FSYNC;
    o.log = on_log;
    progcache *c = NULL;
    if (progcache_open(&c, dir, &o)) {
        printf("open %s: %s\n", dir, progcache_error_last());
        exit(2);
    }
    return c;
}

static int nodes(const char *dir_a, const char *dir_b)
{
    static const char value[] = "compiled on node a";
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache *a = open_node(dir_a);
    int miss_a = progcache_get(&buf, a, "kernel", 6);
    if (progcache_put(a, "kernel", 6, value, sizeof value) || progcache_flush(a)) {
        printf("put on a: %s\n", progcache_error_last());
        return 1;
    }
    progcache_close(a);
    progcache *b = open_node(dir_b);
    int hit_b = progcache_get(&buf, b, "kernel", 6);
    progcache_stats st = PROGCACHE_STATS_INIT;
    progcache_stats_get(&st, b);
    int same = hit_b == 0 && buf.size == sizeof value && !memcmp(buf.data, value, sizeof value);
    printf("a=%s b=%s same=%d remote_hits=%llu remote_rejected=%llu\n",
           miss_a == PROGCACHE_ENOTFOUND ? "MISS" : "HIT?", hit_b == 0 ? "HIT" : "MISS", same,
           (unsigned long long)st.remote_hits, (unsigned long long)st.remote_rejected);
    progcache_close(b);
    progcache_buf_free(&buf);
    return 0;
}

/* n processes at once after one key's lease: one holds it, puts the value
 * and releases; the others wait and then find the entry. Prints
 * "held=H waited=W" (one compile: held=1, waited=n-1). */
static int leases(const char *url, int n)
{
    char key[64];
    snprintf(key, sizeof key, "lease-key-%ld", (long)getpid());
    for (int i = 0; i < n; i++) {
        if (fork() != 0)
            continue;
        progcache_store *s = open_store(url);
        progcache_store_lease l = PROGCACHE_STORE_LEASE_INIT;
        int rc = progcache_store_lease_acquire(&l, s, key, strlen(key), 10000), code = 1;
        if (rc == 0 && l.held) {
            struct timespec t = {0, 300 * 1000000L};
            nanosleep(&t, NULL); /* a compile */
            progcache_store_put(s, key, strlen(key), "value", 5);
            code = progcache_store_lease_release(s, &l) == 0 ? 10 : 1;
        } else if (rc == 0) {
            code = progcache_store_lease_wait(s, key, strlen(key), 10000) == 0 ? 20 : 2;
        }
        if (code < 10)
            fprintf(stderr, "child %d: %s\n", i, progcache_error_last());
        progcache_store_free(s);
        _exit(code);
    }
    int held = 0, waited = 0, st;
    while (wait(&st) > 0)
        if (WIFEXITED(st))
            held += WEXITSTATUS(st) == 10, waited += WEXITSTATUS(st) == 20;
    printf("held=%d waited=%d\n", held, waited);
    return 0;
}

/* One lookup of node a's key on a fresh node; its remote copies flushed. */
static int hit(const char *dir)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache *c = open_node(dir);
    int rc = progcache_get(&buf, c, "kernel", 6);
    progcache_close(c);
    printf("hit=%s\n", rc == 0 ? "HIT" : "MISS");
    progcache_buf_free(&buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "leases") == 0)
        return leases(argv[2], atoi(argv[3]));
    if (argc == 3 && strcmp(argv[1], "hit") == 0)
        return hit(argv[2]);
    if (argc == 3 && strcmp(argv[1], "contract") == 0)
        return store_contract_run("http", url_factory, argv[2], NULL);
    if (argc == 4 && strcmp(argv[1], "nodes") == 0)
        return nodes(argv[2], argv[3]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "get") == 0)
        return one_get(argv[2], argc == 4 ? atoi(argv[3]) : 1);
    if (argc == 3 && strcmp(argv[1], "put") == 0)
        return one_put(argv[2]);
    fprintf(stderr, "usage: http_probe contract URL | nodes DIR_A DIR_B | get URL [N] | put URL\n");
    return 2;
}
