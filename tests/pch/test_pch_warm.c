/* A warm helper (src/pch/pch_warm.c, helper/warm.c): after a compile
 * with a PCH the helper stays, as a template under an abstract socket
 * name, and later compiles with a PCH go to it.
 *
 *  - served: the second and later compiles are the template's
 *    (pch_warm), the bytes those of a compile without the tier; the name
 *    is this user's and one template serves parallel processes;
 *  - the template exits after PROGCACHE_PCH_WARM without a compile, and
 *    PROGCACHE_PCH_WARM=0 leaves none;
 *  - a process of another user is not served (closed unanswered), and
 *    the template goes on;
 *  - a name held by another user: refused, said once, a fresh helper
 *    compiles (the bytes unchanged);
 *  - a template that closes every connection unanswered (a fake, this
 *    user's): counted (pch_warm_failures), said, a fresh helper compiles.
 *
 * Its templates are its own: NVRTC_PROGCACHE_TEST_WARM, passed to the
 * helper like NVRTC's own variables, is part of the name. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pch_fixtures.h"
#include "procs.h"

static int connect_name(const char *name)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, name, strlen(name));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    if (connect(s, (struct sockaddr *)&a,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) != 0) {
        close(s);
        return -1;
    }
    return s;
}

static char tag[80]; /* NVRTC_PROGCACHE_TEST_WARM=<pid> */

/* Whether the listener of name is this test's template (its environment
 * has the tag). */
static int ours(const char *name)
{
    int s = connect_name(name);
    if (s < 0)
        return 0;
    struct ucred cred;
    socklen_t len = sizeof cred;
    int got = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
    close(s);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)cred.pid);
    size_t n = 0;
    char *env = got ? test_read_file(path, &n) : NULL;
    int found = 0;
    for (size_t at = 0; env && at < n; at += strlen(env + at) + 1)
        found |= !strcmp(env + at, tag);
    free(env);
    return found;
}

/* Whether a socket listens under name: read from /proc/net/unix (a
 * connection would keep the template from its idle exit). */
static int listening(const char *name)
{
    char want[160];
    snprintf(want, sizeof want, "@%s\n", name);
    FILE *f = fopen("/proc/net/unix", "r");
    CHECK(f != NULL);
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long flags = 0;
        const char *at = strchr(line, '@');
        found |= at && !strcmp(at, want) && sscanf(line, "%*s %*s %*s %lx", &flags) == 1 &&
                 (flags & 0x10000);
    }
    fclose(f);
    return found;
}

/* The abstract name of this test's template ("" when none is listening). */
static void template_name(char *out, size_t len)
{
    char want[64];
    snprintf(want, sizeof want, "@progcache-pch-%u-", (unsigned)geteuid());
    out[0] = '\0';
    FILE *f = fopen("/proc/net/unix", "r");
    CHECK(f != NULL);
    char line[512], found[128];
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, want);
        unsigned long flags = 0;
        /* Num RefCount Protocol Flags ...: flag 0x10000, listening. */
        if (!at || sscanf(line, "%*s %*s %*s %lx", &flags) != 1 || !(flags & 0x10000))
            continue;
        snprintf(found, sizeof found, "%.*s", (int)strcspn(at + 1, " \n"), at + 1);
        if (ours(found))
            snprintf(out, len, "%s", found);
    }
    fclose(f);
}

/* The template, once it has taken its name: the helper that answered
 * makes it right after its answer. */
static void wait_template(char *out, size_t len)
{
    template_name(out, len);
    for (int i = 0; i < 500 && !out[0]; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        template_name(out, len);
    }
    CHECK(out[0] != '\0');
}

/* Stop the template called name (its pid from SO_PEERCRED) and wait
 * until the name is free. */
static void stop_template(const char *name)
{
    int s = connect_name(name);
    if (s < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof cred;
    CHECK(getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0);
    close(s);
    CHECK(kill(cred.pid, SIGTERM) == 0);
    for (int i = 0; i < 200 && listening(name); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK(!listening(name));
}

static char name[128];

static void served(void)
{
    char *dir;
    char pch[1024];
    progcache *cache = open_warm(&dir, "pchwarm", 0, pch, sizeof pch);
    logbook book = {""};
    /* open_warm used the PCH once, through a fresh helper asked to stay. */
    wait_template(name, sizeof name);
    progcache_stats before = stats_of(cache);
    compile_same(cache, 10, 3, &book);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == before.pch_hits + 3 && s.pch_warm == before.pch_warm + 3 &&
          s.pch_warm_failures == 0);
    close_cache(cache, dir);
}

/* Six processes at once, each its own handle: all served, all right. */
static int parallel_child(size_t i, void *ctx)
{
    (void)ctx;
    char *dir;
    char pch[1024];
    progcache *cache = open_warm(&dir, "pchwarmpar", 100 + 10 * (int)i, pch, sizeof pch);
    logbook book = {""};
    progcache_stats before = stats_of(cache);
    compile_same(cache, 103 + 10 * (int)i, 2, &book);
    int ok = stats_of(cache).pch_warm >= before.pch_warm + 2;
    close_cache(cache, dir);
    return ok ? 0 : 1;
}

static void parallel(void)
{
    test_gate gate;
    pid_t pids[6];
    test_gate_fork(&gate, pids, 6, parallel_child, NULL);
    test_gate_open(&gate);
    test_reap(pids, 6, NULL);
}

/* Another user connects: closed unanswered; the template goes on. */
static void other_user(void)
{
    struct passwd *nobody = getpwnam("nobody");
    if (geteuid() != 0 || !nobody) {
        printf("test_pch_warm: another user: SKIPPED (needs root and user nobody)\n");
        return;
    }
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)
            _exit(2);
        int s = connect_name(name);
        if (s < 0)
            _exit(3);
        struct pollfd p = {s, POLLIN, 0};
        char c;
        /* Closed at once: readable, and at its end. */
        _exit(poll(&p, 1, 5000) == 1 && read(s, &c, 1) == 0 ? 0 : 4);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(listening(name));
}

