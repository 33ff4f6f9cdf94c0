/* Child processes for the tests that race processes: started together at a
 * gate, and reaped with their exit statuses. */
#ifndef PROGCACHE_TEST_PROCS_H
#define PROGCACHE_TEST_PROCS_H

#include <stddef.h>
#include <sys/types.h>

/* Fork n children into pids; each waits until test_gate_open, then runs
 * child(i, ctx) and _exits with what it returned (the parent's exit
 * handlers never run in a child). */
typedef struct test_gate {
    int fd[2];
} test_gate;
void test_gate_fork(test_gate *gate, pid_t *pids, size_t n, int (*child)(size_t i, void *ctx),
                    void *ctx);
/* Let every child of the gate go at once. */
void test_gate_open(test_gate *gate);

/* Wait for each of the n children: each must have exited, not died of a
 * signal (checked, naming the child); its exit status goes to status[i]
 * (status may be NULL: then each must have exited 0). */
void test_reap(const pid_t *pids, size_t n, int *status);

#endif
