/* bench_fleet: a fleet on one shared remote tier (issue 15, "Scale proof";
 * any tier by URL since issue 34: bench/bench_fleet_s3.py runs it on S3).
 * NODES nodes (a cache directory each) x PROCS processes each, all started
 * together on cold programs, compile only (PROGCACHE_PROGRAM_NO_LOAD, the
 * CUBIN path: no GPU needed). Counts the NVRTC compiles of the whole fleet
 * and measures the wall time from the start signal until every process has
 * its artifact, with the remote tier and without it (where each node
 * compiles for itself), for 1 program and for 20 (process i needs program
 * i mod 20).
 *
 *   bench_fleet [--nodes 8] [--procs 8] [--rounds 3] [--arch sm_90] [--url URL]
 *
 * Without --url it starts its own redis-server (no persistence) on a free
 * loopback port; a URL other than redis:// is opened as PROGCACHE_REMOTE
 * would be (http://, https://, s3://: credentials from the environment). Prints a markdown table of medians over the rounds; every
 * round uses new program texts and new directories (cold everywhere). The
 * tests that assert the counts are tests/redis/test_remote_scale.c. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/cuda.h"
#include "progcache/progcache.h"
#include "progcache/remote.h"


static pid_t server_pid;

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

/* A redis-server of our own on a free loopback port; its URL in url. */
static void start_server(char *url, size_t size, const char *dir)
{
    int port = bench_free_port("bench_fleet");
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    server_pid = fork();
    if (server_pid == 0) {
        char log[512];
        snprintf(log, sizeof log, "%s/redis.log", dir);
        execlp("redis-server", "redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save",
               "", "--appendonly", "no", "--dir", dir, "--logfile", log, "--loglevel", "warning",
               (char *)NULL);
        _exit(127);
    }
    atexit(stop_server);
    snprintf(url, size, "redis://127.0.0.1:%d", port);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 500; i++) { /* up to 5 s */
        int c = socket(AF_INET, SOCK_STREAM, 0);
        a.sin_port = htons((uint16_t)port);
        int ok = connect(c, (struct sockaddr *)&a, sizeof a) == 0;
        close(c);
        if (ok)
            return;
        if (waitpid(server_pid, NULL, WNOHANG) == server_pid) {
            fprintf(stderr, "bench_fleet: redis-server exited (is it installed?)\n");
            exit(1);
        }
        usleep(10000);
    }
    fprintf(stderr, "bench_fleet: redis-server did not come up\n");
    exit(1);
}

typedef struct config {
    int nodes, procs, rounds;
    char arch_opt[64];
    const char *url;
    char root[256];
} config;

/* A process: wait for the go byte, get program `prog` of this round on
 * its node. Exit 10 if it compiled, 11 if not (a hit, after waiting or
 * not), 1 on an error. */
static int child(const config *cfg, const char *dir, int remote, int go_fd, const char *salt,
                 int prog)
{
    char go;
    if (read(go_fd, &go, 1) != 1)
        return 1;
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = cfg->url;
    /* 64 processes on a small machine: a slow reply is not a failure. */
    ro.connect_timeout_ms = 5000;
    ro.command_timeout_ms = 5000;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = remote ? 0 : PROGCACHE_NO_REMOTE;
    int redis = !strncmp(cfg->url, "redis://", 8);
    opts.remote = remote && redis ? &ro : NULL;
    opts.remote_url = remote && !redis ? cfg->url : NULL;
    progcache *cache;
    if (progcache_open(&cache, dir, &opts)) {
        fprintf(stderr, "bench_fleet: %s\n", progcache_error_last());
        return 1;
    }
    char *src = malloc(sizeof bench_matmul_source + 96);
    snprintf(src, sizeof bench_matmul_source + 96, "// %s program %d\n%s", salt, prog, bench_matmul_source);
    const char *opt[] = {cfg->arch_opt, "--std=c++17"};
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = src;
    p.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    p.nvrtc.options = opt;
    p.nvrtc.num_options = 2;
    p.flags = PROGCACHE_PROGRAM_NO_LOAD;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    int rc = progcache_compile_or_load(&r, cache, &p);
    int compiled = r.status == PROGCACHE_STATUS_MISS;
    int got = r.artifact.size > 0;
    progcache_program_result_release(&r);
    progcache_close(cache);
    free(src);
    if (rc || !got) {
        fprintf(stderr, "bench_fleet: %s\n", rc ? progcache_error_last() : "no artifact");
        return 1;
    }
    return compiled ? 10 : 11;
}

