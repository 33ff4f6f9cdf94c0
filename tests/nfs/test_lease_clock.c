/* Lease files on the monotonic clock (src/cache/flight_lease.c; issue 29),
 * under the clock_shift shim (tests/helpers/clock_shift.c), which steps
 * this process's wall clock without touching the machine's: "nfs" on the
 * two sshfs mounts of tests/nfs/ (the holder on one node, the waiter on
 * the other; the fixture's sshd and sshfs keep the machine's clock),
 * "local" on a local directory with PROGCACHE_FLIGHT_LOCK=lease.
 *  - a live holder whose date steps back and then forward an hour while
 *    it holds the lease keeps refreshing it: its waiter is not overtaken
 *    but waits its bound out, and the message names the holder;
 *  - a lease that another node keeps refreshing and never finishes ends
 *    the wait at the bound, and the message names that node, not "this
 *    host";
 *  - a lease nobody refreshes is taken over after the lease, with a
 *    message of one line that says how long it was unchanged (a true
 *    figure) and who held it (host and pid from the file). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/flight.h"
#include "check.h"
#include "clock.h"
#include "clock_shift.h"
#include "nfs_fixture.h"
#include "progcache/file.h"
#include "progcache/stats.h"
#include "sha256.h"

static const char key[] = "a key whose lease is watched....";

typedef struct logbook {
    char text[4096];
    int warnings;
} logbook;

static void note(void *ctx, int level, const char *message)
{
    logbook *b = ctx;
    if (level == PROGCACHE_LOG_WARN) {
        b->warnings++;
        snprintf(b->text, sizeof b->text, "%s", message);
    }
}

static progcache *open_at(const char *dir)
{
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_NO_REMOTE;
    progcache *c;
    CHECK_OK(progcache_open(&c, dir, &o));
    return c;
}

/* Wait for key as a waiter of dir with bound timeout_ms; the log's last
 * warning into book. Returns the stats after. */
static progcache_stats wait_for(const char *dir, unsigned int timeout_ms, logbook *book,
                                int *took_over, double *took_ms)
{
    progcache *c = open_at(dir);
    CHECK_OK(progcache_stats_reset(c));
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    f.log = note;
    f.log_ctx = book;
    int owner = 0;
    double waited = 0, start = progcache__clock_ms();
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &out, NULL, c, key, sizeof key - 1,
                                     timeout_ms));
    *took_ms = progcache__clock_ms() - start;
    CHECK(owner); /* nobody stores the key here: this process compiles */
    *took_over = f.lease != NULL;
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, c));
    progcache__flight_end(&f);
    progcache_buf_free(&out);
    progcache_close(c);
    printf("  waited %.1f s; said: %s\n", *took_ms / 1000.0, book->text);
    return s;
}

/* A process that takes the key's lease and "compiles" until killed. */
static pid_t real_holder(const char *dir)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        progcache *c = open_at(dir);
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
            pause();
    }
    close(ready[1]);
    char h = 0;
    CHECK(read(ready[0], &h, 1) == 1 && h == 'h');
    close(ready[0]);
    return pid;
}

static void stop(pid_t pid)
{
    CHECK(kill(pid, SIGKILL) == 0 && waitpid(pid, NULL, 0) == pid);
}

/* The date steps back an hour, then forward two (each a step an NTP
 * daemon or a resumed VM can make): the holder's refresher keeps its
 * 2 s beat on the monotonic clock, so the waiter never takes over. On a
 * wall-clock deadline the forward step stops the refreshes for an hour
 * and the waiter takes over after 6 s. */
static void clock_steps(const char *node[2])
{
    test_clock_shift_set("-3600");
    pid_t holder = real_holder(node[0]);
    pid_t stepper = fork();
    CHECK(stepper >= 0);
    if (stepper == 0) {
        usleep(1500000);
        test_clock_shift_set("3600");
        _exit(0);
    }
    logbook book = {"", 0};
    int took_over;
    double took;
    /* Long enough for a take-over after the refreshes stop (1.5 s, and some
     * more over sshfs, plus the 6 s lease), on old code. */
    progcache_stats s = wait_for(node[1], 15000, &book, &took_over, &took);
    CHECK(waitpid(stepper, NULL, 0) == stepper);
    CHECK(!took_over && s.flight_takeovers == 0 && s.wait_timeouts == 1);
    char names[64];
    snprintf(names, sizeof names, "process %d on this host, ", (int)holder);
    CHECK(strstr(book.text, "gave up waiting for ") && strstr(book.text, names));
    CHECK(!strchr(book.text, '\n'));
    stop(holder);
    test_clock_shift_set("0");
}

