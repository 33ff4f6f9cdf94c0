/* bench_redis: the Redis tier next to the local file tier. Remote hit
 * latency (median, p99), put latency, and get throughput with 1 and 16
 * client processes, printed as markdown tables.
 *
 *   bench_redis [--url URL] [--value-size N] [--entries N] [--samples N]
 *               [--seconds S] [--clients 1,16]
 *
 * Without --url it starts its own redis-server (no persistence) on a free
 * loopback port, with a unix socket beside it, and stops it at the end.
 * Each client process opens its own stores; a process is what a node or a
 * worker is. Uses only the public API. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/progcache.h"

typedef struct config {
    const char *url;
    const char *unix_url;
    size_t value_size;
    size_t entries;
    size_t samples;
    double seconds;
    int clients[8];
    int num_clients;
} config;

static char prefix[64];

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[(size_t)(p * (double)(n - 1) + 0.5)];
}

static void die(const char *what)
{
    fprintf(stderr, "bench_redis: %s: %s\n", what, progcache_error_last());
    exit(1);
}

static void make_key(unsigned char key[32], uint64_t id)
{
    for (int i = 0; i < 4; i++) {
        uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        memcpy(key + 8 * i, &x, 8);
    }
}

/* ---- a private server ---------------------------------------------------- */

static pid_t server_pid;
static char server_dir[256], url_buf[128], unix_url_buf[320];

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", server_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_redis: could not remove %s\n", server_dir);
    }
}

static void start_server(config *cfg)
{
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(server_dir, sizeof server_dir, "%s/bench-redis-XXXXXX", tmp);
    if (!mkdtemp(server_dir)) {
        perror("bench_redis: mkdtemp");
        exit(1);
    }
    int port = bench_free_port("bench_redis");
    char port_s[16], sock[300];
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(sock, sizeof sock, "%s/redis.sock", server_dir);
    pid_t parent = getpid();
    server_pid = fork();
    if (server_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        execlp("redis-server", "redis-server", "--port", port_s, "--bind", "127.0.0.1", "--save",
               "", "--appendonly", "no", "--dir", server_dir, "--unixsocket", sock,
               "--unixsocketperm", "700", "--logfile", "redis.log", (char *)NULL);
        _exit(127);
    }
    atexit(stop_server);
    snprintf(url_buf, sizeof url_buf, "redis://127.0.0.1:%d", port);
    snprintf(unix_url_buf, sizeof unix_url_buf, "unix:%s", sock);
    cfg->url = url_buf;
    cfg->unix_url = unix_url_buf;
    /* Ready when a store can write and read back. */
    for (int i = 0; i < 250; i++) {
        progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
        o.url = cfg->url;
        o.flags = PROGCACHE_REDIS_SYNC_PUT;
        progcache_store *s = NULL;
        progcache_buf b = PROGCACHE_BUF_INIT;
        int ok = progcache_store_redis_new(&s, &o) == PROGCACHE_OK &&
                 progcache_store_put(s, "ping", 4, "x", 1) == PROGCACHE_OK &&
                 progcache_store_get(&b, s, "ping", 4) == PROGCACHE_OK;
        progcache_buf_free(&b);
        progcache_store_free(s);
        if (ok)
            return;
        int status;
        if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
            fprintf(stderr,
                    "bench_redis: redis-server exited (is it installed? see %s/redis.log)\n",
                    server_dir);
            server_pid = 0;
            exit(1);
        }
        usleep(20000);
    }
    fprintf(stderr, "bench_redis: redis-server did not come up\n");
    exit(1);
}

/* ---- stores ----------------------------------------------------------------- */

typedef enum { TIER_FILE, TIER_REDIS, TIER_REDIS_UNIX } tier;

static const char *tier_name[] = {"file (local disk)", "redis (TCP loopback)",
                                  "redis (unix socket)"};

static char file_dir[256];

