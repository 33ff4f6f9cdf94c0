/* Bounded waits for another node's compile (docs/REMOTE.md, "Waiting for
 * another node"), through progcache_compile_or_load with NVRTC:
 *  - a holder that dies (SIGKILL while it holds and renews the lease) is
 *    replaced within a lease: the waiter takes over and compiles, and says
 *    who it waited for while it waited;
 *  - a holder that lives but never finishes holds nobody past the bound
 *    (wait_timeout_ms, or PROGCACHE_WAIT_TIMEOUT): the waiter compiles on
 *    its own and says so; a bad PROGCACHE_WAIT_TIMEOUT is said and ignored;
 *  - a process waiting behind its host's holder, which itself waits for a
 *    stuck node, gets that holder's compile, not one of its own.
 * The outcomes are asserted through the result, the counters and the log;
 * times only from below (a wait lasts at least as long as it was made to). */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/flight.h"
#include "check.h"
#include "redis_fixture.h"
#include "remote_node.h"

static test_redis server;
static char *scratch;

static progcache_redis_options remote(void)
{
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = server.url;
    /* A loaded test machine must not turn a slow reply into a back-off. */
    ro.command_timeout_ms = 2000;
    ro.connect_timeout_ms = 2000;
    return ro;
}

/* A process on node `name` that takes k's host lock and remote lease as a
 * compiling process does (and renews it, as the compiling process's
 * thread does), then sleeps until killed. Returns its pid once it holds. */
static pid_t start_holder(const char *name, const test_kernel *k)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
        progcache_redis_options ro = remote();
        progcache *c = test_node_open(scratch, name, &ro, NULL);
        unsigned char key[PROGCACHE_KEY_SIZE];
        test_kernel_key(key, k);
        progcache__flight f = PROGCACHE__FLIGHT_INIT;
        progcache_buf buf = PROGCACHE_BUF_INIT;
        int owner = 0;
        double waited;
        if (progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, key, sizeof key,
                                    1000) != PROGCACHE_OK ||
            !owner || !f.remote)
            _exit(3);
        if (write(ready[1], "h", 1) != 1)
            _exit(4);
        for (;;)
            pause();
    }
    close(ready[1]);
    char x;
    CHECK(read(ready[0], &x, 1) == 1);
    close(ready[0]);
    return pid;
}

static void keep_said(void *ctx, int level, const char *message)
{
    if (level == PROGCACHE_LOG_WARN && strstr(message, "PROGCACHE_WAIT_TIMEOUT"))
        snprintf(ctx, 1024, "%s", message);
}

static void stop(pid_t pid)
{
    kill(pid, SIGKILL);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
}

typedef struct waiter {
    const char *node;
    test_kernel *kernel;
    unsigned int wait_timeout_ms;
    test_log log;
    progcache_program_result result;
    progcache_stats stats;
    int rc;
    pthread_t thread;
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    progcache_redis_options ro = remote();
    progcache *c = test_node_open(scratch, w->node, &ro, &w->log);
    progcache_program p = w->kernel->program;
    p.wait_timeout_ms = w->wait_timeout_ms;
    w->rc = progcache_compile_or_load(&w->result, c, &p);
    w->stats = test_node_stats(c);
    progcache_close(c);
    return NULL;
}

static void waiter_start(waiter *w, const char *node, test_kernel *k, unsigned int timeout_ms)
{
    memset(w, 0, sizeof *w);
    w->node = node;
    w->kernel = k;
    w->wait_timeout_ms = timeout_ms;
    w->result = (progcache_program_result)PROGCACHE_PROGRAM_RESULT_INIT;
    test_log_init(&w->log);
    CHECK(pthread_create(&w->thread, NULL, wait_main, w) == 0);
}

static void waiter_join(waiter *w) { CHECK(pthread_join(w->thread, NULL) == 0); }

static void waiter_free(waiter *w)
{
    progcache_program_result_release(&w->result);
    test_log_free(&w->log);
}

/* The artifact is the one a compile gives. */
static void check_bytes(const waiter *w, const test_kernel *k)
{
    progcache_buf ref = PROGCACHE_BUF_INIT;
    test_kernel_reference(&ref, k);
    CHECK(w->result.artifact.size == ref.size &&
          memcmp(w->result.artifact.data, ref.data, ref.size) == 0);
    progcache_buf_free(&ref);
}

static void test_dead_holder(void)
{
    test_kernel k;
    test_kernel_init(&k, "dead_holder");
    pid_t holder = start_holder("holder1", &k);
    waiter w;
    waiter_start(&w, "waiter1", &k, 60000);
    test_sleep_ms(2500); /* the holder renews; the waiter waits and reports */
    stop(holder);
    waiter_join(&w);
    if (w.rc || w.result.status != PROGCACHE_STATUS_MISS || w.stats.remote_takeovers != 1)
        test_log_dump(&w.log);
    CHECK_OK(w.rc);
    CHECK(w.result.status == PROGCACHE_STATUS_MISS); /* compiled here */
    check_bytes(&w, &k);
    CHECK(w.stats.remote_waits == 1 && w.stats.remote_takeovers == 1);
    CHECK(w.stats.wait_timeouts == 0);
    /* It waited while the holder lived, and the wait ended by a takeover,
     * not by the 60 s bound (wait_timeouts is 0). */
    CHECK(w.result.wait_ms >= 2500);
    char who[300], host[200];
    CHECK(gethostname(host, sizeof host) == 0);
    host[sizeof host - 1] = '\0';
    char hex[65];
    progcache_key_hex(hex, w.result.key, sizeof w.result.key);
    snprintf(who, sizeof who, "waiting for %s/%ld compiling key %.16s... ", host, (long)holder,
             hex);
    CHECK(test_log_count(&w.log, PROGCACHE_LOG_INFO, who) >= 1);
    snprintf(who, sizeof who, "%s/%ld stopped holding the compile of key %.16s", host,
             (long)holder, hex);
    CHECK(test_log_count(&w.log, PROGCACHE_LOG_WARN, who) == 1);
    waiter_free(&w);
}

