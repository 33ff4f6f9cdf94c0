/* Running the compile helper (helper/nvrtc_helper.c): one process per
 * compile that creates or uses a PCH, over one socketpair (pch_wire.h).
 *
 * The helper is found, in order, at $PROGCACHE_PCH_HELPER, next to the
 * library (libexec/progcache/ beside lib/), and at the path it was
 * installed to. It is executed only when it is a regular file owned by
 * root or by this user and writable by nobody else, reached through
 * directories nobody else can change and not through a link at its name:
 * the library would run whatever it finds there. It is opened once per
 * handle (util/trusted_path.h), checked on that descriptor and run from it
 * (/proc/self/fd/N), so a link or file swapped after the check is never
 * run. It starts with the caller's identity, the
 * socket as stdin and stdout, /dev/null as stderr, the PCH directory as
 * fd 3 and the PCH to use as fd 4, and nothing else open; an environment
 * of TMPDIR (the PCH directory, so NVRTC's temp files are private) and
 * NVRTC's own variables; all signals at their defaults and none blocked.
 *
 * Nothing here can hang or kill the caller: the request is sent with
 * MSG_NOSIGNAL (a helper that died is EPIPE, not SIGPIPE), every wait has
 * a deadline after which that pid alone is killed, the response is read
 * up to a bound, and the child is always reaped. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "trusted_path.h"
#include "clock.h"
#include "pch/pch_tier.h"
#include "pch/pch_wire.h"

#ifndef PROGCACHE_PCH_HELPER_PATH
#define PROGCACHE_PCH_HELPER_PATH "/usr/local/libexec/progcache/progcache-nvrtc-helper"
#endif
#ifndef PROGCACHE_PCH_HELPER_REL
#define PROGCACHE_PCH_HELPER_REL "../libexec/progcache/progcache-nvrtc-helper"
#endif

/* The longest a helper may take: a compile of a large program with heavy
 * headers takes a minute; this is the bound after which it is killed and
 * the program compiled in the calling process instead. (A variable only so
 * that tests can shorten it.) */
unsigned int progcache__pch_helper_timeout_ms = 10 * 60 * 1000;

/* ---- finding it ------------------------------------------------------------------ */

/* The fd the helper is run from in the child: above 0-4 (its socket, the
 * PCH directory, the PCH), so the exec can name it; the helper closes it
 * (it closes every descriptor above 4). */
#define HELPER_EXEC_FD 5

/* Open path as the helper: *fd (O_PATH) of a regular file of root or this
 * user that nobody else can write, executable, reached through
 * directories only root or this user can change, its name not a link.
 * 0; -1 with why. */
static int open_helper(const char *path, int *fd, char *why, size_t len)
{
    struct stat st;
    if (progcache__trusted_open(fd, &st, path, PROGCACHE__TRUSTED_NO_LINK, why, len) != 0)
        return -1;
    if (!S_ISREG(st.st_mode))
        snprintf(why, len, "not a regular file");
    else if (st.st_uid != 0 && st.st_uid != geteuid())
        snprintf(why, len, "owned by uid %u, neither root nor this user", (unsigned)st.st_uid);
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, len, "writable by other users (mode %04o)", (unsigned)(st.st_mode & 07777));
    else if (!(st.st_mode & (geteuid() == 0           ? (S_IXUSR | S_IXGRP | S_IXOTH)
                             : st.st_uid == geteuid() ? S_IXUSR
                                                      : (S_IXGRP | S_IXOTH))))
        snprintf(why, len, "not executable (mode %04o)", (unsigned)(st.st_mode & 07777));
    else
        return 0;
    close(*fd);
    *fd = -1;
    return -1;
}

/* Why path cannot be run, or NULL when it can (for finding it). */
static const char *untrusted(const char *path, char *why, size_t len)
{
    int fd;
    if (open_helper(path, &fd, why, len))
        return why;
    close(fd);
    return NULL;
}

static char *dup_error(const char *path, const char *why)
{
    size_t len = strlen(path) + strlen(why) + 64;
    char *s = progcache__malloc(len);
    if (s)
        snprintf(s, len, "the PCH helper %s cannot be used: %s", path, why);
    return s;
}

