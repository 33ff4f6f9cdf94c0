/* Redis leases renewed on the monotonic clock (src/cache/flight_remote.c;
 * issue 29), under the clock_shift shim (tests/helpers/clock_shift.c),
 * which steps this process's wall clock without touching the machine's:
 * node A holds a key's lease while its date steps back an hour, then
 * forward an hour; its renewer keeps the 2 s beat, so the lease (6 s on
 * the server's clock) never lapses, and node B, waiting for it, is never
 * told that the holder stopped: it waits its bound out and says whom it
 * waited for. On a wall-clock deadline the forward step stops the renewals
 * for an hour: the lease lapses and B takes over a live compile. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/flight.h"
#include "check.h"
#include "clock.h"
#include "clock_shift.h"
#include "redis_fixture.h"
#include "remote_node.h"

static const char key[] = "a key whose remote lease is held.";

/* Node A: takes the key's lease (its host's lock, then Redis's) and
 * "compiles" until killed. */
static pid_t holder(const char *scratch, const progcache_redis_options *ro)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        progcache *c = test_node_open(scratch, "node-a", ro, NULL);
        progcache__flight f = PROGCACHE__FLIGHT_INIT;
        int owner;
        double waited;
        progcache_buf out = PROGCACHE_BUF_INIT;
        if (progcache__flight_begin(&f, &owner, &waited, &out, NULL, c, key, sizeof key - 1,
                                    PROGCACHE__FLIGHT_WAIT_MS) ||
            !owner || !f.remote)
            _exit(3);
        (void)!write(ready[1], "h", 1);
        for (;;)
            pause();
    }
    close(ready[1]);
    char h = 0;
    CHECK(read(ready[0], &h, 1) == 1 && h == 'h');
    close(ready[0]);
    return pid;
}

int main(void)
{
    if (!test_clock_shift_on()) {
        printf("test_remote_lease_clock: SKIPPED (run it under the clock_shift shim, from "
               "ctest)\n");
        return 77;
    }
    test_redis_require();
    test_clock_shift_works();
    /* The server keeps the machine's clock (its expiry is the lease's
     * truth): started without the shim, which this process and its forks
     * keep. */
    unsetenv("LD_PRELOAD");
    test_redis r;
    test_redis_start(&r, NULL);
    char *scratch = test_mkdtemp("remote-lease-clock");
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = r.url;
    ro.flags = PROGCACHE_REDIS_SYNC_PUT;

    /* Back an hour from the start (a deadline in the past: the renewer
     * would spin on a wall-clock one), forward an hour 1.5 s in. */
    test_clock_shift_set("-3600");
    pid_t a = holder(scratch, &ro);
    pid_t stepper = fork();
    CHECK(stepper >= 0);
    if (stepper == 0) {
        usleep(1500000);
        test_clock_shift_set("3600");
        _exit(0);
    }

    test_log log;
    test_log_init(&log);
    progcache *b = test_node_open(scratch, "node-b", &ro, &log);
    CHECK_OK(progcache_stats_reset(b));
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    int owner = 0;
    double waited = 0, start = progcache__clock_ms();
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &out, NULL, b, key, sizeof key - 1,
                                     10000));
    double took = progcache__clock_ms() - start;
    CHECK(waitpid(stepper, NULL, 0) == stepper);
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, b));
    printf("node B waited %.1f s: remote_takeovers %llu, wait_timeouts %llu\n", took / 1000.0,
           (unsigned long long)s.remote_takeovers, (unsigned long long)s.wait_timeouts);
    if (s.remote_takeovers != 0 || s.wait_timeouts != 1)
        test_log_dump(&log);
    CHECK(owner && !f.remote); /* gave up waiting: compiles without the lease */
    CHECK(s.remote_takeovers == 0 && s.wait_timeouts == 1);
    CHECK(took >= 10000.0 && took < 30000.0);
    char said[64];
    snprintf(said, sizeof said, "/%d compiling key ", (int)a);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, "gave up waiting for ") == 1);
    CHECK(test_log_count(&log, PROGCACHE_LOG_WARN, said) == 1);

    progcache__flight_end(&f);
    progcache_buf_free(&out);
    progcache_close(b);
    test_log_free(&log);
    CHECK(kill(a, SIGKILL) == 0 && waitpid(a, NULL, 0) == a);
    unlink(getenv("PROGCACHE_TEST_CLOCK_SHIFT"));
    test_redis_stop(&r);
    test_rmdtemp(scratch);
    printf("test_remote_lease_clock: all passed\n");
    return 0;
}
