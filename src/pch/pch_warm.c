/* A warm helper (docs/CUDA.md, "A warm helper"; its side is
 * helper/warm.c): a compile with a PCH goes to a helper template that is
 * already running, warm, when there is one, and otherwise to a fresh
 * helper that is asked to stay warm after it answers.
 *
 * The template's name is an abstract Unix socket name (no file, nothing
 * to clean up, gone when it exits) derived from everything its answers
 * depend on: this user, the helper file the tier checked (device, inode,
 * size, times), NVRTC's build, the PCH heap and the helper's environment.
 * A template of another helper, NVRTC or environment has another name, so
 * a caller only ever reaches one it would have started itself. The peer
 * must be this user (SO_PEERCRED): a process of another user holding the
 * name is refused, said once, and compiles start their own helper (rule
 * 4: nothing downgrades silently).
 *
 * A template that is gone, busy or broken costs a fresh helper, never the
 * compile: connect fails at once (nothing blocks), a connection closed
 * unanswered or an answer that does not parse is counted
 * (pch_warm_failures), and the same request goes to a fresh helper. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "pch/pch_tier.h"
#include "pch/pch_wire.h"
#include "sha256.h"

static int put(progcache__sha256 *h, const void *data, size_t len)
{
    return progcache__sha256_update(h, data, len);
}

/* tier->warm_name for heap: "progcache-pch-<uid>-<32 hex>". 0, or -1. */
static int warm_name(progcache__pch_tier *tier, uint64_t heap, char *out, size_t len)
{
    struct stat st;
    if (tier->helper_fd < 0 || fstat(tier->helper_fd, &st) != 0)
        return -1;
    char **env = progcache__pch_helper_env("/proc/self/fd/3");
    progcache__sha256 *h = env ? progcache__sha256_new() : NULL;
    if (!h) {
        progcache__free(env);
        return -1;
    }
    uint64_t v[] = {(uint64_t)geteuid(),
                    (uint64_t)st.st_dev,
                    (uint64_t)st.st_ino,
                    (uint64_t)st.st_size,
                    (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec,
                    (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec,
                    heap,
                    PROGCACHE__WIRE_VERSION};
    int bad = put(h, "progcache-pch-warm 1", 21) || put(h, v, sizeof v) ||
              put(h, tier->nvrtc_id, strlen(tier->nvrtc_id) + 1);
    for (char **e = env; !bad && *e; e++)
        bad = put(h, *e, strlen(*e) + 1);
    progcache__free(env);
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    if (bad) {
        progcache__sha256_free(h);
        return -1;
    }
    if (progcache__sha256_final(h, digest))
        return -1;
    char hex[2 * PROGCACHE_SHA256_SIZE + 1];
    progcache__hex(hex, digest, sizeof digest);
    snprintf(out, len, "progcache-pch-%u-%.32s", (unsigned)geteuid(), hex);
    return 0;
}

/* Connect to the template called name: the socket, or -1 with *none 1
 * when there is none to connect to (start one), 0 when there is one this
 * process must not use (another user's: said once). */
static int connect_warm(pch_job *job, const char *name, int *none)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(name);
    memcpy(a.sun_path + 1, name, len);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
    *none = 0;
    /* Non-blocking: a template whose backlog is full is EAGAIN, not a wait. */
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    if (connect(s, (struct sockaddr *)&a, alen) != 0) {
        *none = errno == ECONNREFUSED || errno == ENOENT;
        close(s);
        return -1;
    }
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
        progcache__pch_log_once(job->tier, job->program, PCH_LOGGED_WARM, PROGCACHE_LOG_WARN,
                                "progcache: the warm PCH helper's name %s is held by a process "
                                "of uid %u (pid %d), not this user; each compile with a PCH "
                                "starts a helper of its own",
                                name, (unsigned)cred.uid, (int)cred.pid);
        close(s);
        return -1;
    }
    return s;
}

/* The descriptors, in one byte. 0, or -1. */
static int send_fds(int s, int dir_fd, int pch_fd)
{
    char byte = PROGCACHE__WIRE_WARM_FDS;
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {&byte, 1};
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.space;
    m.msg_controllen = sizeof ctl.space;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = {dir_fd, pch_fd};
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t n;
    do
        n = sendmsg(s, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

/* One compile through the template: 0 answered (out filled), -1 not. */
static int run_warm(pch_result *out, pch_job *job, int s, int pch_fd, uint64_t heap)
{
    progcache_buf req = PROGCACHE_BUF_INIT, resp = PROGCACHE_BUF_INIT;
    double start = progcache__clock_ms(), first = 0;
    double deadline = start + progcache__pch_helper_timeout_ms;
    int rc = -1;
    if (progcache__pch_request(&req, job, PROGCACHE__WIRE_USE, NULL, heap) == PROGCACHE_OK &&
        send_fds(s, job->tier->dir_fd, pch_fd) == 0 &&
        progcache__pch_send(s, &req, deadline) == 0 &&
        progcache__pch_receive(s, &resp, deadline, &first) == 0 &&
        progcache__pch_result_parse(out, &resp) == 0) {
        rc = 0;
        out->wall_ms = progcache__clock_ms() - start;
        out->answer_ms = first ? first - start : 0;
        out->eof_ms = out->wall_ms;
    } else {
        memset(out, 0, sizeof *out);
    }
    progcache_buf_free(&req);
    progcache_buf_free(&resp);
    return rc;
}

int progcache__pch_helper_use(pch_result *out, pch_job *job, int pch_fd, uint64_t heap)
{
    progcache__pch_tier *tier = job->tier;
    char name[PCH_WARM_NAME_MAX];
    if (!tier->settings.warm_ms || warm_name(tier, heap, name, sizeof name) != 0)
        return progcache__pch_helper_run(out, job, PROGCACHE__WIRE_USE, pch_fd, NULL, heap);
    int none;
    int s = connect_warm(job, name, &none);
    if (s >= 0) {
        int rc = run_warm(out, job, s, pch_fd, heap);
        close(s);
        if (rc == 0 && out->status == PROGCACHE__WIRE_OK) {
            progcache__pch_count(job, PROGCACHE_STAT_PCH_WARM, 1);
            return PROGCACHE_OK;
        }
        /* Closed unanswered (busy, gone while serving), refused, or
         * nonsense: the same request goes to a fresh helper. */
        progcache__pch_result_release(out);
        progcache__pch_count(job, PROGCACHE_STAT_PCH_WARM_FAILURES, 1);
        progcache__pch_log(job->program, PROGCACHE_LOG_INFO,
                           "progcache: the warm PCH helper %s did not answer; a fresh one "
                           "compiles",
                           name);
    }
    /* None there: the fresh helper stays warm after it answers. */
    job->warm = none ? name : NULL;
    int rc = progcache__pch_helper_run(out, job, PROGCACHE__WIRE_USE, pch_fd, NULL, heap);
    job->warm = NULL;
    return rc;
}
