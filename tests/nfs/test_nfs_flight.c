/* One compile across the nodes of a shared file system (docs/SHARED.md):
 * "nfs" runs on the two sshfs mounts of tests/nfs/ (where byte-range locks
 * do not reach across the mounts, and progcache uses lease files on its
 * own: FUSE), "local" on a local directory with PROGCACHE_FLIGHT_LOCK=lease.
 *  - 4 processes on each node compile one cold program: 1 NVRTC compile,
 *    the 7 others a HIT;
 *  - a holder killed with SIGKILL is taken over by a waiter on the other
 *    node within the lease (asserted only against a generous bound). */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/flight.h"
#include "clock.h"
#include "cuda_fixtures.h"
#include "nfs_fixture.h"
#include "progcache/file.h"
#include "progcache/stats.h"

#define PER_NODE 4

static progcache *open_at(const char *dir)
{
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_NO_REMOTE;
    progcache *c;
    CHECK_OK(progcache_open(&c, dir, &o));
    return c;
}

static void one_compile(const char *node[2])
{
    int gate[2];
    CHECK(pipe(gate) == 0);
    pid_t pids[2 * PER_NODE];
    for (int i = 0; i < 2 * PER_NODE; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            close(gate[1]);
            progcache *c = open_at(node[i % 2]);
            char go;
            (void)!read(gate[0], &go, 1); /* all start at once: the gate closes */
            progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
            progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
            if (progcache_compile_or_load(&r, c, &p) || !r.artifact.size)
                _exit(4);
            int compiled = r.status == PROGCACHE_STATUS_MISS;
            progcache_program_result_release(&r);
            progcache_close(c);
            _exit(compiled ? 10 : 11);
        }
    }
    close(gate[0]);
    usleep(300000); /* let every child open its cache and wait at the gate */
    close(gate[1]);
    int compiles = 0;
    for (int i = 0; i < 2 * PER_NODE; i++) {
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 11));
        compiles += WEXITSTATUS(status) == 10;
    }
    printf("%d processes on two nodes: %d NVRTC compile(s)\n", 2 * PER_NODE, compiles);
    CHECK(compiles == 1);
}

static void killed_holder(const char *node[2])
{
    static const char key[] = "a key whose holder is killed....";
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t holder = fork();
    CHECK(holder >= 0);
    if (holder == 0) {
        progcache *c = open_at(node[0]);
        progcache__flight f = PROGCACHE__FLIGHT_INIT;
        int owner;
        double waited;
        progcache_buf out = PROGCACHE_BUF_INIT;
        if (progcache__flight_begin(&f, &owner, &waited, &out, NULL, c, key, sizeof key - 1,
                                    PROGCACHE__FLIGHT_WAIT_MS) ||
            !owner || !f.lease)
            _exit(3);
        (void)!write(ready[1], "h", 1);
        for (;;)
            pause(); /* "compiling" until killed */
    }
    close(ready[1]);
    char h = 0;
    CHECK(read(ready[0], &h, 1) == 1 && h == 'h');
    close(ready[0]);
    usleep(200000);
    CHECK(kill(holder, SIGKILL) == 0);
    int status;
    CHECK(waitpid(holder, &status, 0) == holder && WIFSIGNALED(status));

    progcache *c = open_at(node[1]);
    CHECK_OK(progcache_stats_reset(c));
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    int owner = 0;
    double waited = 0, start = progcache__clock_ms();
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &out, NULL, c, key, sizeof key - 1,
                                     PROGCACHE__FLIGHT_WAIT_MS));
    double took = progcache__clock_ms() - start;
    printf("holder killed: taken over after %.1f s (lease %.1f s)\n", took / 1000.0,
           PROGCACHE__LEASE_MS / 1000.0);
    CHECK(owner && f.lease);
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, c));
    CHECK(s.flight_takeovers == 1 && s.wait_timeouts == 0);
    CHECK(took < 30000.0); /* generous: the lease is 6 s */
    progcache__flight_end(&f);
    progcache_buf_free(&out);
    progcache_close(c);
}

int main(int argc, char **argv)
{
    const int nfs = argc > 1 && !strcmp(argv[1], "nfs");
    test_nfs fx = {0};
    char *local = NULL;
    const char *node[2];
    if (nfs) {
        test_nfs_start(&fx);
        node[0] = fx.node[0];
        node[1] = fx.node[1];
    } else {
        local = test_mkdtemp("lease-flight");
        node[0] = node[1] = local;
    }
    progcache_file *f;
    CHECK_OK(progcache_file_open(&f, node[0], NULL));
    const char *want = getenv("PROGCACHE_TEST_WANT_FLIGHT");
    CHECK(!strcmp(progcache_file_flight_mechanism(f), want ? want : "lease"));
    progcache_file_close(f);

    one_compile(node);
    killed_holder(node);

    return test_nfs_end(&fx, nfs, local, "test_nfs_flight");
}