void progcache__pch_helper_find(progcache__pch_tier *tier)
{
    char why[600];
    const char *given = tier->settings.helper;
    if (given) {
        /* Named by the user: used, or the reason it is not is said. */
        if (untrusted(given, why, sizeof why))
            tier->helper_error = dup_error(given, why);
        else
            tier->helper = progcache__strdup(given);
        return;
    }
    char path[4096];
    Dl_info info;
    if (dladdr((void *)progcache__pch_helper_find, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname),
                              info.dli_fname, PROGCACHE_PCH_HELPER_REL) < (int)sizeof path &&
            !untrusted(path, why, sizeof why)) {
            tier->helper = progcache__strdup(path);
            return;
        }
    }
    /* Run from its build tree: that tree's helper, and a refusal names it. */
    const char *built = progcache__pch_helper_in_build();
    char built_why[160] = "";
    if (built && !untrusted(built, built_why, sizeof built_why)) {
        tier->helper = progcache__strdup(built);
        return;
    }
    if (!untrusted(PROGCACHE_PCH_HELPER_PATH, why, sizeof why))
        tier->helper = progcache__strdup(PROGCACHE_PCH_HELPER_PATH);
    else
        tier->helper_error = built ? dup_error(built, built_why)
                                   : dup_error(PROGCACHE_PCH_HELPER_PATH, why);
}

void progcache__pch_helper_open(progcache__pch_tier *tier)
{
    char why[600];
    if (!tier->helper || tier->helper_fd >= 0)
        return;
    if (open_helper(tier->helper, &tier->helper_fd, why, sizeof why) == 0)
        return;
    tier->helper_error = dup_error(tier->helper, why);
    progcache__free(tier->helper);
    tier->helper = NULL;
}

/* ---- the request ------------------------------------------------------------------ */

static int buf_sink(void *ctx, const void *data, size_t len)
{
    return progcache__buf_append(ctx, data, len) == PROGCACHE_OK ? 0 : -1;
}

int progcache__pch_request(progcache_buf *out, const pch_job *job, uint32_t mode,
                           const char *pch_name, uint64_t heap)
{
    const progcache_key_nvrtc_options *p = &job->program->nvrtc;
    progcache__wire_out w = {buf_sink, out, 0};
    progcache__wire_put_header(&w, PROGCACHE__WIRE_REQUEST);
    progcache__wire_put_u32(&w, mode);
    progcache__wire_put_u32(&w, (uint32_t)p->target);
    progcache__wire_put_u64(&w, PROGCACHE__PCH_HEAP_ADDR);
    progcache__wire_put_u64(&w, heap);
    progcache__wire_put_str(&w, job->tier->nvrtc_id, strlen(job->tier->nvrtc_id));
    progcache__wire_put_str(&w, job->name, strlen(job->name));
    progcache__wire_put_str(&w, job->source, mode == PROGCACHE__WIRE_DEPS ? 0 : job->source_len);
    progcache__wire_put_str(&w, job->source, job->prefix_len);
    progcache__wire_put_str(&w, pch_name ? pch_name : "", pch_name ? strlen(pch_name) : 0);
    progcache__wire_put_u32(&w, (uint32_t)job->argc);
    for (size_t i = 0; i < job->argc; i++)
        progcache__wire_put_str(&w, job->argv[i], strlen(job->argv[i]));
    progcache__wire_put_u32(&w, (uint32_t)p->num_name_expressions);
    for (size_t i = 0; i < p->num_name_expressions; i++)
        progcache__wire_put_str(&w, p->name_expressions[i], strlen(p->name_expressions[i]));
    progcache__wire_put_str(&w, job->warm ? job->warm : "", job->warm ? strlen(job->warm) : 0);
    progcache__wire_put_u32(&w, job->warm ? job->tier->settings.warm_ms : 0);
    if (w.bad || out->size > PROGCACHE__WIRE_MAX_REQUEST)
        return progcache__error(PROGCACHE_ENOMEM, "the request for the PCH helper does not fit "
                                                  "(%zu bytes)", out->size);
    return PROGCACHE_OK;
}

/* ---- the response ------------------------------------------------------------------- */

static int copy_str(progcache_buf *out, progcache__wire_in *in)
{
    size_t len;
    const char *s = progcache__wire_str(in, &len);
    return in->bad ? -1 : progcache_buf_set(out, s, len) == PROGCACHE_OK ? 0 : -1;
}