static progcache_store *open_tier(const config *cfg, tier t, unsigned int flags)
{
    progcache_store *s = NULL;
    if (t == TIER_FILE) {
        progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
        o.flags = PROGCACHE_FILE_NO_FSYNC;
        if (progcache_store_file_new(&s, file_dir, &o))
            die(file_dir);
        return s;
    }
    progcache_redis_options o = PROGCACHE_REDIS_OPTIONS_INIT;
    o.url = t == TIER_REDIS ? cfg->url : cfg->unix_url;
    o.key_prefix = prefix;
    o.flags = flags;
    o.command_timeout_ms = 2000; /* measure the server, not the timeout */
    if (progcache_store_redis_new(&s, &o))
        die(o.url);
    return s;
}

typedef struct latency {
    double hit_med, hit_p99, miss_med, put_med, put_p99, queue_med;
} latency;

static latency measure(const config *cfg, tier t, const unsigned char *value)
{
    latency r = {0};
    double *v = malloc(cfg->samples * sizeof *v);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    unsigned char key[32];
    progcache_store *s = open_tier(cfg, t, PROGCACHE_REDIS_SYNC_PUT);
    unsigned int rng = 7;
    for (size_t i = 0; i < cfg->samples; i++) {
        rng = rng * 1103515245u + 12345u;
        make_key(key, (rng >> 4) % cfg->entries);
        double t0 = now_us();
        int rc = progcache_store_get(&buf, s, key, 32);
        v[i] = now_us() - t0;
        if (rc || buf.size != cfg->value_size)
            die("get (hit)");
    }
    r.hit_med = percentile(v, cfg->samples, 0.5);
    r.hit_p99 = percentile(v, cfg->samples, 0.99);
    for (size_t i = 0; i < cfg->samples; i++) {
        make_key(key, 1000000 + i);
        double t0 = now_us();
        int rc = progcache_store_get(&buf, s, key, 32);
        v[i] = now_us() - t0;
        if (rc != PROGCACHE_ENOTFOUND)
            die("get (miss)");
    }
    r.miss_med = percentile(v, cfg->samples, 0.5);
    /* Puts overwrite 100 keys in turn: the server's memory stays bounded. */
    size_t puts = cfg->samples / 4 < 2000 ? cfg->samples / 4 : 2000;
    puts = puts ? puts : 1;
    for (size_t i = 0; i < puts; i++) {
        make_key(key, 2000000 + i % 100);
        double t0 = now_us();
        if (progcache_store_put(s, key, 32, value, cfg->value_size))
            die("put");
        v[i] = now_us() - t0;
    }
    r.put_med = percentile(v, puts, 0.5);
    r.put_p99 = percentile(v, puts, 0.99);
    progcache_store_free(s);
    if (t != TIER_FILE) {
        /* The default put: queued for the background thread. */
        s = open_tier(cfg, t, 0);
        for (size_t i = 0; i < puts; i++) {
            make_key(key, 3000000 + i % 100);
            double t0 = now_us();
            if (progcache_store_put(s, key, 32, value, cfg->value_size))
                die("put (queued)");
            v[i] = now_us() - t0;
            if (i % 64 == 63)
                progcache_store_flush(s); /* keep the queue from filling */
        }
        r.queue_med = percentile(v, puts, 0.5);
        progcache_store_free(s);
    }
    progcache_buf_free(&buf);
    free(v);
    return r;
}

/* ---- throughput ---------------------------------------------------------------- */

