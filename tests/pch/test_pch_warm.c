/* A warm helper (src/pch/pch_warm.c, helper/helper_warm.c): after a compile
 * with a PCH the helper stays, as a template under an abstract socket
 * name, and later compiles with a PCH go to it.
 *
 *  - served: the second and later compiles are the template's
 *    (pch_warm), the bytes those of a compile without the tier; the name
 *    is this user's and one template serves parallel processes;
 *  - the template exits after PROGCACHE_PCH_WARM without a compile of
 *    this user's (another user connecting all the while), and
 *    PROGCACHE_PCH_WARM=0 leaves none;
 *  - a process of another user is not served (closed unanswered), and
 *    the template goes on;
 *  - two prefixes through one template: each compile its own PCH's bytes;
 *  - a relative include path: the child works in the caller's directory;
 *  - another mount namespace: another template;
 *  - a name held by another user: refused, counted (pch_warm_failures),
 *    said once, a fresh helper compiles (the bytes unchanged);
 *  - a listener of this user's that closes every connection, or takes
 *    them and never answers (2 s, not the compile's ten minutes): counted
 *    once (pch_warm_failures), said, a fresh helper compiles, and the
 *    handle stops asking; one that acknowledges and never answers: the
 *    helper's deadline once, then the compile here;
 *
 * Its templates are its own: NVRTC_PROGCACHE_TEST_WARM, passed to the
 * helper like NVRTC's own variables, is part of the name. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
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
#include "pch/pch_tier.h"
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

/* This test's templates: each name but keep given to each (NULL: the
 * last found, into out). */
static void templates(char *out, size_t len, const char *keep, void (*each)(const char *))
{
    char want[64];
    snprintf(want, sizeof want, "@progcache-pch-%u-", (unsigned)geteuid());
    if (out)
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
        if ((keep && !strcmp(found, keep)) || !ours(found))
            continue;
        if (out)
            snprintf(out, len, "%s", found);
        if (each)
            each(found);
    }
    fclose(f);
}

/* The abstract name of this test's template ("" when none is listening). */
static void template_name(char *out, size_t len)
{
    templates(out, len, NULL, NULL);
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

/* Variant v of a program with an #include after its first declaration
 * (not in the PCH: the child reads it), through cache; flags as
 * compile_v's. */
static compiled compile_late(progcache *cache, int v, unsigned int flags)
{
    char src[512];
    snprintf(src, sizeof src,
             "#include \"mylib.h\"\nconstexpr float k%d = %d.0f;\n#include \"late.h\"\n"
             "extern \"C\" __global__ void k(float *x) { x[0] = late(mylib_scale(k%d)); }\n",
             v, v, v);
    const char *options[] = {opt_hdr0, "-Ihdr", "-arch=sm_90"};
    return compile_source(cache, src, options, 3, "late", flags, PROGCACHE_TARGET_CUBIN, NULL,
                          NULL);
}

/* A relative include path means the caller's working directory to the
 * template's child too (it gets the caller's as a descriptor): a header
 * after the prefix is found there, and the bytes are a plain compile's. */
static void relative_include(void)
{
    char cwd[1024], late[700];
    snprintf(late, sizeof late, "%s/late.h", hdr);
    write_text(late, "__device__ inline float late(float x) { return x * 7.0f; }\n");
    CHECK(getcwd(cwd, sizeof cwd) != NULL && chdir(work) == 0);
    char *dir, *plain_dir;
    progcache *cache = open_cache(&dir, "pchwarmrel");
    progcache *plain = open_cache(&plain_dir, "pchwarmrelplain");
    for (int v = 0; v < 3; v++) /* seen, made, used: a template after it */
        free(compile_late(cache, v, 0).bytes);
    wait_template(name, sizeof name);
    progcache_stats before = stats_of(cache);
    for (int v = 3; v < 5; v++) {
        compiled c = compile_late(cache, v, 0);
        compiled p = compile_late(plain, v, PROGCACHE_PROGRAM_NO_PCH);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == before.pch_hits + 2 && s.pch_warm == before.pch_warm + 2);
    close_cache(cache, dir);
    close_cache(plain, plain_dir);
    CHECK(chdir(cwd) == 0);
}

/* Another mount namespace (a container's view of the files) is another
 * template: the first compile there is a fresh helper's, the next its
 * own template's. */
static int namespace_child(size_t i, void *ctx)
{
    (void)i;
    const char *dir = ctx;
    if (unshare(CLONE_NEWNS) != 0)
        return 2;
    progcache *cache;
    if (progcache_open(&cache, dir, NULL) != PROGCACHE_OK)
        return 3;
    progcache_stats before = stats_of(cache);
    logbook book = {""};
    compile_same(cache, 603, 1, &book);
    int fresh = stats_of(cache).pch_warm == before.pch_warm;
    struct timespec ts = {0, 300000000}; /* its template takes its name */
    nanosleep(&ts, NULL);
    compile_same(cache, 604, 1, &book);
    int served = stats_of(cache).pch_warm == before.pch_warm + 1;
    progcache_close(cache);
    return fresh && served ? 0 : 1;
}

static void another_namespace(void)
{
    if (geteuid() != 0) {
        printf("test_pch_warm: another mount namespace: SKIPPED (needs root)\n");
        return;
    }
    char *dir;
    char pch[1024];
    progcache *cache = open_warm(&dir, "pchwarmns", 600, pch, sizeof pch);
    wait_template(name, sizeof name);
    test_gate gate;
    pid_t pid;
    test_gate_fork(&gate, &pid, 1, namespace_child, dir);
    test_gate_open(&gate);
    test_reap(&pid, 1, NULL);
    /* The namespace's template goes: the tests after this find one. */
    templates(NULL, 0, name, stop_template);
    close_cache(cache, dir);
}

/* How a listener holds the name: another user's; this user's, closing
 * every connection; this user's, keeping them and never answering. */
enum { HOLD_CLOSES = 0, HOLD_NOBODY = 1, HOLD_SILENT = 2, HOLD_ACKS = 3 };

/* The name held by such a listener: the compiles are right anyway. */
static pid_t hold_name(int how)
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
        if (how == HOLD_NOBODY && (!nobody || setgid(nobody->pw_gid) != 0 ||
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
            char byte;
            /* HOLD_ACKS: takes the request's descriptors, says so, and
             * never answers. */
            if (c >= 0 && how == HOLD_ACKS && read(c, &byte, 1) == 1)
                (void)!write(c, "A", 1);
            if (c >= 0 && how != HOLD_SILENT && how != HOLD_ACKS)
                close(c);
        }
    }
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    close(ready[0]);
    return pid;
}