static int parse_deps(pch_result *out, progcache__wire_in *in)
{
    uint32_t n = progcache__wire_u32(in);
    if (n == UINT32_MAX) {
        out->deps_incomplete = 1;
        return in->bad ? -1 : 0;
    }
    if (in->bad || n > PROGCACHE__WIRE_MAX_DEPS || n > in->left / 48)
        return -1;
    out->deps.deps = progcache__calloc(n ? n : 1, sizeof *out->deps.deps);
    if (!out->deps.deps)
        return -1;
    for (; out->deps.num_deps < n; out->deps.num_deps++) {
        pch_dep *d = &out->deps.deps[out->deps.num_deps];
        uint32_t kind = progcache__wire_u32(in);
        d->size = progcache__wire_u64(in);
        d->mtime_ns = (int64_t)progcache__wire_u64(in);
        d->ctime_ns = (int64_t)progcache__wire_u64(in);
        d->dev = progcache__wire_u64(in);
        d->ino = progcache__wire_u64(in);
        size_t len;
        const char *path = progcache__wire_str(in, &len);
        if (in->bad || (kind != '+' && kind != '-' && kind != 'd') || !len)
            return -1;
        d->kind = (char)kind;
        if (!(d->path = progcache__malloc(len + 1)))
            return -1;
        memcpy(d->path, path, len + 1);
    }
    return 0;
}

static int parse(pch_result *out, const progcache_buf *data)
{
    progcache__wire_in in = {data->data, data->size, 0};
    if (!progcache__wire_header(&in, PROGCACHE__WIRE_RESPONSE))
        return -1;
    out->status = progcache__wire_u32(&in);
    out->nvrtc_result = (int32_t)progcache__wire_u32(&in);
    out->pch = progcache__wire_u32(&in);
    out->heap = progcache__wire_u32(&in);
    out->heap_required = progcache__wire_u64(&in);
    out->create_us = progcache__wire_u64(&in);
    out->compile_us = progcache__wire_u64(&in);
    size_t len;
    const char *id = progcache__wire_str(&in, &len);
    if (in.bad || len >= sizeof out->nvrtc_id)
        return -1;
    memcpy(out->nvrtc_id, id, len + 1);
    if (copy_str(&out->log, &in) || copy_str(&out->note, &in) || copy_str(&out->artifact, &in) ||
        copy_str(&out->lowered, &in) || parse_deps(out, &in))
        return -1;
    return in.left == 0 ? 0 : -1;
}

void progcache__pch_result_release(pch_result *r)
{
    if (!r)
        return;
    progcache_buf_free(&r->log);
    progcache_buf_free(&r->note);
    progcache_buf_free(&r->artifact);
    progcache_buf_free(&r->lowered);
    progcache__pch_manifest_free(&r->deps);
}

/* ---- the process ------------------------------------------------------------------- */

static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - progcache__clock_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, left > 60000 ? 60000 : (int)left + 1);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Send the request and shut the socket's sending side. 0; -1 on the
 * deadline; a helper that went away first is found out by receive. */
