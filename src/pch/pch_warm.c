/* A warm helper (docs/CUDA.md, "A warm helper"; its side is
 * helper/helper_warm.c): a compile with a PCH goes to a helper template that is
 * already running, warm, when there is one, and otherwise to a fresh
 * helper that is asked to stay warm after it answers.
 *
 * The template's name is an abstract Unix socket name (no file, nothing
 * to clean up, gone when it exits) derived from everything its answers
 * depend on: this user, the helper file the tier checked (device, inode,
 * size, times), NVRTC's build, the PCH heap, the helper's environment,
 * and where this process runs (its mount namespace and control group).
 * A template of another helper, NVRTC or environment has another name, so
 * a caller only ever reaches one it would have started itself. The peer
 * must be this user (SO_PEERCRED): a process of another user holding the
 * name is refused, counted (pch_warm_failures), said once, and compiles
 * start their own helper (rule 4: nothing downgrades silently).
 *
 * A template that is gone, busy or broken costs a fresh helper, never the
 * compile: connect fails at once (nothing blocks), the template's child
 * must acknowledge the request's descriptors within 2 s, and a connection
 * closed unanswered or an answer that does not parse is counted
 * (pch_warm_failures), said once, and the same request goes to a fresh
 * helper; the handle then stops asking. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* Where this process runs, as far as a helper's compile can tell: its
 * mount namespace (the files NVRTC reads) and its control group (whose
 * CPU and memory a compile should be charged to: a job's compiles are not
 * run by another job's template). Into h; 0, or -1. */
static int put_place(progcache__sha256 *h)
{
    char ns[64] = "";
    ssize_t n = readlink("/proc/self/ns/mnt", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    char group[4096] = "";
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, group, sizeof group - 1);
        group[got > 0 ? got : 0] = '\0';
        close(fd);
    }
    return put(h, ns, strlen(ns) + 1) || put(h, group, strlen(group) + 1);
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
              put(h, tier->nvrtc_id, strlen(tier->nvrtc_id) + 1) || put_place(h);
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
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t clen = sizeof cred;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
        progcache__pch_log_once(job->tier, job->program, PCH_LOGGED_WARM, PROGCACHE_LOG_WARN,
                                "progcache: the warm PCH helper's name %s is held by a process "
                                "of uid %u (pid %d), not this user; each compile with a PCH "
                                "starts a helper of its own",
                                name, (unsigned)cred.uid, (int)cred.pid);
        /* Counted as well as said (rule 5): a squatter is a failure of the
         * warm path, like a template that does not answer. */
        progcache__pch_count(job, PROGCACHE_STAT_PCH_WARM_FAILURES, 1);
        progcache__pch_tier_drop(job->tier, &job->tier->warm_ok);
        close(s);
        return -1;
    }
    return s;
}

/* The descriptors, in one byte: the PCH directory, the PCH, and this
 * process's working directory (a fresh helper would inherit it). 0, or -1. */