static void held(int how, const char *cache_tag, const char *said)
{
    char *dir;
    char pch[1024];
    progcache *cache = open_warm(&dir, cache_tag, 200 + 10 * how, pch, sizeof pch);
    wait_template(name, sizeof name);
    stop_template(name);
    pid_t holder = hold_name(how);
    /* A new handle: what is said once is said again. */
    progcache_close(cache);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    logbook book = {""};
    progcache_stats before = stats_of(cache);
    compile_same(cache, 203 + 10 * how, 2, &book);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == before.pch_hits + 2 && s.pch_warm == before.pch_warm);
    /* One failure, then the handle stops asking; another user's listener
     * counts as one too (issue 29). */
    CHECK(s.pch_warm_failures == before.pch_warm_failures + 1);
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
    held(HOLD_NOBODY, "pchwarmsquat", "held by a process of uid");
}

static void closes_unanswered(void)
{
    held(HOLD_CLOSES, "pchwarmfake", "did not answer (it closed the connection)");
}

/* A listener that takes the connection and never answers costs the ack's
 * 2 s once (the compile's own deadline is ten minutes): the test would
 * hang without it. */
static void never_answers(void)
{
    held(HOLD_SILENT, "pchwarmsilent", "did not answer (it did not take the request within 2 s)");
}

/* A listener that acknowledges and never answers: the helper's deadline
 * (shortened here), then the compile runs here, as for a fresh helper that
 * hangs; no second helper gets a deadline of its own. */
static void acks_then_hangs(void)
{
    char *dir;
    char pch[1024];
    progcache *cache = open_warm(&dir, "pchwarmacks", 700, pch, sizeof pch);
    wait_template(name, sizeof name);
    stop_template(name);
    pid_t holder = hold_name(HOLD_ACKS);
    progcache_close(cache);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    unsigned int saved = progcache__pch_helper_timeout_ms;
    progcache__pch_helper_timeout_ms = 1000;
    logbook book = {""};
    progcache_stats before = stats_of(cache);
    compile_same(cache, 703, 1, &book);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == before.pch_hits && s.pch_warm == before.pch_warm &&
          s.pch_warm_failures == before.pch_warm_failures + 1 &&
          s.pch_fallbacks == before.pch_fallbacks + 1);
    CHECK(strstr(book.text, "did not finish within 1000 ms") != NULL);
    progcache__pch_helper_timeout_ms = saved;
    close_cache(cache, dir);
    CHECK(kill(holder, SIGKILL) == 0 && waitpid(holder, NULL, 0) == holder);
}

/* Two prefixes (the header in two versions) through one template: each
 * compile gets its own PCH, the bytes of its own plain compile. */
static void two_prefixes(void)
{
    char *dir3, *dir5;
    char pch[1024];
    progcache *c3 = open_warm(&dir3, "pchwarm3", 400, pch, sizeof pch);
    wait_template(name, sizeof name);
    write_header(5);
    progcache *c5 = open_cache(&dir5, "pchwarm5");
    warm(c5, 410, "h5");
    for (int round = 0; round < 2; round++) {
        progcache *cache = round ? c3 : c5;
        const char *digest = round ? "h3" : "h5";
        if (round)
            write_header(3);
        progcache_stats before = stats_of(cache);
        for (int v = 420 + round * 10; v < 422 + round * 10; v++) {
            compiled c = compile_v(cache, v, 0, digest, PROGCACHE_TARGET_CUBIN, NULL, NULL);
            compiled p = plain_v(v, digest, PROGCACHE_TARGET_CUBIN);
            CHECK(same(&c, &p));
            free(c.bytes);
            free(p.bytes);
        }
        CHECK(stats_of(cache).pch_warm == before.pch_warm + 2);
    }
    close_cache(c3, dir3);
    close_cache(c5, dir5);
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
    /* Another user connecting all the while does not keep it. */
    pid_t poker = -1;
    struct passwd *nobody = getpwnam("nobody");
    if (geteuid() == 0 && nobody && (poker = fork()) == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)
            _exit(2);
        for (;;) {
            int s = connect_name(now);
            if (s >= 0)
                close(s);
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < 400 && listening(now); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK(!listening(now));
    if (poker > 0)
        CHECK(kill(poker, SIGKILL) == 0 && waitpid(poker, NULL, 0) == poker);
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

PCH_TEST_MAIN("test_pch_warm", setup, served, parallel, other_user, two_prefixes, relative_include,
              another_namespace, held_by_other_user, closes_unanswered, never_answers,
              acks_then_hangs, idle_and_off, teardown)