int progcache__pch_send(int sock, const progcache_buf *req, double deadline)
{
    for (size_t off = 0; off < req->size;) {
        int ready = wait_fd(sock, POLLOUT, deadline);
        if (ready == 0)
            return -1;
        if (ready < 0)
            break;
        ssize_t n = send(sock, req->data + off, req->size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            break; /* EPIPE: read what there is, then reap */
        off += (size_t)n;
    }
    (void)shutdown(sock, SHUT_WR);
    return 0;
}

/* Read the response to EOF: 0; -1 on the deadline; -2 when it is too long
 * or the socket failed. *first: when its first byte came. */
int progcache__pch_receive(int sock, progcache_buf *resp, double deadline, double *first)
{
    for (;;) {
        if (progcache__buf_reserve(resp, resp->size + 65536) != PROGCACHE_OK)
            return -2;
        int ready = wait_fd(sock, POLLIN, deadline);
        if (ready <= 0)
            return ready == 0 ? -1 : -2;
        ssize_t n = recv(sock, resp->data + resp->size, 65536, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return n == 0 ? 0 : -2;
        if (!resp->size)
            *first = progcache__clock_ms();
        resp->size += (size_t)n;
        if (resp->size > PROGCACHE__WIRE_MAX_RESPONSE)
            return -2;
    }
}

static int spawn(pid_t *pid, const char *path, int exe, int sock, int dir, int pch)
{
    /* Above every fd the child gets, so one dup2 never overwrites another's source. */
    int s = fcntl(sock, F_DUPFD_CLOEXEC, 10);
    int d = fcntl(dir, F_DUPFD_CLOEXEC, 10);
    int x = fcntl(exe, F_DUPFD_CLOEXEC, 10);
    int p = pch >= 0 ? fcntl(pch, F_DUPFD_CLOEXEC, 10) : -1;
    char exec_path[32];
    snprintf(exec_path, sizeof exec_path, "/proc/self/fd/%d", HELPER_EXEC_FD);
    char **env = progcache__pch_helper_env("/proc/self/fd/3");
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    int rc = -1;
    if (s < 0 || d < 0 || x < 0 || (pch >= 0 && p < 0) || !env)
        goto done;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_adddup2(&fa, s, 0);
    posix_spawn_file_actions_adddup2(&fa, s, 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, d, 3);
    if (p >= 0)
        posix_spawn_file_actions_adddup2(&fa, p, 4);
    /* Run from the descriptor that was checked, never by name again: the
     * child's own /proc/self/fd/5 is that file, whatever the path now
     * leads to. (Not close-on-exec, so that a script helper's interpreter
     * can open it too.) */
    posix_spawn_file_actions_adddup2(&fa, x, HELPER_EXEC_FD);
    posix_spawn_file_actions_addclosefrom_np(&fa, HELPER_EXEC_FD + 1);
    char *argv[] = {(char *)path, NULL};
    errno = posix_spawn(pid, exec_path, &fa, &attr, argv, env);
    rc = errno ? -1 : 0;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
done:;
    int saved = errno;
    progcache__free(env);
    if (s >= 0)
        close(s);
    if (d >= 0)
        close(d);
    if (x >= 0)
        close(x);
    if (p >= 0)
        close(p);
    errno = saved;
    return rc;
}

/* Reap pid, waiting no later than deadline: a helper that closed its
 * socket and did not exit is killed then (rule 3: it cannot hold the
 * caller). 0 reaped; 1 reaped after killing it at the deadline; -1 not
 * ours to reap (ECHILD: the caller ignores SIGCHLD, so the kernel reaps). */
static int reap(pid_t pid, int *status, double deadline)
{
    long pause_ns = 100000;
    int killed = 0;
    for (;;) {
        pid_t r = waitpid(pid, status, killed ? 0 : WNOHANG);
        if (r == pid)
            return killed;
        if (r < 0 && errno != EINTR)
            return -1;
        if (r == 0 && progcache__clock_ms() >= deadline) {
            (void)kill(pid, SIGKILL); /* that pid only: ours, not yet reaped */
            killed = 1;
        } else if (r == 0) {
            /* It normally exits right after its answer: a short pause. */
            struct timespec ts = {0, pause_ns};
            (void)nanosleep(&ts, NULL);
            if (pause_ns < 20000000)
                pause_ns *= 2;
        }
    }
}

/* A helper that gave its whole answer is reaped by a thread of its own:
 * its exit (tearing down NVRTC's heap, tens of milliseconds) is then off
 * the compile's path. The thread still kills it at a deadline. */
static void *reap_later(void *arg)
{
    pid_t pid = (pid_t)(intptr_t)arg;
    int status;
    (void)reap(pid, &status, progcache__clock_ms() + 5000);
    return NULL;
}

/* 1 when pid was handed to a reaping thread; 0: reap it here. */
static int reap_in_background(pid_t pid)
{
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0)
        return 0;
    int ok = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
             pthread_attr_setstacksize(&attr, (size_t)64 << 10) == 0 &&
             pthread_create(&t, &attr, reap_later, (void *)(intptr_t)pid) == 0;
    pthread_attr_destroy(&attr);
    return ok;
}

int progcache__pch_helper_start(pch_call *call, const pch_job *job, uint32_t mode, int pch_fd,
                                const char *pch_name, uint64_t heap)
{
    memset(call, 0, sizeof *call);
    call->sock = -1;
    const progcache__pch_tier *tier = job->tier;
    if (!tier->helper)
        return PROGCACHE_ENOTFOUND;
    call->helper = tier->helper;
    progcache_buf req = PROGCACHE_BUF_INIT;
    int sv[2] = {-1, -1};
    int rc = progcache__pch_request(&req, job, mode, pch_name, heap);
    if (rc)
        goto done;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno, "cannot make a socket for the PCH "
                                                          "helper");
        goto done;
    }
    call->start = progcache__clock_ms();
    call->deadline = call->start + progcache__pch_helper_timeout_ms;
    if (spawn(&call->pid, tier->helper, tier->helper_fd, sv[1], tier->dir_fd, pch_fd) != 0) {
        int err = errno;
        rc = progcache__error_errno(PROGCACHE_EIO, err, "cannot start the PCH helper %s%s",
                                    tier->helper,
                                    err == ENOENT ? " (it is run from its descriptor, through "
                                                    "/proc/self/fd: is /proc mounted?)"
                                                  : "");
        goto done;
    }
    call->sock = sv[0];
    sv[0] = -1;
    /* The helper reads the whole request before it does anything, so this
     * cannot wait on the helper's output. */
    call->talked = progcache__pch_send(call->sock, &req, call->deadline);