/* One round: every process of the fleet at once. */
static void round_once(const config *cfg, int programs, int remote, int round, double *wall,
                       int *compiles)
{
    int go[2];
    if (pipe(go) != 0) {
        perror("pipe");
        exit(1);
    }
    char salt[64];
    snprintf(salt, sizeof salt, "round %d of %d programs, %s, pid %ld", round, programs,
             remote ? "remote" : "local", (long)getpid());
    int total = cfg->nodes * cfg->procs;
    pid_t *pids = calloc((size_t)total, sizeof *pids);
    for (int i = 0; i < total; i++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/r%d-p%d-%s-node%d", cfg->root, round, programs,
                 remote ? "remote" : "local", i / cfg->procs);
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            _exit(child(cfg, dir, remote, go[0], salt, i % programs));
        }
    }
    close(go[0]);
    usleep(300000); /* let every process reach its read */
    char *bytes = malloc((size_t)total);
    memset(bytes, 'g', (size_t)total);
    double t0 = bench_now_us() / 1e3;
    if (write(go[1], bytes, (size_t)total) != total) {
        perror("write");
        exit(1);
    }
    *compiles = 0;
    for (int i = 0; i < total; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || (WEXITSTATUS(status) != 10 && WEXITSTATUS(status) != 11)) {
            fprintf(stderr, "bench_fleet: a process failed\n");
            exit(1);
        }
        *compiles += WEXITSTATUS(status) == 10;
    }
    *wall = bench_now_us() / 1e3 - t0;
    close(go[1]);
    free(bytes);
    free(pids);
}

static const char usage_text[] =
    "usage: bench_fleet [--nodes N] [--procs N] [--rounds N] [--arch sm_XY] [--url URL]\n"
    "\n"
    "A fleet on one shared remote tier: NODES x PROCS processes on cold programs,\n"
    "compiles counted (no GPU needed). Without --url, a redis-server of its own\n"
    "(on PATH); --url redis://, http(s):// or s3://... (credentials from the\n"
    "environment, as PROGCACHE_REMOTE's).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    config cfg = {.nodes = 8, .procs = 8, .rounds = 3};
    const char *arch = "sm_90";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            cfg.nodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--procs") && i + 1 < argc)
            cfg.procs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            cfg.rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
            arch = argv[++i];
        else if (!strcmp(argv[i], "--url") && i + 1 < argc)
            cfg.url = argv[++i];
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    if (cfg.nodes < 1 || cfg.procs < 1 || cfg.nodes * cfg.procs > 512 || cfg.rounds < 1) {
        fprintf(stderr, "bench_fleet: --nodes and --procs >= 1, at most 512 processes, "
                        "--rounds >= 1\n");
        return 2;
    }
    snprintf(cfg.arch_opt, sizeof cfg.arch_opt, "-arch=%s", arch);
    snprintf(cfg.root, sizeof cfg.root, "/tmp/bench-fleet-XXXXXX");
    if (!mkdtemp(cfg.root))
        return 1;
    char url[128];
    if (!cfg.url) {
        start_server(url, sizeof url, cfg.root);
        cfg.url = url;
    }
    int total = cfg.nodes * cfg.procs;
    /* The URL's scheme names the tier: never its host, path or query. */
    char scheme[16];
    snprintf(scheme, sizeof scheme, "%.*s", (int)strcspn(cfg.url, ":"), cfg.url);
    printf("%d nodes x %d processes (%d, started together), compile only (%s, CUBIN), one "
           "shared %s tier; %d rounds, medians\n\n",
           cfg.nodes, cfg.procs, total, arch, scheme, cfg.rounds);
    printf("| programs | tier | NVRTC compiles | time to all ready (ms) |\n"
           "|---:|---|---:|---:|\n");
    const int programs[] = {1, 20};
    for (size_t p = 0; p < 2; p++) {
        for (int remote = 1; remote >= 0; remote--) {
            double *walls = calloc((size_t)cfg.rounds, sizeof *walls);
            double *counts = calloc((size_t)cfg.rounds, sizeof *counts);
            for (int r = 0; r < cfg.rounds; r++) {
                int c;
                round_once(&cfg, programs[p], remote, r, &walls[r], &c);
                counts[r] = c;
            }
            qsort(walls, (size_t)cfg.rounds, sizeof *walls, bench_cmp_double);
            qsort(counts, (size_t)cfg.rounds, sizeof *counts, bench_cmp_double);
            printf("| %d | %s | %.0f (min %.0f, max %.0f) | %.0f |\n", programs[p],
                   remote ? "home + remote" : "home only (no remote tier)",
                   counts[cfg.rounds / 2], counts[0], counts[cfg.rounds - 1],
                   walls[cfg.rounds / 2]);
            fflush(stdout);
            free(walls);
            free(counts);
        }
    }
    stop_server();
    bench_remove_tree(cfg.root);
    return 0;
}