/* K processes each get random keys for cfg->seconds; gets/s over all. */
static double throughput(const config *cfg, tier t, int clients)
{
    int go[2], res[2];
    if (pipe(go) || pipe(res)) {
        perror("bench_redis: pipe");
        exit(1);
    }
    pid_t *pids = calloc((size_t)clients, sizeof *pids);
    for (int c = 0; c < clients; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            close(go[1]);
            progcache_store *s = open_tier(cfg, t, PROGCACHE_REDIS_SYNC_PUT);
            progcache_buf buf = PROGCACHE_BUF_INIT;
            unsigned char key[32];
            unsigned int rng = (unsigned int)c * 7919u + 1;
            char x;
            if (read(go[0], &x, 1) != 0)
                _exit(1);
            double end = now_us() + cfg->seconds * 1e6;
            unsigned long long n = 0;
            while (now_us() < end) {
                rng = rng * 1103515245u + 12345u;
                make_key(key, (rng >> 4) % cfg->entries);
                if (progcache_store_get(&buf, s, key, 32) || buf.size != cfg->value_size)
                    _exit(2);
                n++;
            }
            if (write(res[1], &n, sizeof n) != (ssize_t)sizeof n)
                _exit(3);
            progcache_buf_free(&buf);
            progcache_store_free(s);
            _exit(0);
        }
    }
    close(go[0]);
    close(res[1]);
    usleep(200000); /* let every client connect */
    close(go[1]);
    unsigned long long total = 0, n;
    for (int c = 0; c < clients; c++) {
        int status;
        if (read(res[0], &n, sizeof n) == (ssize_t)sizeof n)
            total += n;
        waitpid(pids[c], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_redis: a client failed (status %d)\n", status);
            exit(1);
        }
    }
    close(res[0]);
    free(pids);
    return (double)total / cfg->seconds;
}

/* ---- main ------------------------------------------------------------------------ */

static const char *json_path; /* --json FILE */

static const char usage_text[] =
    "usage: bench_redis [--url URL] [--value-size N] [--entries N] [--samples N]\n"
    "                   [--seconds S] [--clients 1,16] [--json FILE]\n"
    "\n"
    "The Redis tier next to the file tier: hit and put latency, get throughput\n"
    "(a redis-server on PATH unless --url).\n";

static void usage(void)
{
    fputs(usage_text, stderr);
    exit(2);
}

