/* Cross-node single-flight through Redis leases: ownership, renewal,
 * release by a non-owner, expiry after the owner is killed, waiting for a
 * result, and the count that matters: several "nodes" (processes, each with
 * its own cache directory, one shared Redis) missing the same key at once
 * compute it exactly once. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "redis_fixture.h"

#define NODES 4
#define ROUNDS 3

static test_redis server;

static progcache_store *open_store(unsigned int flags)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    opts.url = server.url;
    opts.flags = flags;
    opts.connect_timeout_ms = 2000;
    opts.command_timeout_ms = 2000;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_redis_new(&s, &opts));
    return s;
}

static long long lease_pttl(const char *key)
{
    char name[300];
    test_redis_name(name, sizeof name, "progcache:lease:", key, strlen(key));
    const char *pttl[] = {"PTTL", name};
    return test_redis_int(&server, 2, pttl);
}

static void test_ownership(void)
{
    progcache_store *a = open_store(PROGCACHE_REDIS_SYNC_PUT);
    progcache_store *b = open_store(PROGCACHE_REDIS_SYNC_PUT);
    progcache_store_lease la = PROGCACHE_STORE_LEASE_INIT, lb = PROGCACHE_STORE_LEASE_INIT;

    CHECK_OK(progcache_store_lease_acquire(&la, a, "own", 3, 300));
    CHECK(la.held && strlen(la.token) == 32 && strlen(la.hash) == 64);
    CHECK_OK(progcache_store_lease_acquire(&lb, b, "own", 3, 300));
    CHECK(!lb.held);
    CHECK(strcmp(la.token, lb.token) != 0);

    /* Renewed past its first expiry, it is still A's. */
    CHECK_OK(progcache_store_lease_renew(a, &la, 5000));
    test_sleep_ms(400);
    CHECK(lease_pttl("own") > 300);
    CHECK_OK(progcache_store_lease_acquire(&lb, b, "own", 3, 300));
    CHECK(!lb.held);

    /* A release by someone whose token is not the owner's deletes nothing. */
    progcache_store_lease forged = la;
    memcpy(forged.token, lb.token, sizeof forged.token);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_release(b, &forged));
    CHECK(!forged.held);
    CHECK(lease_pttl("own") > 0);
    forged = la;
    forged.token[0] = forged.token[0] == 'a' ? 'b' : 'a';
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_renew(b, &forged, 100000));
    CHECK(!forged.held);
    CHECK(lease_pttl("own") <= 5000);

    CHECK_OK(progcache_store_lease_release(a, &la));
    CHECK(!la.held);
    CHECK(lease_pttl("own") == -2);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_release(a, &la));
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_lease_renew(a, &la, 100));

    /* Now B can take it. A lease left to expire is lost: renew says so. */
    CHECK_OK(progcache_store_lease_acquire(&lb, b, "own", 3, 100));
    CHECK(lb.held);
    test_sleep_ms(250);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_renew(b, &lb, 1000));
    CHECK(!lb.held);
    progcache_store_free(a);
    progcache_store_free(b);
}

/* The owner is a process killed with SIGKILL while holding the lease: a
 * waiter learns the lease is gone (ENOTFOUND) and takes it over. */
static void test_killed_owner(void)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        progcache_store *a = open_store(PROGCACHE_REDIS_SYNC_PUT);
        progcache_store_lease la = PROGCACHE_STORE_LEASE_INIT;
        if (progcache_store_lease_acquire(&la, a, "orphan", 6, 600) || !la.held)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause(); /* "compiling" until killed */
    }
    close(ready[1]);
    char x;
    CHECK(read(ready[0], &x, 1) == 1);
    close(ready[0]);
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, NULL, 0) == pid);

    progcache_store *b = open_store(PROGCACHE_REDIS_SYNC_PUT);
    progcache_store_lease lb = PROGCACHE_STORE_LEASE_INIT;
    CHECK(lease_pttl("orphan") > 0);
    CHECK_OK(progcache_store_lease_acquire(&lb, b, "orphan", 6, 1000));
    CHECK(!lb.held);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_lease_wait(b, "orphan", 6, 30000));
    CHECK_OK(progcache_store_lease_acquire(&lb, b, "orphan", 6, 1000));
    CHECK(lb.held);
    CHECK_OK(progcache_store_lease_release(b, &lb));
    progcache_store_free(b);
}

