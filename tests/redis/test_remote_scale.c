/* The remote tier at fleet scale, counted (issue 15, "Scale proof"; the
 * timed run is bench/bench_fleet.c): nodes x processes, each node a cache
 * directory of its own, every process started together through
 * progcache_compile_or_load with NVRTC (compile only, no GPU), one shared
 * redis-server.
 *  - one cold program: exactly one NVRTC compile in the whole fleet;
 *  - 20 cold programs, every process needing all of them (each starting
 *    at a different one): exactly 20 compiles;
 *  - without the remote tier: exactly one compile per node.
 * Every process checks that it got the reference bytes. */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "redis_fixture.h"
#include "remote_node.h"

#define NODES 4
#define PROCS 4
#define PROGRAMS 20

static test_redis server;
static char *scratch;
static test_kernel kernels[PROGRAMS];
static progcache_buf refs[PROGRAMS];

/* A process of node `node`: after the go signal, get `count` of the n
 * programs, start, start + 1, ... (mod n). Exit status 10 + the compiles
 * it made; 1 on an error or wrong bytes. */
static int child(const char *round, int node, int go_fd, int n, int start, int count, int remote)
{
    char go;
    if (read(go_fd, &go, 1) != 1)
        return 1;
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = server.url;
    /* Sixteen processes on a small shared machine: a slow reply is not a
     * failure here. */
    ro.command_timeout_ms = 5000;
    ro.connect_timeout_ms = 5000;
    char name[256];
    snprintf(name, sizeof name, "%s-node%d", round, node);
    progcache *c = test_node_open(scratch, name, remote ? &ro : NULL, NULL);
    int compiles = 0;
    for (int i = 0; i < count; i++) {
        int k = (start + i) % n;
        progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
        if (progcache_compile_or_load(&r, c, &kernels[k].program) != PROGCACHE_OK) {
            fprintf(stderr, "test_remote_scale: %s\n", progcache_error_last());
            return 1;
        }
        compiles += r.status == PROGCACHE_STATUS_MISS;
        int same = r.artifact.size == refs[k].size &&
                   !memcmp(r.artifact.data, refs[k].data, refs[k].size);
        progcache_program_result_release(&r);
        if (!same) {
            fprintf(stderr, "test_remote_scale: wrong bytes for program %d\n", k);
            return 1;
        }
    }
    progcache_close(c);
    return 10 + compiles;
}

/* Start NODES x PROCS processes together; the total of their compiles. */
static int fleet(const char *round, int n, int each, int remote)
{
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t pids[NODES * PROCS];
    for (int p = 0; p < NODES * PROCS; p++) {
        pids[p] = fork();
        CHECK(pids[p] >= 0);
        if (pids[p] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(go[1]);
            _exit(child(round, p / PROCS, go[0], n, p % n, each, remote));
        }
    }
    close(go[0]);
    char signal_bytes[NODES * PROCS];
    memset(signal_bytes, 'g', sizeof signal_bytes);
    CHECK(write(go[1], signal_bytes, sizeof signal_bytes) == (ssize_t)sizeof signal_bytes);
    close(go[1]);
    int total = 0;
    for (int p = 0; p < NODES * PROCS; p++) {
        int status;
        CHECK(waitpid(pids[p], &status, 0) == pids[p]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) >= 10);
        total += WEXITSTATUS(status) - 10;
    }
    return total;
}

static void init_kernels(const char *round)
{
    for (int k = 0; k < PROGRAMS; k++) {
        char name[64];
        snprintf(name, sizeof name, "scale_%s_%d", round, k);
        test_kernel_init(&kernels[k], name);
        progcache_buf_free(&refs[k]);
        test_kernel_reference(&refs[k], &kernels[k]);
    }
}

int main(void)
{
    test_redis_require();
    scratch = test_mkdtemp("remote-scale");
    test_redis_start(&server, NULL);

    init_kernels("one");
    int compiles = fleet("one", 1, 1, 1);
    if (compiles != 1)
        fprintf(stderr, "one program, %d nodes x %d processes: %d compiles\n", NODES, PROCS,
                compiles);
    CHECK(compiles == 1);

    init_kernels("twenty");
    compiles = fleet("twenty", PROGRAMS, PROGRAMS, 1);
    if (compiles != PROGRAMS)
        fprintf(stderr, "%d programs: %d compiles\n", PROGRAMS, compiles);
    CHECK(compiles == PROGRAMS);

    /* Without the remote tier, each node compiles once. */
    init_kernels("local");
    compiles = fleet("local", 1, 1, 0);
    CHECK(compiles == NODES);

    for (int k = 0; k < PROGRAMS; k++)
        progcache_buf_free(&refs[k]);
    test_redis_stop(&server);
    test_rmtree(scratch);
    free(scratch);
    printf("test_remote_scale: ok\n");
    return 0;
}