static void parse_args(config *cfg, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--url"))
            cfg->url = v;
        else if (!strcmp(a, "--json"))
            json_path = v;
        else if (!strcmp(a, "--value-size"))
            cfg->value_size = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--entries"))
            cfg->entries = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--samples"))
            cfg->samples = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--seconds"))
            cfg->seconds = atof(v);
        else if (!strcmp(a, "--clients")) {
            cfg->num_clients = 0;
            for (const char *p = v; *p && cfg->num_clients < 8;) {
                cfg->clients[cfg->num_clients++] = atoi(p);
                p += strcspn(p, ",");
                if (*p == ',')
                    p++;
            }
        } else
            usage();
        i++;
    }
    if (!cfg->entries || !cfg->samples || cfg->seconds <= 0 || !cfg->num_clients)
        usage();
}

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    config cfg = {NULL, NULL, 65536, 1000, 20000, 3.0, {1, 16}, 2};
    parse_args(&cfg, argc, argv);

    progcache_redis_options probe = PROGCACHE_REDIS_OPTIONS_INIT;
    progcache_store *p = NULL;
    probe.url = "redis://127.0.0.1:1";
    if (progcache_store_redis_new(&p, &probe) == PROGCACHE_EREMOTE) {
        printf("bench_redis: progcache was built without hiredis; nothing to measure\n");
        return 0;
    }
    progcache_store_free(p);
    snprintf(prefix, sizeof prefix, "bench:%d:", (int)getpid());
    if (!cfg.url)
        start_server(&cfg);

    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(file_dir, sizeof file_dir, "%s/bench-redis-files-XXXXXX", tmp);
    if (!mkdtemp(file_dir)) {
        perror("bench_redis: mkdtemp");
        return 1;
    }
    unsigned char *value = malloc(cfg.value_size + 1);
    for (size_t i = 0; i < cfg.value_size; i++)
        value[i] = (unsigned char)(i * 131u >> 3);

    int num_tiers = cfg.unix_url ? 3 : 2;
    unsigned char key[32];
    for (int t = 0; t < num_tiers; t += t == 0 ? 1 : 2) { /* file, then one Redis fill */
        progcache_store *s = open_tier(&cfg, (tier)t, PROGCACHE_REDIS_SYNC_PUT);
        for (size_t i = 0; i < cfg.entries; i++) {
            make_key(key, i);
            if (progcache_store_put(s, key, 32, value, cfg.value_size))
                die("fill");
        }
        progcache_store_free(s);
    }

    latency lat[3];
    double tput[3][8];
    for (int t = 0; t < num_tiers; t++) {
        lat[t] = measure(&cfg, (tier)t, value);
        for (int c = 0; c < cfg.num_clients; c++)
            tput[t][c] = throughput(&cfg, (tier)t, cfg.clients[c]);
    }

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_redis: %zu entries of %zu bytes, %zu samples, %.1f s per throughput run, "
           "%ld cores; file puts without fsync\n\n",
           cfg.entries, cfg.value_size, cfg.samples, cfg.seconds, cores);
    printf("| tier | hit median (us) | hit p99 (us) | miss median (us) | put median (us) "
           "| put p99 (us) | queued put median (us) |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (int t = 0; t < num_tiers; t++) {
        printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | ", tier_name[t], lat[t].hit_med,
               lat[t].hit_p99, lat[t].miss_med, lat[t].put_med, lat[t].put_p99);
        if (t == TIER_FILE)
            printf("- |\n");
        else
            printf("%.1f |\n", lat[t].queue_med);
    }
    printf("\n| tier |");
    for (int c = 0; c < cfg.num_clients; c++)
        printf(" %d client%s (gets/s) | %d client%s (MB/s) |", cfg.clients[c],
               cfg.clients[c] == 1 ? "" : "s", cfg.clients[c], cfg.clients[c] == 1 ? "" : "s");
    printf("\n|---|");
    for (int c = 0; c < cfg.num_clients; c++)
        printf("---:|---:|");
    printf("\n");
    for (int t = 0; t < num_tiers; t++) {
        printf("| %s |", tier_name[t]);
        for (int c = 0; c < cfg.num_clients; c++)
            printf(" %.0f | %.0f |", tput[t][c], tput[t][c] * (double)cfg.value_size / 1e6);
        printf("\n");
    }

    FILE *json = bench_json_begin(json_path, "redis", argc, argv);
    if (json) {
        fprintf(json, "{\"entries\": %zu, \"value_size\": %zu, \"samples\": %zu, \"tiers\": [",
                cfg.entries, cfg.value_size, cfg.samples);
        for (int t = 0; t < num_tiers; t++) {
            fprintf(json,
                    "%s{\"tier\": \"%s\", \"hit_median_us\": %.2f, \"hit_p99_us\": %.2f, "
                    "\"miss_median_us\": %.2f, \"put_median_us\": %.2f, \"put_p99_us\": %.2f, ",
                    t ? ", " : "", tier_name[t], lat[t].hit_med, lat[t].hit_p99, lat[t].miss_med,
                    lat[t].put_med, lat[t].put_p99);
            if (t == TIER_FILE)
                fprintf(json, "\"queued_put_median_us\": null, \"throughput\": [");
            else
                fprintf(json, "\"queued_put_median_us\": %.2f, \"throughput\": [",
                        lat[t].queue_med);
            for (int c = 0; c < cfg.num_clients; c++)
                fprintf(json, "%s{\"clients\": %d, \"gets_per_s\": %.0f}", c ? ", " : "",
                        cfg.clients[c], tput[t][c]);
            fputs("]}", json);
        }
        fputs("]}", json);
        bench_json_end(json, json_path);
    }

    /* Leave nothing behind on a server we did not start. */
    progcache_store *s = open_tier(&cfg, TIER_REDIS, PROGCACHE_REDIS_SYNC_PUT);
    progcache_store_clear(s);
    progcache_store_free(s);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", file_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_redis: could not remove %s\n", file_dir);
    free(value);
    return 0;
}