static int send_fds(int s, int dir_fd, int pch_fd, int cwd_fd)
{
    progcache__wire_fds fm;
    struct msghdr *m = progcache__wire_fds_msg(&fm);
    struct cmsghdr *c = CMSG_FIRSTHDR(m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(PROGCACHE__WIRE_WARM_NFDS * sizeof(int));
    int fds[PROGCACHE__WIRE_WARM_NFDS] = {dir_fd, pch_fd, cwd_fd};
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t n;
    do
        n = sendmsg(s, m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n == 1 ? 0 : -1;
}

/* The child's byte saying it has the descriptors, within
 * PROGCACHE__WIRE_WARM_ACK_MS: a listener that takes connections and
 * never answers costs that much once, not a compile's whole deadline. */
static int acked(int s, const char **why)
{
    double deadline = progcache__clock_ms() + PROGCACHE__WIRE_WARM_ACK_MS;
    char byte = 0;
    for (;;) {
        struct pollfd p = {s, POLLIN, 0};
        double left = deadline - progcache__clock_ms();
        int n = left > 0 ? poll(&p, 1, (int)left + 1) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *why = "it did not take the request within 2 s";
            return 0;
        }
        ssize_t got = recv(s, &byte, 1, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        /* Closed with our bytes unread is a reset. */
        *why = got == 0 || (got < 0 && errno == ECONNRESET) ? "it closed the connection"
                                                             : "it answered something else";
        return got == 1 && byte == PROGCACHE__WIRE_WARM_ACK;
    }
}

/* One compile through the template: 0 answered (out filled), -1 not
 * (*why says how far it got), -2 not within the helper's deadline. */
static int run_warm(pch_result *out, pch_job *job, int s, int pch_fd, uint64_t heap,
                    const char **why)
{
    progcache_buf req = PROGCACHE_BUF_INIT, resp = PROGCACHE_BUF_INIT;
    double start = progcache__clock_ms(), first = 0;
    double deadline = start + progcache__pch_helper_timeout_ms;
    int rc = -1;
    int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *why = cwd < 0 ? "this process's working directory cannot be opened"
                   : "the request could not be sent";
    int sent = cwd >= 0 &&
               progcache__pch_request(&req, job, PROGCACHE__WIRE_USE, NULL, heap) ==
                   PROGCACHE_OK &&
               send_fds(s, job->tier->dir_fd, pch_fd, cwd) == 0;
    if (!sent && cwd >= 0 && (errno == EPIPE || errno == ECONNRESET))
        *why = "it closed the connection";
    int got = -2;
    if (sent && acked(s, why)) {
        *why = "it took the request and gave no usable answer";
        got = progcache__pch_send(s, &req, deadline);
        if (got == 0)
            got = progcache__pch_receive(s, &resp, deadline, &first);
    }
    if (got == 0 && progcache__pch_result_parse(out, &resp) == 0) {
        rc = 0;
        out->wall_ms = progcache__clock_ms() - start;
        out->answer_ms = first ? first - start : 0;
        out->eof_ms = out->wall_ms;
    } else {
        memset(out, 0, sizeof *out);
        /* Its whole deadline spent: no second helper gets another. */
        if (got == -1)
            rc = -2;
    }
    if (cwd >= 0)
        close(cwd);
    progcache_buf_free(&req);
    progcache_buf_free(&resp);
    return rc;
}

int progcache__pch_helper_use(pch_result *out, pch_job *job, int pch_fd, uint64_t heap)
{
    progcache__pch_tier *tier = job->tier;
    char name[PCH_WARM_NAME_MAX];
    if (!__atomic_load_n(&tier->warm_ok, __ATOMIC_RELAXED) ||
        warm_name(tier, heap, name, sizeof name) != 0)
        return progcache__pch_helper_run(out, job, PROGCACHE__WIRE_USE, pch_fd, NULL, heap);
    int none;
    int s = connect_warm(job, name, &none);
    if (s >= 0) {
        const char *why;
        int rc = run_warm(out, job, s, pch_fd, heap, &why);
        close(s);
        if (rc == 0 && out->status == PROGCACHE__WIRE_OK) {
            progcache__pch_count(job, PROGCACHE_STAT_PCH_WARM, 1);
            return PROGCACHE_OK;
        }
        if (rc == 0) {
            progcache__pch_result_release(out);
            why = "it refused the request";
        }
        /* Busy, gone while serving, refusing, or not a helper at all: the
         * same request goes to a fresh helper, and this handle stops
         * asking (a listener that never answers costs 2 s once). */
        progcache__pch_tier_drop(tier, &tier->warm_ok);
        progcache__pch_count(job, PROGCACHE_STAT_PCH_WARM_FAILURES, 1);
        if (rc == -2)
            return progcache__error(PROGCACHE_ETIMEOUT, "the warm PCH helper %s did not "
                                                        "finish within %u ms",
                                    name, progcache__pch_helper_timeout_ms);
        progcache__pch_log_once(tier, job->program, PCH_LOGGED_WARM, PROGCACHE_LOG_WARN,
                                "progcache: the warm PCH helper %s did not answer (%s); a "
                                "fresh helper compiles, and does for every compile of this "
                                "handle",
                                name, why);
    }
    /* None there: the fresh helper stays warm after it answers. */
    job->warm = none ? name : NULL;
    int rc = progcache__pch_helper_run(out, job, PROGCACHE__WIRE_USE, pch_fd, NULL, heap);
    job->warm = NULL;
    return rc;
}
