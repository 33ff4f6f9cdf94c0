/* The lying RESP server (hostile_server.h). */
#include "hostile_server.h"
#include "redis_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *const names[HOSTILE_MODES] = {
    "garbage", "huge-bulk", "huge-array", "deep", "drip", "stall", "cut", "wrong-type", "error"};

const char *hostile_mode_name(hostile_mode mode)
{
    return mode < HOSTILE_MODES ? names[mode] : mode == HOSTILE_SERVE ? "serve" : "?";
}

static struct {
    const unsigned char *value[2];
    size_t len[2];
    unsigned int pause_ms;
    int *reads; /* GETRANGEs answered, shared by the connections' processes */
} served;

void hostile_serve(const void *first, size_t first_len, const void *rest, size_t rest_len,
                   unsigned int pause_ms)
{
    served.value[0] = first;
    served.value[1] = rest;
    served.len[0] = first_len;
    served.len[1] = rest_len;
    served.pause_ms = pause_ms;
}

static void pause_ms(unsigned int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int send_str(int fd, const char *s)
{
    return test_send_all(fd, s, strlen(s));
}

/* Send unit again and again until the client stops reading (or 1 GiB). */
static void flood(int fd, const char *head, const char *unit)
{
    char block[65536];
    size_t u = strlen(unit), n = 0;
    while (n + u <= sizeof block) {
        memcpy(block + n, unit, u);
        n += u;
    }
    if (send_str(fd, head))
        return;
    for (size_t sent = 0; sent < ((size_t)1 << 30); sent += n)
        if (test_send_all(fd, block, n))
            return;
}

/* Read one command (a RESP array of bulk strings; inline commands too)
 * into argv0 (its first word, upper case). 0, or -1 at EOF. */
typedef struct conn {
    int fd;
    char buf[1 << 16];
    size_t len;
} conn;

static int fill(conn *c)
{
    if (c->len == sizeof c->buf)
        c->len = 0; /* a fixture: a command this long is someone's value; drop it */
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n <= 0)
        return -1;
    c->len += (size_t)n;
    return 0;
}

/* The index just past "\r\n" found from at, or 0. */
static size_t line_end(const conn *c, size_t at)
{
    for (size_t i = at; i + 1 < c->len; i++)
        if (c->buf[i] == '\r' && c->buf[i + 1] == '\n')
            return i + 2;
    return 0;
}

/* The arguments after the first, when short (GETRANGE's name, start and
 * end): args[i] for i < ARGS, "" when longer. */
#define ARGS 4
static char args[ARGS][256];

/* Skip over one command, reading as needed (values of SET may be large:
 * the fixture reads them through without keeping them). */
