#include "redis_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "sha256.h"

/* ---- clocks ------------------------------------------------------------- */

void test_in_child(void (*fn)(void *ctx, void *out), void *ctx, void *out, size_t out_size)
{
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        fn(ctx, out);
        _exit(write(p[1], out, out_size) == (ssize_t)out_size ? 0 : 1);
    }
    close(p[1]);
    ssize_t got = read(p[0], out, out_size);
    close(p[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* no signal, no abort */
    CHECK(got == (ssize_t)out_size);
}

unsigned char *test_pattern(size_t n, unsigned int seed)
{
    unsigned char *p = malloc(n + 1);
    CHECK(p != NULL);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
    return p;
}

double test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void test_sleep_ms(unsigned int ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- never leave a server behind ----------------------------------------- */

#define MAX_SERVERS 8
static pid_t servers[MAX_SERVERS];
static pid_t owner; /* the test process; forked children must not kill */

static void kill_all(void)
{
    if (getpid() != owner)
        return;
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] > 0) {
            kill(servers[i], SIGKILL);
            servers[i] = 0;
        }
}

static void on_abort(int sig)
{
    kill_all(); /* kill() is async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void track(pid_t pid, pid_t old)
{
    if (!owner) {
        owner = getpid();
        atexit(kill_all);
        signal(SIGABRT, on_abort);
        signal(SIGSEGV, on_abort);
    }
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] == old) {
            servers[i] = pid;
            return;
        }
}

/* ---- finding the server ---------------------------------------------------- */

static char server_path[512];

static int find_server(void)
{
    const char *env = getenv("PROGCACHE_REDIS_SERVER");
    if (env && *env) {
        snprintf(server_path, sizeof server_path, "%s", env);
        return access(server_path, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/bin:/usr/local/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(server_path, sizeof server_path, "%s/redis-server", d);
        if (access(server_path, X_OK) == 0)
            return 1;
    }
    return 0;
}

void test_redis_require(void)
{
    progcache_redis_options opts = PROGCACHE_REDIS_OPTIONS_INIT;
    progcache_store *s = NULL;
    opts.url = "redis://127.0.0.1:1";
    int rc = progcache_store_redis_new(&s, &opts);
    progcache_store_free(s);
    if (rc == PROGCACHE_EREMOTE) {
        fprintf(stderr, "SKIPPED: progcache was built without hiredis (%s)\n",
                progcache_error_last());
        exit(TEST_SKIP_CODE);
    }
    CHECK_OK(rc);
    if (!find_server()) {
        fprintf(stderr, "SKIPPED: no redis-server found (install the redis-server package, "
                        "or set PROGCACHE_REDIS_SERVER to its path)\n");
        exit(TEST_SKIP_CODE);
    }
}

int test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    socklen_t len = sizeof a;
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* ---- starting and stopping ------------------------------------------------- */

static pid_t spawn(const test_redis *r)
{
    char port[16], log[600];
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    const char *argv[32];
    int n = 0;
    argv[n++] = server_path;
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--dir";
    argv[n++] = r->dir;
    argv[n++] = "--unixsocket";
    argv[n++] = r->sock;
    argv[n++] = "--unixsocketperm";
    argv[n++] = "700";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--logfile";
    argv[n++] = log;
    if (r->password) {
        argv[n++] = "--requirepass";
        argv[n++] = r->password;
    }
    argv[n] = NULL;

    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* Die with the test, however it ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        execv(server_path, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* 0 when the server answers PING; -1 when it exited (port taken?). */
static int wait_ready(test_redis *r)
{
    for (int i = 0; i < 500; i++) {
        int status;
        if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
            track(0, r->pid);
            r->pid = 0;
            return -1;
        }
        const char *ping[] = {"PING"};
        test_reply *reply = test_redis_cmd(r, 1, ping, NULL);
        int ok = reply && reply->type == '+';
        test_reply_free(reply);
        if (ok)
            return 0;
        test_sleep_ms(20);
    }
    return -1;
}

static void set_urls(test_redis *r)
{
    if (r->password)
        snprintf(r->url, sizeof r->url, "redis://:%s@127.0.0.1:%d", r->password, r->port);
    else
        snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
    snprintf(r->unix_url, sizeof r->unix_url, "unix:%s%s%s", r->sock,
             r->password ? "?password=" : "", r->password ? r->password : "");
}

void test_redis_start(test_redis *r, const char *password)
{
    memset(r, 0, sizeof *r);
    r->password = password;
    r->dir = test_mkdtemp("redis");
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    if (!server_path[0])
        CHECK(find_server());
    /* The port is free when picked but may be taken before the server
     * binds it; then the server exits and another port is tried. */
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = test_free_port();
        set_urls(r);
        r->pid = spawn(r);
        track(r->pid, 0);
        if (wait_ready(r) == 0)
            return;
        if (r->pid) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            track(0, r->pid);
            r->pid = 0;
        }
    }
    fprintf(stderr, "could not start %s (see %s/redis.log)\n", server_path, r->dir);
    CHECK(!"redis-server started");
}

void test_redis_kill(test_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    track(0, r->pid);
    r->pid = 0;
}

void test_redis_restart(test_redis *r)
{
    test_redis_kill(r);
    for (int attempt = 0; attempt < 50; attempt++) {
        r->pid = spawn(r);
        track(r->pid, 0);
        if (wait_ready(r) == 0)
            return;
        test_sleep_ms(100); /* the old socket may still hold the port */
    }
    CHECK(!"redis-server restarted on the same port");
}

void test_redis_stop(test_redis *r)
{
    test_redis_kill(r);
    if (r->dir) {
        test_rmtree(r->dir);
        free(r->dir);
        r->dir = NULL;
    }
}

void test_redis_pause(test_redis *r) { CHECK(kill(r->pid, SIGSTOP) == 0); }
void test_redis_resume(test_redis *r) { CHECK(kill(r->pid, SIGCONT) == 0); }

/* ---- the raw client --------------------------------------------------------- */

typedef struct reader {
    int fd;
    char buf[8192];
    size_t pos, end;
} reader;

static int fill(reader *rd)
{
    if (rd->pos < rd->end)
        return 0;
    ssize_t n;
    do
        n = read(rd->fd, rd->buf, sizeof rd->buf);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    rd->pos = 0;
    rd->end = (size_t)n;
    return 0;
}

static int read_exact(reader *rd, char *out, size_t len)
{
    while (len) {
        if (fill(rd))
            return -1;
        size_t n = rd->end - rd->pos < len ? rd->end - rd->pos : len;
        memcpy(out, rd->buf + rd->pos, n);
        rd->pos += n;
        out += n;
        len -= n;
    }
    return 0;
}

/* A line without its CRLF, NUL-terminated. */
static int read_line(reader *rd, char *out, size_t size)
{
    size_t n = 0;
    for (;;) {
        char ch;
        if (read_exact(rd, &ch, 1))
            return -1;
        if (ch == '\r')
            continue;
        if (ch == '\n')
            break;
        if (n + 1 < size)
            out[n++] = ch;
    }
    out[n] = '\0';
    return 0;
}

static test_reply *parse(reader *rd)
{
    char line[1024];
    if (read_line(rd, line, sizeof line))
        return NULL;
    test_reply *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    r->type = line[0];
    switch (line[0]) {
    case '+':
    case '-':
        r->len = strlen(line + 1);
        r->str = strdup(line + 1);
        break;
    case ':':
        r->integer = strtoll(line + 1, NULL, 10);
        break;
    case '$': {
        long long n = strtoll(line + 1, NULL, 10);
        if (n < 0)
            break;
        r->len = (size_t)n;
        r->str = malloc(r->len + 2);
        CHECK(r->str != NULL);
        if (read_exact(rd, r->str, r->len + 2)) {
            test_reply_free(r);
            return NULL;
        }
        r->str[r->len] = '\0';
        break;
    }
    case '*': {
        long long n = strtoll(line + 1, NULL, 10);
        if (n <= 0)
            break;
        r->elements = (size_t)n;
        r->element = calloc(r->elements, sizeof *r->element);
        CHECK(r->element != NULL);
        for (size_t i = 0; i < r->elements; i++)
            if (!(r->element[i] = parse(rd))) {
                test_reply_free(r);
                return NULL;
            }
        break;
    }
    default:
        test_reply_free(r);
        return NULL;
    }
    return r;
}

void test_reply_free(test_reply *reply)
{
    if (!reply)
        return;
    for (size_t i = 0; i < reply->elements; i++)
        test_reply_free(reply->element[i]);
    free(reply->element);
    free(reply->str);
    free(reply);
}

int test_send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static test_reply *roundtrip(reader *rd, int argc, const char **argv, const size_t *lens)
{
    char head[64];
    snprintf(head, sizeof head, "*%d\r\n", argc);
    if (test_send_all(rd->fd, head, strlen(head)))
        return NULL;
    for (int i = 0; i < argc; i++) {
        size_t len = lens ? lens[i] : strlen(argv[i]);
        snprintf(head, sizeof head, "$%zu\r\n", len);
        if (test_send_all(rd->fd, head, strlen(head)) || test_send_all(rd->fd, argv[i], len) ||
            test_send_all(rd->fd, "\r\n", 2))
            return NULL;
    }
    return parse(rd);
}

test_reply *test_redis_cmd(const test_redis *r, int argc, const char **argv,
                           const size_t *lens)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct timeval tv = {10, 0}; /* never hang a test on a paused server */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    test_reply *reply = NULL;
    reader *rd = calloc(1, sizeof *rd);
    CHECK(rd != NULL);
    rd->fd = fd;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        goto done;
    if (r->password) {
        const char *auth[] = {"AUTH", r->password};
        test_reply *ok = roundtrip(rd, 2, auth, NULL);
        int good = ok && ok->type == '+';
        test_reply_free(ok);
        if (!good)
            goto done;
    }
    if (r->db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->db);
        const char *select[] = {"SELECT", db};
        test_reply_free(roundtrip(rd, 2, select, NULL));
    }
    reply = roundtrip(rd, argc, argv, lens);