static void test_stuck_holder(void)
{
    test_kernel k;
    test_kernel_init(&k, "stuck_holder");
    pid_t holder = start_holder("holder2", &k);
    waiter w;
    waiter_start(&w, "waiter2", &k, 1500);
    waiter_join(&w);
    CHECK_OK(w.rc);
    CHECK(w.result.status == PROGCACHE_STATUS_MISS);
    check_bytes(&w, &k);
    CHECK(w.stats.remote_waits == 1 && w.stats.wait_timeouts == 1);
    CHECK(w.stats.remote_takeovers == 0);
    CHECK(w.result.wait_ms >= 1400);
    if (test_log_count(&w.log, PROGCACHE_LOG_WARN, "gave up waiting for ") != 1)
        test_log_dump(&w.log);
    CHECK(test_log_count(&w.log, PROGCACHE_LOG_WARN, "gave up waiting for ") == 1);
    CHECK(test_log_count(&w.log, PROGCACHE_LOG_WARN, "1500 ms); compiling here") == 1);
    waiter_free(&w);
    stop(holder);

    /* The bound from the environment, when the program sets none. (A
     * kernel of its own: waiter2 stored the first one in the remote tier.) */
    test_kernel k2;
    test_kernel_init(&k2, "stuck_holder_env");
    holder = start_holder("holder3", &k2);
    setenv("PROGCACHE_WAIT_TIMEOUT", "1200ms", 1);
    waiter_start(&w, "waiter3", &k2, 0);
    waiter_join(&w);
    unsetenv("PROGCACHE_WAIT_TIMEOUT");
    CHECK_OK(w.rc);
    CHECK(w.result.status == PROGCACHE_STATUS_MISS && w.stats.wait_timeouts == 1);
    check_bytes(&w, &k2);
    CHECK(test_log_count(&w.log, PROGCACHE_LOG_WARN, "1200 ms); compiling here") == 1);
    waiter_free(&w);
    stop(holder);

    /* A value that is not a duration is said, naming it, and ignored: the
     * open succeeds with the default bound (as every malformed variable). */
    const char *bad[] = {"soon", "0", "-5", "10h", "5 s", "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("PROGCACHE_WAIT_TIMEOUT", bad[i], 1);
        char dir[4096], said[1024] = "", want[128];
        snprintf(dir, sizeof dir, "%s/bad-wait", scratch);
        progcache_options o = PROGCACHE_OPTIONS_INIT;
        o.log = keep_said;
        o.log_ctx = said;
        progcache *c = NULL;
        CHECK_OK(progcache_open(&c, dir, &o));
        snprintf(want, sizeof want, "PROGCACHE_WAIT_TIMEOUT=\"%s\": not a duration", bad[i]);
        CHECK(strstr(said, want) && strstr(said, "ignored (wait_timeout stays 60s"));
        progcache_close(c);
    }
    const char *good[] = {"90", "90s", "1500ms", "2m"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("PROGCACHE_WAIT_TIMEOUT", good[i], 1);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/good-wait", scratch);
        progcache *c = NULL;
        CHECK_OK(progcache_open(&c, dir, NULL));
        progcache_close(c);
    }
    unsetenv("PROGCACHE_WAIT_TIMEOUT");
}

/* Node B has two processes: the first waits for node A's stuck holder,
 * gives up after its bound (4 s) and compiles; the second, waiting behind
 * it on B's lock, gets that compile instead of its own. (Its own bound is
 * larger here, so that a compile slowed by a loaded machine cannot end its
 * wait first: with equal bounds it gives the first twice its bound, which
 * a compile of seconds fits in.) */
static void test_host_waits_behind_holder(void)
{
    test_kernel k;
    test_kernel_init(&k, "behind_holder");
    pid_t holder = start_holder("nodeA", &k);
    waiter first, second;
    waiter_start(&first, "nodeB", &k, 4000);
    test_sleep_ms(300);
    waiter_start(&second, "nodeB", &k, 30000);
    waiter_join(&first);
    waiter_join(&second);
    stop(holder);
    CHECK_OK(first.rc);
    CHECK_OK(second.rc);
    int compiles = (first.result.status == PROGCACHE_STATUS_MISS) +
                   (second.result.status == PROGCACHE_STATUS_MISS);
    if (compiles != 1) {
        test_log_dump(&first.log);
        test_log_dump(&second.log);
    }
    CHECK(compiles == 1);
    check_bytes(&first, &k);
    check_bytes(&second, &k);
    waiter_free(&first);
    waiter_free(&second);
}

int main(void)
{
    test_redis_require();
    scratch = test_mkdtemp("remote-wait");
    test_redis_start(&server, NULL);
    test_dead_holder();
    test_stuck_holder();
    test_host_waits_behind_holder();
    test_redis_stop(&server);
    test_rmtree(scratch);
    free(scratch);
    printf("test_remote_wait: ok\n");
    return 0;
}