/* The name held by a listener of another user, or (fake) by this user's
 * listener that closes every connection: the compiles are right anyway. */
static pid_t hold_name(int as_nobody)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        /* Gone with the test, and not holding its output open. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        struct passwd *nobody = getpwnam("nobody");
        if (as_nobody && (!nobody || setgid(nobody->pw_gid) != 0 ||
                          setuid(nobody->pw_uid) != 0))
            _exit(2);
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        memcpy(a.sun_path + 1, name, strlen(name));
        int ls = socket(AF_UNIX, SOCK_STREAM, 0);
        if (bind(ls, (struct sockaddr *)&a,
                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) != 0 ||
            listen(ls, 16) != 0)
            _exit(3);
        (void)!write(ready[1], "r", 1);
        for (;;) {
            int c = accept(ls, NULL, NULL);
            if (c >= 0)
                close(c);
        }
    }
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    close(ready[0]);
    return pid;
}

static void held(int as_nobody, const char *cache_tag, const char *said)
{
    char *dir;
    char pch[1024];
    progcache *cache = open_warm(&dir, cache_tag, 200 + 10 * as_nobody, pch, sizeof pch);
    wait_template(name, sizeof name);
    stop_template(name);
    pid_t holder = hold_name(as_nobody);
    /* A new handle: what is said once is said again. */
    progcache_close(cache);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    logbook book = {""};
    progcache_stats before = stats_of(cache);
    compile_same(cache, 203 + 10 * as_nobody, 2, &book);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == before.pch_hits + 2 && s.pch_warm == before.pch_warm);
    CHECK(s.pch_warm_failures == (as_nobody ? 0 : before.pch_warm_failures + 2));
    CHECK(strstr(book.text, said) != NULL);
    close_cache(cache, dir);
    CHECK(kill(holder, SIGKILL) == 0 && waitpid(holder, NULL, 0) == holder);
}

static void held_by_other_user(void)
{
    if (geteuid() != 0 || !getpwnam("nobody")) {
        printf("test_pch_warm: a name held by another user: SKIPPED (needs root and nobody)\n");
        return;
    }
    held(1, "pchwarmsquat", "held by a process of uid");
}

static void closes_unanswered(void)
{
    held(0, "pchwarmfake", "did not answer; a fresh one compiles");
}

/* Idle for PROGCACHE_PCH_WARM: gone. Off: none is left. */
static void idle_and_off(void)
{
    char *dir;
    char pch[1024];
    setenv("PROGCACHE_PCH_WARM", "700ms", 1);
    progcache *cache = open_warm(&dir, "pchwarmidle", 300, pch, sizeof pch);
    char now[128];
    wait_template(now, sizeof now);
    for (int i = 0; i < 400 && listening(now); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK(!listening(now));
    close_cache(cache, dir);
    setenv("PROGCACHE_PCH_WARM", "0", 1);
    cache = open_warm(&dir, "pchwarmoff", 310, pch, sizeof pch);
    logbook book = {""};
    compile_same(cache, 313, 2, &book);
    template_name(now, sizeof now);
    CHECK(now[0] == '\0' && stats_of(cache).pch_warm == 0);
    close_cache(cache, dir);
    setenv("PROGCACHE_PCH_WARM", "20s", 1);
}

static void setup(void)
{
    snprintf(tag, sizeof tag, "NVRTC_PROGCACHE_TEST_WARM=%d", (int)getpid());
    setenv("NVRTC_PROGCACHE_TEST_WARM", strchr(tag, '=') + 1, 1);
    setenv("PROGCACHE_PCH_WARM", "20s", 1);
}

static void teardown(void)
{
    char now[128];
    template_name(now, sizeof now);
    if (now[0])
        stop_template(now);
}

PCH_TEST_MAIN("test_pch_warm", setup, served, parallel, other_user, held_by_other_user,
              closes_unanswered, idle_and_off, teardown)