/* The key's lease file, written as a holder named host=nb pid=4242 would:
 * its line is short enough that the old message embedded its newline. */
static void write_lease(const char *dir, unsigned long beat)
{
    progcache *c = open_at(dir); /* the cache makes its flight.d/ */
    int made = progcache__flight_lease_dir(c);
    CHECK(made >= 0 && close(made) == 0);
    progcache_close(c);
    unsigned char d[PROGCACHE_SHA256_SIZE];
    CHECK_OK(progcache__sha256_oneshot(d, key, sizeof key - 1));
    char path[4200], line[128];
    snprintf(path, sizeof path, "%s/progcache/flight.d/%02x%02x%02x%02x%02x%02x%02x%02x.lock",
             dir, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
    int n = snprintf(line, sizeof line, "progcache lease 0123456789abcdef host=nb pid=4242 "
                                        "beat=%lu\n", beat);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    CHECK(fd >= 0 && write(fd, line, (size_t)n) == n && close(fd) == 0);
}

/* Another node keeps refreshing the lease and never finishes: the wait
 * ends at its bound and says who held it, not "this host". */
static void refreshed_forever(const char *node[2])
{
    write_lease(node[0], 0);
    pid_t beater = fork();
    CHECK(beater >= 0);
    if (beater == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (unsigned long beat = 1;; beat++) {
            usleep(500000);
            write_lease(node[0], beat);
        }
    }
    logbook book = {"", 0};
    int took_over;
    double took;
    progcache_stats s = wait_for(node[1], 8000, &book, &took_over, &took);
    stop(beater);
    CHECK(!took_over && s.flight_takeovers == 0 && s.wait_timeouts == 1);
    CHECK(took >= 8000.0 && took < 20000.0);
    CHECK(strstr(book.text, "gave up waiting for process 4242 on host nb compiling key "));
    CHECK(!strstr(book.text, "this host") && !strchr(book.text, '\n'));
}

/* Nobody refreshes it: taken over after the lease, said in one line with
 * the time it was unchanged and its holder. */
static void dead_holder(const char *node[2])
{
    write_lease(node[0], 7);
    logbook book = {"", 0};
    int took_over;
    double took;
    progcache_stats s = wait_for(node[1], 30000, &book, &took_over, &took);
    CHECK(took_over && s.flight_takeovers == 1 && s.wait_timeouts == 0);
    CHECK(book.warnings == 1 && !strchr(book.text, '\n'));
    CHECK(strstr(book.text, "its holder, process 4242 on host nb, did not refresh it for "));
    const char *f = strstr(book.text, "refresh it for ");
    double said = f ? atof(f + strlen("refresh it for ")) : -1;
    /* The lease (6 s) at least, and no more than the wait took. */
    CHECK(said >= PROGCACHE__LEASE_MS / 1000.0 && said <= took / 1000.0 + 0.1);
}

int main(int argc, char **argv)
{
    if (!test_clock_shift_on()) {
        printf("test_lease_clock: SKIPPED (run it under the clock_shift shim, from ctest)\n");
        return 77;
    }
    test_clock_shift_works();
    const int nfs = argc > 1 && !strcmp(argv[1], "nfs");
    test_nfs fx = {0};
    char *local = NULL;
    const char *node[2];
    if (nfs) {
        unsetenv("LD_PRELOAD"); /* sshd and sshfs keep the machine's clock */
        test_nfs_start(&fx);
        node[0] = fx.node[0];
        node[1] = fx.node[1];
    } else {
        local = test_mkdtemp("lease-clock");
        node[0] = node[1] = local;
    }
    progcache_file *pf;
    CHECK_OK(progcache_file_open(&pf, node[0], NULL));
    CHECK(!strcmp(progcache_file_flight_mechanism(pf), "lease"));
    progcache_file_close(pf);

    clock_steps(node);
    refreshed_forever(node);
    dead_holder(node);

    unlink(getenv("PROGCACHE_TEST_CLOCK_SHIFT"));
    return test_nfs_end(&fx, nfs, local, "test_lease_clock");
}
