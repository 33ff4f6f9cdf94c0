/* Single-flight: many threads or processes missing one key compute it
 * once; a dead owner releases its waiters; different keys never wait for
 * each other; a bounded wait ends in computing alone. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/flight.h"
#include "check.h"

static char *dir;

static progcache *open_cache(void)
{
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, &opts));
    return c;
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* get-or-compute as progcache_compile_or_load does it; returns 1 if this
 * caller computed. */
static int get_or_compute(progcache *c, const char *key, int compute_ms)
{
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int computed = 0;
    int rc = progcache_get(&buf, c, key, strlen(key));
    if (rc == PROGCACHE_ENOTFOUND) {
        progcache__flight f = PROGCACHE__FLIGHT_INIT;
        int owner;
        double waited;
        CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, key, strlen(key),
                                         PROGCACHE__FLIGHT_WAIT_MS));
        if (owner) {
            pause_ms(compute_ms); /* "compiling" */
            CHECK_OK(progcache_put(c, key, strlen(key), "artifact", 8));
            progcache__flight_end(&f);
            CHECK_OK(progcache_get(&buf, c, key, strlen(key)));
            computed = 1;
        }
    } else {
        CHECK_OK(rc);
    }
    CHECK(buf.size == 8 && memcmp(buf.data, "artifact", 8) == 0);
    progcache_buf_free(&buf);
    return computed;
}

static progcache *shared;
static int computations;

static void *thread_main(void *arg)
{
    (void)arg;
    if (get_or_compute(shared, "one-kernel", 200))
        __atomic_add_fetch(&computations, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_threads(void)
{
    shared = open_cache();
    pthread_t t[16];
    for (int i = 0; i < 16; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, NULL) == 0);
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    CHECK(computations == 1);
    progcache_close(shared);
}

static void test_processes(void)
{
    /* Outside the cache directory, which holds nothing but a cache's own
     * files (a cache refuses to open a directory holding anything else). */
    char *scratch = test_mkdtemp("flight-count");
    char counter[4200];
    snprintf(counter, sizeof counter, "%s/computations", scratch);
    pid_t pids[12];
    for (int i = 0; i < 12; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            progcache *c = open_cache();
            if (get_or_compute(c, "kernel-for-procs", 300)) {
                int fd = open(counter, O_WRONLY | O_CREAT | O_APPEND, 0644);
                if (fd < 0 || write(fd, "x", 1) != 1)
                    _exit(3);
                close(fd);
            }
            progcache_close(c);
            _exit(0);
        }
    }
    for (int i = 0; i < 12; i++) {
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    size_t n = 0;
    free(test_read_file(counter, &n));
    CHECK(n == 1);
    test_rmdtemp(scratch);
}

/* The owner is killed while "compiling": a waiter takes over at once. */
static void test_dead_owner(void)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        progcache *c = open_cache();
        progcache__flight f = PROGCACHE__FLIGHT_INIT;
        progcache_buf buf = PROGCACHE_BUF_INIT;
        int owner;
        double waited;
        if (progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, "doomed", 6, 1000) || !owner ||
            f.fd < 0)
            _exit(3);
        if (write(ready[1], "x", 1) != 1)
            _exit(4);
        pause();
        _exit(0);
    }
    char x;
    CHECK(read(ready[0], &x, 1) == 1);
    progcache *c = open_cache();
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int owner;
    double waited;
    /* Held by the child now; kill it, and the wait ends with the lock. */
    kill(pid, SIGKILL);
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, "doomed", 6,
                                     PROGCACHE__FLIGHT_WAIT_MS));
    CHECK(owner == 1 && f.fd >= 0);
    progcache__flight_end(&f);
    waitpid(pid, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    progcache_buf_free(&buf);
    progcache_close(c);
}

/* While one thread holds key A, another takes key B without waiting: A is
 * released only after B's flight began, so if B had waited for A the test
 * would hang (and CTest's timeout would fail it). */
static int b_done;
static void *hold_b(void *arg)
{
    progcache *c = arg;
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int owner;
    double waited;
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, "key-B", 5,
                                     PROGCACHE__FLIGHT_WAIT_MS));
    CHECK(owner == 1 && f.fd >= 0);
    __atomic_store_n(&b_done, 1, __ATOMIC_SEQ_CST);
    progcache__flight_end(&f);
    progcache_buf_free(&buf);
    return NULL;
}

static void test_keys_independent(void)
{
    progcache *c = open_cache();
    progcache__flight a = PROGCACHE__FLIGHT_INIT;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int owner;
    double waited;
    CHECK_OK(progcache__flight_begin(&a, &owner, &waited, &buf, NULL, c, "key-A", 5, 1000));
    CHECK(owner == 1 && a.fd >= 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, hold_b, c) == 0);
    while (!__atomic_load_n(&b_done, __ATOMIC_SEQ_CST))
        pause_ms(1);
    progcache__flight_end(&a);
    pthread_join(t, NULL);

    /* And a waiter whose holder never finishes gives up after its bound,
     * computing alone (no lock held). */
    CHECK_OK(progcache__flight_begin(&a, &owner, &waited, &buf, NULL, c, "key-A", 5, 1000));
    CHECK(a.fd >= 0);
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, "key-A", 5, 50));
    CHECK(owner == 1 && f.fd < 0 && waited >= 50);
    progcache__flight_end(&a);
    progcache_buf_free(&buf);
    progcache_close(c);
}

int main(void)
{
    dir = test_mkdtemp("flight");
    test_threads();
    test_processes();
    test_dead_owner();
    test_keys_independent();
    test_rmdtemp(dir);
    printf("test_flight: all passed\n");
    return 0;
}
