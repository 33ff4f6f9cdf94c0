#include "procs.h"

#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

void test_gate_fork(test_gate *gate, pid_t *pids, size_t n, int (*child)(size_t i, void *ctx),
                    void *ctx)
{
    CHECK(pipe(gate->fd) == 0);
    for (size_t i = 0; i < n; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            char x;
            close(gate->fd[1]);
            /* The gate opens when the parent closes its end: EOF. */
            while (read(gate->fd[0], &x, 1) > 0)
                ;
            close(gate->fd[0]);
            _exit(child(i, ctx));
        }
    }
    close(gate->fd[0]);
}

void test_gate_open(test_gate *gate)
{
    close(gate->fd[1]);
}

void test_reap(const pid_t *pids, size_t n, int *status)
{
    for (size_t i = 0; i < n; i++) {
        int st;
        CHECK(waitpid(pids[i], &st, 0) == pids[i]);
        if (!WIFEXITED(st) || (!status && WEXITSTATUS(st) != 0))
            fprintf(stderr, "child %zu (pid %ld): wait status %d\n", i, (long)pids[i], st);
        CHECK(WIFEXITED(st));
        if (status)
            status[i] = WEXITSTATUS(st);
        else
            CHECK(WEXITSTATUS(st) == 0);
    }
}