/* wait: a timeout while the owner works; OK once the value is stored. */
static void test_wait(void)
{
    progcache_store *a = open_store(0); /* background puts: release must flush */
    progcache_store *b = open_store(PROGCACHE_REDIS_SYNC_PUT);
    progcache_store_lease la = PROGCACHE_STORE_LEASE_INIT;
    CHECK_OK(progcache_store_lease_acquire(&la, a, "w", 1, 60000));
    CHECK(la.held);
    CHECK_RC(PROGCACHE_ETIMEOUT, progcache_store_lease_wait(b, "w", 1, 200));

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        progcache_store *c = open_store(PROGCACHE_REDIS_SYNC_PUT);
        int rc = progcache_store_lease_wait(c, "w", 1, 60000);
        progcache_buf buf = PROGCACHE_BUF_INIT;
        if (rc == PROGCACHE_OK)
            rc = progcache_store_get(&buf, c, "w", 1);
        int good = rc == PROGCACHE_OK && buf.size == 6 && memcmp(buf.data, "result", 6) == 0;
        progcache_buf_free(&buf);
        progcache_store_free(c);
        _exit(good ? 0 : 1);
    }
    test_sleep_ms(200); /* let the child start waiting */
    CHECK_OK(progcache_store_put(a, "w", 1, "result", 6));
    CHECK_OK(progcache_store_lease_release(a, &la));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(progcache_store_lease_wait(b, "w", 1, 1000)); /* present: at once */

    /* Release waits for the queued put: right after it returns, a large
     * value (slow to seal and send) is already in Redis. */
    size_t big_size = (size_t)48 << 20;
    char *big = calloc(1, big_size);
    CHECK(big != NULL);
    CHECK_OK(progcache_store_lease_acquire(&la, a, "big", 3, 60000));
    CHECK(la.held);
    CHECK_OK(progcache_store_put(a, "big", 3, big, big_size));
    CHECK_OK(progcache_store_lease_release(a, &la));
    char name[300];
    test_redis_name(name, sizeof name, "progcache:", "big", 3);
    const char *exists[] = {"EXISTS", name};
    CHECK(test_redis_int(&server, 2, exists) == 1);
    free(big);
    progcache_store_free(a);
    progcache_store_free(b);
}

/* One node: local get -> remote get -> lease acquire-or-wait -> compute ->
 * put -> release. The computation INCRs a counter in Redis. */
static int node(const char *dir, const char *key, int go_fd)
{
    progcache_store *file = NULL, *redis = NULL;
    progcache *cache = NULL;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    char want[64];
    snprintf(want, sizeof want, "artifact of %s", key);
    if (progcache_store_file_new(&file, dir, NULL))
        return 10;
    redis = open_store(0);
    progcache_store *tiers[] = {file, redis};
    if (progcache_open_tiers(&cache, tiers, 2, NULL))
        return 11;
    char x;
    if (read(go_fd, &x, 1) != 0) /* all nodes start together: EOF is the signal */
        return 12;

    int rc = progcache_get(&buf, cache, key, strlen(key)); /* file, then Redis */
    for (int tries = 0; rc == PROGCACHE_ENOTFOUND && tries < 50; tries++) {
        progcache_store_lease lease = PROGCACHE_STORE_LEASE_INIT;
        if (progcache_store_lease_acquire(&lease, redis, key, strlen(key), 5000))
            return 13;
        if (lease.held) {
            const char *incr[] = {"INCR", "computations"};
            test_redis_int(&server, 2, incr);
            test_sleep_ms(300); /* compiling */
            if (progcache_put(cache, key, strlen(key), want, strlen(want)))
                return 14;
            if (progcache_store_lease_release(redis, &lease))
                return 15;
            rc = progcache_get(&buf, cache, key, strlen(key));
            break;
        }
        rc = progcache_store_lease_wait(redis, key, strlen(key), 30000);
        if (rc == PROGCACHE_OK)
            rc = progcache_get(&buf, cache, key, strlen(key));
        else if (rc != PROGCACHE_ENOTFOUND)
            return 16;
    }
    int good = rc == PROGCACHE_OK && buf.size == strlen(want) &&
               memcmp(buf.data, want, buf.size) == 0;
    progcache_buf_free(&buf);
    progcache_close(cache);
    return good ? 0 : 17;
}

static void test_single_flight(void)
{
    char *dirs[NODES];
    for (int i = 0; i < NODES; i++)
        dirs[i] = test_mkdtemp("redis-node");
    const char *del[] = {"DEL", "computations"};
    test_redis_int(&server, 2, del);

    for (int round = 0; round < ROUNDS; round++) {
        char key[32];
        snprintf(key, sizeof key, "kernel-%d", round);
        int go[2];
        CHECK(pipe(go) == 0);
        pid_t pids[NODES];
        for (int i = 0; i < NODES; i++) {
            pids[i] = fork();
            CHECK(pids[i] >= 0);
            if (pids[i] == 0) {
                close(go[1]);
                _exit(node(dirs[i], key, go[0]));
            }
        }
        close(go[0]);
        test_sleep_ms(100); /* let them open their caches */
        close(go[1]);       /* go */
        for (int i = 0; i < NODES; i++) {
            int status;
            CHECK(waitpid(pids[i], &status, 0) == pids[i]);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fprintf(stderr, "node %d: status %d\n", i, status);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        const char *get[] = {"GET", "computations"};
        test_reply *r = test_redis_cmd(&server, 2, get, NULL);
        CHECK(r && r->type == '$' && r->str);
        CHECK(atoi(r->str) == round + 1); /* exactly one compute per round */
        test_reply_free(r);

        /* Every node has it in its own directory now. */
        for (int i = 0; i < NODES; i++) {
            progcache_store *file = NULL;
            progcache_buf buf = PROGCACHE_BUF_INIT;
            CHECK_OK(progcache_store_file_new(&file, dirs[i], NULL));
            CHECK_OK(progcache_store_get(&buf, file, key, strlen(key)));
            progcache_buf_free(&buf);
            progcache_store_free(file);
        }
    }
    for (int i = 0; i < NODES; i++) {
        test_rmtree(dirs[i]);
        free(dirs[i]);
    }
}

int main(void)
{
    test_redis_require();
    test_redis_start(&server, NULL);
    test_ownership();
    test_killed_owner();
    test_wait();
    test_single_flight();
    test_redis_stop(&server);
    printf("test_redis_lease: ok\n");
    return 0;
}