done:
    for (int i = 0; i < 2; i++)
        if (sv[i] >= 0)
            close(sv[i]);
    progcache_buf_free(&req);
    return rc;
}

int progcache__pch_helper_finish(pch_result *out, pch_call *call)
{
    memset(out, 0, sizeof *out);
    progcache_buf resp = PROGCACHE_BUF_INIT;
    int talked = call->talked ? call->talked
                              : progcache__pch_receive(call->sock, &resp, call->deadline,
                                                       &call->answer);
    double eof = progcache__clock_ms();
    close(call->sock);
    call->sock = -1;
    /* A whole answer that parses (the helper ends it when it is done)
     * ends the compile: an exit that has not come yet is reaped off this
     * path, by a thread of its own (waited -1: not reaped here). */
    int parsed = talked == 0 && parse(out, &resp) == 0;
    int status = 0, waited = -2;
    if (parsed) {
        pid_t r = waitpid(call->pid, &status, WNOHANG);
        if (r == call->pid)
            waited = 0;
        else if ((r == 0 && reap_in_background(call->pid)) || (r < 0 && errno == ECHILD))
            waited = -1;
    }
    /* Otherwise, late (-1): killed now. An unusable answer (-2: too long,
     * or the socket failed, as when the helper died): a second to exit, so
     * that a helper that died says how; then killed. Otherwise: until the
     * deadline. Only this pid, ours and not yet reaped, is ever killed. */
    if (waited == -2) {
        double now = progcache__clock_ms();
        double until = talked == -1 ? now
                       : talked != 0 && now + 1000 < call->deadline ? now + 1000
                                                                    : call->deadline;
        waited = reap(call->pid, &status, until);
    }
    int reaped = waited >= 0;
    out->wall_ms = progcache__clock_ms() - call->start;
    out->answer_ms = call->answer ? call->answer - call->start : 0;
    out->eof_ms = eof - call->start;
    int rc = PROGCACHE_OK;
    if (talked == -1 || (talked == 0 && waited == 1))
        rc = progcache__error(PROGCACHE_ETIMEOUT, "the PCH helper did not finish within %u ms; "
                                                  "it was killed",
                              progcache__pch_helper_timeout_ms);
    else if (reaped && waited != 1 && WIFSIGNALED(status))
        rc = progcache__error(PROGCACHE_ECORRUPT, "the PCH helper died of signal %d (%s)",
                              WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (talked != 0)
        rc = progcache__error(PROGCACHE_EIO, "the PCH helper %s gave no usable answer (too long, "
                                             "or the socket failed)%s",
                              call->helper, waited == 1 ? "; it was killed" : "");
    else if ((reaped && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) || !parsed)
        rc = progcache__error(PROGCACHE_EIO, "the PCH helper %s gave no usable answer (%zu "
                                             "bytes, exit status %d)",
                              call->helper, resp.size,
                              reaped && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (rc)
        progcache__pch_result_release(out);
    progcache_buf_free(&resp);
    return rc;
}

int progcache__pch_result_parse(pch_result *out, const progcache_buf *data)
{
    memset(out, 0, sizeof *out);
    if (parse(out, data) == 0)
        return 0;
    progcache__pch_result_release(out);
    return -1;
}

int progcache__pch_helper_detach(pch_call *call)
{
    close(call->sock);
    call->sock = -1;
    int status = 0, waited = reap(call->pid, &status, progcache__clock_ms() + 5000);
    if (call->talked || waited == 1 || (waited == 0 && (!WIFEXITED(status) ||
                                                        WEXITSTATUS(status) != 0)))
        return progcache__error(PROGCACHE_EIO, "the PCH helper %s did not take the request "
                                               "(%s)",
                                call->helper, waited == 1 ? "killed after 5 s" : "it failed");
    return PROGCACHE_OK;
}

int progcache__pch_helper_run(pch_result *out, const pch_job *job, uint32_t mode, int pch_fd,
                              const char *pch_name, uint64_t heap)
{
    pch_call call;
    int rc = progcache__pch_helper_start(&call, job, mode, pch_fd, pch_name, heap);
    if (rc) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    return progcache__pch_helper_finish(out, &call);
}
