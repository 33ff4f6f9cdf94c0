/* The Redis tier inside a cache handle: progcache_open with a remote tier
 * (from options and from $PROGCACHE_REMOTE), read-through from another
 * node's directory, remote counters in the directory's statistics, a
 * server that is down never failing an open (an unusable PROGCACHE_REMOTE
 * does), and cross-node single-flight
 * through progcache_compile_or_load: several "nodes" (processes with their
 * own cache directories, one Redis) missing one kernel compile it once. */
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "procs.h"
#include "progcache/cuda.h"
#include "progcache/remote.h"
#include "progcache/stats.h"
#include "redis_fixture.h"

#define NODES 4

static test_redis server;
static char *scratch;

static progcache *open_node(const char *name, const progcache_redis_options *remote)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", scratch, name);
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_NO_FSYNC;
    opts.remote = remote;
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, &opts));
    return c;
}

static void test_read_through(void)
{
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = server.url;
    progcache *a = open_node("a", &ro), *b = open_node("b", &ro);
    CHECK_OK(progcache_put(a, "k", 1, "compiled", 8));
    CHECK_OK(progcache_flush(a));
    progcache_close(a); /* drains a's remote writes */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, b, "k", 1));
    CHECK(buf.size == 8 && !memcmp(buf.data, "compiled", 8));
    uint64_t count = 0;
    CHECK_OK(progcache_count(&count, b)); /* b's own directory got a copy */
    CHECK(count == 1);
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, b));
    CHECK(st.remote_hits == 1 && st.hits == 1);
    progcache_close(b);
    /* Closed and reopened without the remote tier: the local copy serves. */
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_NO_REMOTE;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/b", scratch);
    CHECK_OK(progcache_open(&b, dir, &opts));
    CHECK_OK(progcache_get(&buf, b, "k", 1));
    CHECK_OK(progcache_stats_get(&st, b));
    CHECK(st.remote_hits == 1); /* persisted across processes and opens */
    progcache_close(b);
    progcache_buf_free(&buf);
}

static void test_environment(void)
{
    char secret_path[4096];
    snprintf(secret_path, sizeof secret_path, "%s/secret", scratch);
    FILE *f = fopen(secret_path, "w");
    CHECK(f && fputs("0123456789abcdef0123456789abcdef\n", f) >= 0 && fclose(f) == 0);
    CHECK(chmod(secret_path, 0600) == 0); /* readable by all users: refused */
    setenv("PROGCACHE_REMOTE", server.url, 1);
    setenv("PROGCACHE_REMOTE_SECRET_FILE", secret_path, 1);
    progcache *c = open_node("env1", NULL);
    CHECK_OK(progcache_put(c, "env-key", 7, "value", 5));
    progcache_close(c);
    c = open_node("env2", NULL);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_get(&buf, c, "env-key", 7)); /* through Redis, tagged */
    progcache_close(c);
    /* Another secret: the tagged value is rejected, a miss. */
    f = fopen(secret_path, "w");
    CHECK(f && fputs("another secret, sixteen bytes+", f) >= 0 && fclose(f) == 0);
    c = open_node("env3", NULL);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, c, "env-key", 7));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, c));
    CHECK(st.remote_rejected == 1);
    progcache_close(c);
    /* A server that is down never stops a program: its gets are misses. */
    char down[64];
    snprintf(down, sizeof down, "redis://127.0.0.1:%d", test_free_port());
    setenv("PROGCACHE_REMOTE", down, 1);
    c = open_node("env4", NULL);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, c, "env-key", 7));
    progcache_close(c);
    /* A PROGCACHE_REMOTE that cannot be used fails the open, naming the
     * variable: left out silently, the program would run without the
     * shared tier it was told to use. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/env5", scratch);
    setenv("PROGCACHE_REMOTE", "redis://", 1);
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, dir, NULL));
    CHECK(c == NULL);
    CHECK(strstr(progcache_error_last(), "progcache_open: PROGCACHE_REMOTE: Redis URL "
                                         "\"redis://\": the host is empty") ==
          progcache_error_last());
    /* So does an explicit bad remote, naming it. */
    progcache_redis_options bad = PROGCACHE_REDIS_OPTIONS_INIT;
    bad.url = "http://nope";
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.remote = &bad;
    CHECK(progcache_open(&c, dir, &opts) != PROGCACHE_OK);
    CHECK(strstr(progcache_error_last(), "remote") != NULL);
    unsetenv("PROGCACHE_REMOTE");
    unsetenv("PROGCACHE_REMOTE_SECRET_FILE");
    progcache_buf_free(&buf);
}

static const char kernel[] =
    "extern \"C\" __global__ void cross_node(float *a){ a[threadIdx.x] += 1.0f; }\n";
static const char *const kernel_opts[] = {"-arch=sm_90"};

static int node(int i)
{
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = server.url;
    char name[32];
    snprintf(name, sizeof name, "node%d", i);
    progcache *c = open_node(name, &ro);
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = kernel;
    p.nvrtc.options = kernel_opts;
    p.nvrtc.num_options = 1;
    p.flags = PROGCACHE_PROGRAM_NO_LOAD;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    int rc = progcache_compile_or_load(&r, c, &p);
    int compiled = r.status == PROGCACHE_STATUS_MISS;
    progcache_program_result_release(&r);
    progcache_close(c);
    return rc ? 1 : compiled ? 10 : 11;
}

static int node_child(size_t i, void *ctx)
{
    (void)ctx;
    return node((int)i);
}

static void test_cross_node_single_flight(void)
{
    test_gate gate;
    pid_t pids[NODES];
    int status[NODES], compiles = 0;
    test_gate_fork(&gate, pids, NODES, node_child, NULL);
    test_gate_open(&gate);
    test_reap(pids, NODES, status);
    for (int i = 0; i < NODES; i++) {
        CHECK(status[i] == 10 || status[i] == 11);
        compiles += status[i] == 10;
    }
    printf("cross-node: %d nodes, %d compile(s)\n", NODES, compiles);
    CHECK(compiles == 1);
}

int main(void)
{
    test_redis_require();
    scratch = test_mkdtemp("remote");
    test_redis_start(&server, NULL);
    test_read_through();
    test_environment();
    test_cross_node_single_flight();
    test_redis_stop(&server);
    test_rmtree(scratch);
    free(scratch);
    printf("test_remote_tier: all passed\n");
    return 0;
}
