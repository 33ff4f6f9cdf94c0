/* progcache-nvrtc-helper, warm (docs/CUDA.md, "A warm helper").
 *
 * Why: a fresh process's first NVRTC compile pays for NVRTC's own
 * start-up and for memory it has never touched; on the H200 machine a
 * compile with a PCH took 400-530 ms as a process's first and 170-240 ms
 * as its second, and 230-320 ms in a child forked from a process that had
 * done one (docs/PERFORMANCE.md). So a helper that has answered a compile
 * with a PCH may stay, warm, as a template: it takes an abstract Unix
 * socket name the library derived from everything the answer depends on
 * (the user, the helper file, NVRTC's build, the heap, the environment;
 * src/pch/pch_warm.c), and forks a child for each connection, which gets
 * the warm state and serves one compile. Children run side by side, so
 * parallel callers never queue behind each other.
 *
 * Bounds: only a peer of this user is served (SO_PEERCRED; the library
 * checks the same of us); at most WARM_CHILDREN at once (others are
 * closed unanswered: the library then starts a helper of its own); each
 * child acknowledges its request's descriptors at once, has WARM_REQUEST_S
 * to read the request and the detached bound for all of it; the template
 * exits after idle_ms without a compile of this user's (another user's
 * connections do not count) and after WARM_LIFETIME_S in any case. It
 * holds no file of the caller's: its descriptors are /dev/null and the
 * socket, its directory /; a child works in its caller's directory. */
#include "helper_warm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "pch/pch_wire.h"

#define WARM_CHILDREN 64
#define WARM_LIFETIME_S 3600
#define WARM_IDLE_MAX_MS (24u * 3600u * 1000u)

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
#define WARM_REQUEST_S 10

/* The descriptors a request brings (one byte, SCM_RIGHTS: the PCH
 * directory and the PCH, onto 3 and 4, and the caller's working
 * directory, which this process then works in as a fresh helper would:
 * relative include paths mean what they meant to the caller). 0, or -1. */
static int take_fds(int conn)
{
    progcache__wire_fds fm;
    struct msghdr *m = progcache__wire_fds_msg(&fm);
    fm.byte = 0;
    ssize_t n;
    do
        n = recvmsg(conn, m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    struct cmsghdr *c = CMSG_FIRSTHDR(m);
    if (n != 1 || fm.byte != PROGCACHE__WIRE_WARM_FDS || (m->msg_flags & MSG_CTRUNC) || !c ||
        c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(PROGCACHE__WIRE_WARM_NFDS * sizeof(int)))
        return -1;
    int got[PROGCACHE__WIRE_WARM_NFDS], fds[PROGCACHE__WIRE_WARM_NFDS];
    memcpy(got, CMSG_DATA(c), sizeof got);
    /* Above 3 and 4 first, whatever numbers they came as, so that no dup2
     * below overwrites another of them. */
    for (int i = 0; i < PROGCACHE__WIRE_WARM_NFDS; i++) {
        fds[i] = fcntl(got[i], F_DUPFD_CLOEXEC, 10);
        close(got[i]);
    }
    struct stat d, p, w;
    int ok = fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fstat(fds[0], &d) == 0 &&
             S_ISDIR(d.st_mode) && fstat(fds[1], &p) == 0 && S_ISREG(p.st_mode) &&
             fstat(fds[2], &w) == 0 && S_ISDIR(w.st_mode) && fchdir(fds[2]) == 0 &&
             dup2(fds[0], 3) == 3 && dup2(fds[1], 4) == 4;
    for (int i = 0; i < PROGCACHE__WIRE_WARM_NFDS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return ok ? 0 : -1;
}

static int same_user(int conn)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
           cred.uid == geteuid();
}

static void serve_one(int conn, int (*serve)(int conn))
{
    /* Above 3 and 4, where the request's descriptors go. */
    int high = fcntl(conn, F_DUPFD_CLOEXEC, 10);
    close(conn);
    if (high < 0)
        _exit(0);
    conn = high;
    alarm(PROGCACHE__WIRE_DETACHED_SECONDS);
    struct timeval tv = {WARM_REQUEST_S, 0};
    (void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* Taken: say so at once, so that a caller never waits long on a
     * listener that does not answer (src/pch/pch_warm.c). */
    char ack = PROGCACHE__WIRE_WARM_ACK;
    if (take_fds(conn) == 0 && send(conn, &ack, 1, MSG_NOSIGNAL) == 1)
        (void)serve(conn);
    _exit(0);
}

void progcache__helper_warm(const char *name, unsigned int idle_ms, int (*serve)(int conn))
{
    size_t len = strlen(name);
    struct sockaddr_un a;
    if (idle_ms > WARM_IDLE_MAX_MS)
        idle_ms = WARM_IDLE_MAX_MS;
    if (!idle_ms || !len || len + 1 > sizeof a.sun_path || fork() != 0)
        return;
    (void)setsid();
    if (chdir("/") != 0)
        _exit(0);
    signal(SIGPIPE, SIG_IGN); /* a caller gone mid-answer is EPIPE */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        _exit(0);
    dup2(null, 0);
    dup2(null, 1);
    if (null > 2)
        close(null);
    close(3);
    close(4);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, name, len); /* sun_path[0] '\0': the abstract namespace */
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    /* The name is taken: another warm helper is there already. */
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, alen) != 0 || listen(ls, 64) != 0)
        _exit(0);
    int live = 0;
    uint64_t idle_until = now_ms() + idle_ms;
    /* However busy: a new template after a while, which also bounds what
     * one keeps mapped. */
    uint64_t end = now_ms() + (uint64_t)WARM_LIFETIME_S * 1000u;
    for (;;) {
        /* Children are reaped as they end (checked every 100 ms while any
         * runs), not left as zombies until the next connection. */
        while (live > 0 && waitpid(-1, NULL, WNOHANG) > 0)
            live--;
        uint64_t now = now_ms();
        if (now >= idle_until || now >= end)
            _exit(0); /* idle: its children, if any, finish on their own */
        uint64_t left = (idle_until < end ? idle_until : end) - now;
        struct pollfd p = {ls, POLLIN, 0};
        int n = poll(&p, 1, (int)(live > 0 && left > 100 ? 100 : left));
        if (n < 0 && errno != EINTR)
            _exit(0);
        if (n <= 0)
            continue;
        int conn = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
            continue;
        /* Only this user's compiles keep it: another user's connections
         * are closed and do not put its exit off. */
        if (same_user(conn) && live < WARM_CHILDREN) {
            idle_until = now_ms() + idle_ms;
            pid_t pid = fork();
            if (pid == 0) {
                close(ls);
                serve_one(conn, serve);
            }
            if (pid > 0)
                live++;
        }
        close(conn);
    }
}