done:
    close(fd);
    free(rd);
    return reply;
}

long long test_redis_int(const test_redis *r, int argc, const char **argv)
{
    test_reply *reply = test_redis_cmd(r, argc, argv, NULL);
    CHECK(reply != NULL);
    if (reply->type != ':')
        fprintf(stderr, "%s: reply type %c %s\n", argv[0], reply->type,
                reply->str ? reply->str : "");
    CHECK(reply->type == ':');
    long long v = reply->integer;
    test_reply_free(reply);
    return v;
}

char *test_redis_get(const test_redis *r, const char *name, size_t *len)
{
    const char *argv[] = {"GET", name};
    test_reply *reply = test_redis_cmd(r, 2, argv, NULL);
    CHECK(reply != NULL && reply->type == '$');
    char *v = reply->str;
    *len = reply->len;
    reply->str = NULL;
    test_reply_free(reply);
    return v;
}

void test_redis_set(const test_redis *r, const char *name, const void *value, size_t len)
{
    const char *argv[] = {"SET", name, value};
    size_t lens[] = {3, strlen(name), len};
    test_reply *reply = test_redis_cmd(r, 3, argv, lens);
    CHECK(reply != NULL && reply->type == '+');
    test_reply_free(reply);
}

void test_redis_name(char *out, size_t size, const char *prefix, const void *key,
                     size_t key_len)
{
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    char hex[2 * PROGCACHE_SHA256_SIZE + 1];
    CHECK_OK(progcache__sha256_oneshot(digest, key, key_len));
    progcache__hex(hex, digest, sizeof digest);
    snprintf(out, size, "%s%s", prefix, hex);
}