static int read_command(conn *c, char *argv0, size_t size)
{
    memset(args, 0, sizeof args);
    size_t end;
    while (!(end = line_end(c, 0)))
        if (fill(c))
            return -1;
    long count = c->buf[0] == '*' ? strtol(c->buf + 1, NULL, 10) : 0;
    if (c->buf[0] != '*') { /* an inline command */
        snprintf(argv0, size, "%.*s", (int)strcspn(c->buf, " \r"), c->buf);
        memmove(c->buf, c->buf + end, c->len - end);
        c->len -= end;
        return 0;
    }
    memmove(c->buf, c->buf + end, c->len - end);
    c->len -= end;
    argv0[0] = '\0';
    for (long i = 0; i < count; i++) {
        while (!(end = line_end(c, 0)))
            if (fill(c))
                return -1;
        unsigned long long want = strtoull(c->buf + 1, NULL, 10) + 2;
        memmove(c->buf, c->buf + end, c->len - end);
        c->len -= end;
        if (i >= 1 && i <= ARGS && want <= sizeof args[0]) {
            while (c->len < want)
                if (fill(c))
                    return -1;
            memcpy(args[i - 1], c->buf, (size_t)want - 2);
        }
        while (want) {
            if (!c->len && fill(c))
                return -1;
            size_t take = c->len < want ? c->len : (size_t)want;
            if (i == 0 && !argv0[0])
                snprintf(argv0, size, "%.*s", (int)(take > 2 ? (take < want ? take : take - 2) : 0),
                         c->buf);
            memmove(c->buf, c->buf + take, c->len - take);
            c->len -= take;
            want -= take;
        }
    }
    for (char *p = argv0; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    return 0;
}

static const char *sane(const char *cmd)
{
    if (!strcmp(cmd, "PING"))
        return "+PONG\r\n";
    if (!strcmp(cmd, "AUTH") || !strcmp(cmd, "SELECT") || !strcmp(cmd, "SET"))
        return "+OK\r\n";
    if (!strcmp(cmd, "GET"))
        return "$-1\r\n";
    if (!strcmp(cmd, "GETRANGE"))
        return "$0\r\n\r\n"; /* what Redis answers for a key that is not there */
    if (!strcmp(cmd, "STRLEN"))
        return ":0\r\n";
    if (!strcmp(cmd, "DEL") || !strcmp(cmd, "UNLINK") || !strcmp(cmd, "PUBLISH"))
        return ":0\r\n";
    if (!strcmp(cmd, "SCAN"))
        return "*2\r\n$1\r\n0\r\n*0\r\n";
    if (!strcmp(cmd, "INFO"))
        return "$52\r\nredis_version:7.0.0\r\nmaxmemory:0\r\nused_memory:1000\r\n\r\n";
    if (!strcmp(cmd, "SUBSCRIBE"))
        return "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n";
    if (!strcmp(cmd, "EVAL") || !strcmp(cmd, "EVALSHA"))
        return "*2\r\n:0\r\n:5000\r\n";
    return "-ERR unknown command\r\n";
}

/* Misbehave: 0 to go on with the connection, -1 to end it. */
static int hostile(int fd, hostile_mode mode)
{
    switch (mode) {
    case HOSTILE_GARBAGE:
        return send_str(fd, "?this is not RESP at all\r\n");
    case HOSTILE_HUGE_BULK:
        flood(fd, "$9999999999\r\n", "x");
        return -1;
    case HOSTILE_HUGE_ARRAY:
        flood(fd, "*50000000\r\n", ":1\r\n");
        return -1;
    case HOSTILE_DEEP:
        flood(fd, "*1\r\n", "*1\r\n");
        return -1;
    case HOSTILE_DRIP: {
        static const char head[] = "$100000\r\n";
        for (size_t i = 0; i < 100000 + sizeof head; i++) {
            char ch = i < sizeof head - 1 ? head[i] : 'x';
            if (test_send_all(fd, &ch, 1))
                return -1;
            pause_ms(20);
        }
        return -1;
    }
    case HOSTILE_STALL:
        pause_ms(600000);
        return -1;
    case HOSTILE_CUT:
        send_str(fd, "$100\r\nhalf of a val");
        return -1;
    case HOSTILE_WRONG_TYPE:
        return send_str(fd, "*3\r\n:1\r\n:2\r\n:3\r\n");
    case HOSTILE_ERROR:
        return send_str(fd, "-ERR the hostile server says no\r\n");
    default:
        return -1;
    }
}


/* HOSTILE_SERVE: GETRANGE name start end (and STRLEN) as Redis answers
 * them, from the value hostile_serve set for this read. */
static int answer_value(int fd, const char *cmd)
{
    int which = __atomic_fetch_add(served.reads, 1, __ATOMIC_SEQ_CST) > 0;
    const unsigned char *v = served.value[which];
    long long len = (long long)served.len[which];
    char head[64];
    pause_ms(served.pause_ms);
    if (!strcmp(cmd, "STRLEN")) {
        snprintf(head, sizeof head, ":%lld\r\n", len);
        return send_str(fd, head);
    }
    long long from = strtoll(args[1], NULL, 10), to = strtoll(args[2], NULL, 10);
    if (to >= len)
        to = len - 1;
    long long n = from < len && to >= from ? to - from + 1 : 0;
    snprintf(head, sizeof head, "$%lld\r\n", n);
    if (send_str(fd, head) || (n && test_send_all(fd, v + from, (size_t)n)))
        return -1;
    return send_str(fd, "\r\n");
}

static int targeted(const char *commands, const char *cmd)
{
    if (!strcmp(commands, "*"))
        return 1;
    size_t n = strlen(cmd);
    for (const char *p = commands; (p = strstr(p, cmd)); p += n)
        if ((p == commands || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

static void serve(int fd, hostile_mode mode, const char *commands)
{
    static conn c;
    c.fd = fd;
    c.len = 0;
    char cmd[64];
    while (read_command(&c, cmd, sizeof cmd) == 0) {
        int rc;
        if (mode == HOSTILE_SERVE && (!strcmp(cmd, "GETRANGE") || !strcmp(cmd, "STRLEN")))
            rc = answer_value(fd, cmd);
        else
            rc = targeted(commands, cmd) ? hostile(fd, mode) : send_str(fd, sane(cmd));
        /* "MESSAGE": a sane subscription, then hostile messages on it. */
        if (!rc && !strcmp(cmd, "SUBSCRIBE") && targeted(commands, "MESSAGE"))
            rc = hostile(fd, mode);
        if (rc)
            break;
    }
    close(fd);
}

void hostile_start(hostile_server *h, hostile_mode mode, const char *commands)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(ls >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    CHECK(bind(ls, (struct sockaddr *)&a, sizeof a) == 0); /* port 0: a free one */
    CHECK(listen(ls, 64) == 0);
    CHECK(getsockname(ls, (struct sockaddr *)&a, &alen) == 0);
    h->port = ntohs(a.sin_port);
    snprintf(h->url, sizeof h->url, "redis://127.0.0.1:%d", h->port);
    if (mode == HOSTILE_SERVE) {
        served.reads = mmap(NULL, sizeof *served.reads, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(served.reads != MAP_FAILED);
        *served.reads = 0;
    }
    pid_t parent = getpid();
    h->pid = fork();
    CHECK(h->pid >= 0);
    if (h->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        signal(SIGCHLD, SIG_IGN); /* the connections' processes reap themselves */
        for (;;) {
            int fd = accept(ls, NULL, NULL);
            if (fd < 0)
                continue;
            pid_t server = getpid();
            if (fork() == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != server)
                    _exit(0);
                close(ls);
                serve(fd, mode, commands);
                _exit(0);
            }
            close(fd);
        }
    }
    close(ls);
}

void hostile_stop(hostile_server *h)
{
    if (h->pid > 0) {
        kill(h->pid, SIGKILL); /* its connections follow it (PDEATHSIG) */
        waitpid(h->pid, NULL, 0);
    }
    if (served.reads && served.reads != MAP_FAILED)
        munmap(served.reads, sizeof *served.reads);
    served.reads = NULL;
    h->pid = 0;
}