void test_log_capture(void *ctx, int level, const char *message)
{
    log_capture *c = ctx;
    (void)level;
    pthread_mutex_lock(&c->lock);
    c->count++;
    snprintf(c->last, sizeof c->last, "%s", message);
    pthread_mutex_unlock(&c->lock);
}

void test_expect_logged(log_capture *c, int count, const char *fragment)
{
    pthread_mutex_lock(&c->lock);
    if (c->count != count || !strstr(c->last, fragment)) {
        fprintf(stderr, "logged %d: %s\n(expected %d, mentioning \"%s\")\n", c->count,
                c->last, count, fragment);
        CHECK(!"the log callback was told");
    }
    pthread_mutex_unlock(&c->lock);
}

progcache_redis_counters test_redis_counters(const progcache_store *s)
{
    progcache_redis_counters c = PROGCACHE_REDIS_COUNTERS_INIT;
    CHECK_OK(progcache_redis_counters_get(&c, s));
    return c;
}

long long test_redis_info(const test_redis *r, const char *section, const char *field)
{
    const char *info[] = {"INFO", section};
    test_reply *reply = test_redis_cmd(r, 2, info, NULL);
    CHECK(reply && reply->type == '$' && reply->str);
    char want[64];
    snprintf(want, sizeof want, "%s:", field);
    const char *p = strstr(reply->str, want);
    CHECK(p != NULL);
    long long n = atoll(p + strlen(want));
    test_reply_free(reply);
    return n;
}
