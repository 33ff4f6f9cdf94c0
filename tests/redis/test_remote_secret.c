/* A secret that was asked for and cannot be used stops the open, never
 * downgrades the remote tier to unauthenticated (docs/SECURITY.md): every
 * way PROGCACHE_REMOTE_SECRET_FILE can be unusable (empty, too short,
 * missing, unreadable, a FIFO, /dev/zero, a directory, too long, readable
 * or writable by every user) makes progcache_open fail at once with a
 * message naming the variable, the file and why; the progcache command
 * prints it and exits 1. An explicit progcache_redis_options.secret that is
 * too short is refused the same way. None of this needs a Redis server: an
 * open that fails on its secret fails before any connection. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "progcache/remote.h"

#define VAR "PROGCACHE_REMOTE_SECRET_FILE"

static char *scratch;
static char dir[4096];
static int have_hiredis;

/* A hang (a FIFO waited on, /dev/zero read without end) fails the test
 * instead of stalling it until ctest's timeout. */
static void hung(int sig)
{
    (void)sig;
    static const char msg[] = "test_remote_secret: an open hung on its secret file\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void write_file(const char *path, const void *data, size_t size, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size);
    CHECK(close(fd) == 0);
    CHECK(chmod(path, mode) == 0);
}

/* progcache_open with PROGCACHE_REMOTE set and the secret file secret
 * must fail with code and a message that starts with "progcache_open:
 * PROGCACHE_REMOTE_SECRET_FILE <secret> " and holds why. */
static void expect_refused(const char *secret, int code, const char *why)
{
    setenv("PROGCACHE_REMOTE", "redis://127.0.0.1:1", 1);
    setenv(VAR, secret, 1);
    alarm(10);
    progcache *c = (progcache *)1;
    int rc = progcache_open(&c, dir, NULL);
    alarm(0);
    char head[4200];
    snprintf(head, sizeof head, "progcache_open: " VAR " %s ", secret);
    const char *m = progcache_error_last();
    if (rc != code || strncmp(m, head, strlen(head)) != 0 || !strstr(m, why)) {
        fprintf(stderr, "secret %s: rc %d (want %d), message \"%s\", want \"%s...%s\"\n",
                secret, rc, code, m, head, why);
        CHECK(0);
    }
    CHECK(c == NULL);
    /* progcache_default_remote says the same and hands out no secret. */
    progcache_buf url = PROGCACHE_BUF_INIT, bytes = PROGCACHE_BUF_INIT;
    CHECK_RC(code, progcache_default_remote(&url, &bytes));
    CHECK(bytes.size == 0);
    CHECK(strstr(progcache_error_last(), why) != NULL);
    progcache_buf_free(&url);
    progcache_buf_free(&bytes);
}

/* The open succeeds (with hiredis; without it, the remote tier is
 * unavailable and the open fails saying so, not on the secret). */
static void expect_accepted(const char *secret)
{
    setenv("PROGCACHE_REMOTE", "redis://127.0.0.1:1", 1);
    setenv(VAR, secret, 1);
    progcache *c = NULL;
    int rc = progcache_open(&c, dir, NULL);
    if (have_hiredis) {
        if (rc)
            fprintf(stderr, "secret %s refused: %s\n", secret, progcache_error_last());
        CHECK_OK(rc);
    } else {
        CHECK_RC(PROGCACHE_EREMOTE, rc);
        CHECK(strstr(progcache_error_last(), "without hiredis") != NULL);
    }
    progcache_close(c);
}

/* A secret file of these bytes and mode, refused with code and a message
 * containing why, or accepted (why NULL). */
typedef struct secret_case {
    const char *name, *data;
    size_t size;
    mode_t mode;
    int code;
    const char *why;
} secret_case;

static void run_cases(const secret_case *cases, size_t n)
{
    char path[4096];
    for (size_t i = 0; i < n; i++) {
        const secret_case *t = &cases[i];
        snprintf(path, sizeof path, "%s/%s", scratch, t->name);
        write_file(path, t->data, t->size, t->mode);
        if (t->mode == 0000 && geteuid() == 0)
            printf("%s secret file: not tested (running as root, which reads any file)\n",
                   t->name);
        else if (t->why)
            expect_refused(path, t->code, t->why);
        else
            expect_accepted(path);
    }
}

#define KEY32 "0123456789abcdef0123456789abcdef"

static void test_unusable_files(void)
{
    static const secret_case cases[] = {
        {"empty", "", 0, 0600, PROGCACHE_EINVAL,
         "is empty: a shared secret must be at least 16 bytes (openssl rand 32 > FILE"},
        {"newline", "\n", 1, 0600, PROGCACHE_EINVAL,
         "is empty: a shared secret must be at least 16"},
        /* 15 once the newline is dropped. */
        {"short", "fifteen bytes..\n", 16, 0600, PROGCACHE_EINVAL,
         "holds only 15 bytes: a shared secret must be at least 16 bytes"},
        {"one", "x", 1, 0600, PROGCACHE_EINVAL, "holds only 1 byte: "},
        {"unreadable", KEY32, 32, 0000, PROGCACHE_EIO, "cannot be opened: Permission denied"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);

    char path[4096];
    snprintf(path, sizeof path, "%s/missing", scratch);
    expect_refused(path, PROGCACHE_EIO, "cannot be opened: No such file or directory");
    snprintf(path, sizeof path, "%s/fifo", scratch);
    CHECK(mkfifo(path, 0600) == 0);
    expect_refused(path, PROGCACHE_EINVAL, "is a FIFO, not a regular file");
    expect_refused("/dev/zero", PROGCACHE_EINVAL, "is a character device, not a regular file");
    expect_refused(scratch, PROGCACHE_EINVAL, "is a directory, not a regular file");

    static char big[5000];
    memset(big, 'k', sizeof big);
    snprintf(path, sizeof path, "%s/big", scratch);
    write_file(path, big, sizeof big, 0600);
    expect_refused(path, PROGCACHE_EINVAL, "is longer than 4096 bytes");
}

static void test_permissions(void)
{
    static const secret_case cases[] = {
        {"world-readable", KEY32, 32, 0644, PROGCACHE_EINVAL,
         "can be read by every user (mode 0644): anyone on this machine could forge cache "
         "entries with it; make it private (chmod o-rwx FILE)"},
        {"world-writable", KEY32, 32, 0602, PROGCACHE_EINVAL,
         "can be written by every user (mode 0602)"},
        /* A group may share a secret (a cache shared by a team). */
        {"group", KEY32, 32, 0640, 0, NULL},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* The path to the file (rule 4): reached through directories nobody else
 * can change, checked and read through one descriptor. */
static void test_paths(void)
{
    static const char key[] = "0123456789abcdef0123456789abcdef";
    char d[4096], path[4200], why[4400];
    snprintf(d, sizeof d, "%s/open", scratch);
    CHECK(mkdir(d, 0777) == 0 && chmod(d, 0777) == 0);
    snprintf(path, sizeof path, "%s/secret", d);
    write_file(path, key, 32, 0600);
    snprintf(why, sizeof why, "cannot be trusted: the directory %s is writable by other users "
                              "(mode 0777)", d);
    expect_refused(path, PROGCACHE_EINVAL, why);
    /* Sticky, as /tmp: what this user owns in it is safe, another's is not. */
    snprintf(d, sizeof d, "%s/sticky", scratch);
    CHECK(mkdir(d, 0777) == 0 && chmod(d, 01777) == 0);
    snprintf(path, sizeof path, "%s/secret", d);
    write_file(path, key, 32, 0600);
    expect_accepted(path);
    if (geteuid() == 0) {
        CHECK(chown(path, 65534, 0) == 0 && chmod(path, 0640) == 0);
        expect_refused(path, PROGCACHE_EINVAL, "is owned by uid 65534 in");
    }
    /* A link from a trusted directory is followed (a secret mounted as
     * Kubernetes does: name -> ..data/name). */
    snprintf(d, sizeof d, "%s/mounted", scratch);
    CHECK(mkdir(d, 0755) == 0);
    snprintf(path, sizeof path, "%s/..data", d);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/..data/secret", d);
    write_file(path, key, 32, 0600);
    snprintf(path, sizeof path, "%s/secret", d);
    CHECK(symlink("..data/secret", path) == 0);
    expect_accepted(path);
}

static void test_usable(void)
{
    char path[4096];
    unsigned char random[32];
    for (size_t i = 0; i < sizeof random; i++)
        random[i] = (unsigned char)(i * 37 + 11); /* binary, as from openssl rand 32 */
    snprintf(path, sizeof path, "%s/good", scratch);
    write_file(path, random, sizeof random, 0600);
    expect_accepted(path);
    snprintf(path, sizeof path, "%s/sixteen", scratch);
    write_file(path, "sixteen bytes...\n", 17, 0400);
    expect_accepted(path);
}

/* Without PROGCACHE_REMOTE there is no remote tier, so nothing is fetched
 * unauthenticated: the secret file is not read (docs/CONFIG.md). Nor with
 * PROGCACHE_NO_REMOTE, which ignores the environment's remote tier. */
static void test_secret_without_remote(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/empty", scratch);
    unsetenv("PROGCACHE_REMOTE");
    setenv(VAR, path, 1);
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, NULL));
    progcache_close(c);
    progcache_buf url = PROGCACHE_BUF_INIT, bytes = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_default_remote(&url, &bytes));
    progcache_buf_free(&url);
    progcache_buf_free(&bytes);

    setenv("PROGCACHE_REMOTE", "redis://127.0.0.1:1", 1);
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_NO_REMOTE;
    CHECK_OK(progcache_open(&c, dir, &opts));
    progcache_close(c);
    unsetenv("PROGCACHE_REMOTE");
    unsetenv(VAR);
}

/* An explicit secret that is too short is refused, never dropped. */
static void test_explicit_secret(void)
{
    unsetenv("PROGCACHE_REMOTE");
    unsetenv(VAR);
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = "redis://127.0.0.1:1";
    ro.secret = "short";
    ro.secret_len = 5;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.remote = &ro;
    progcache *c = NULL;
    int rc = progcache_open(&c, dir, &opts);
    CHECK(c == NULL);
    if (!have_hiredis) {
        CHECK_RC(PROGCACHE_EREMOTE, rc);
        return;
    }
    CHECK_RC(PROGCACHE_EINVAL, rc);
    CHECK(!strcmp(progcache_error_last(),
                  "progcache_open: the remote tier: progcache_store_redis_new: opts->secret: the "
                  "shared secret is 5 bytes; use at least 16 (32 random bytes are best, e.g. "
                  "from `openssl rand -hex 32`)"));
    ro.secret_len = 15;
    ro.secret = "fifteen bytes..";
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&c, dir, &opts));
    CHECK(strstr(progcache_error_last(), "the shared secret is 15 bytes") != NULL);
    ro.secret = "sixteen bytes...";
    ro.secret_len = 16;
    CHECK_OK(progcache_open(&c, dir, &opts));
    progcache_close(c);
}

/* Run the progcache command; returns its exit status, stderr in err. */
static int run_tool(char *err, size_t err_size, const char *const *args)
{
    const char *bin = getenv("PROGCACHE_BIN");
    CHECK(bin != NULL);
    char err_path[4096];
    snprintf(err_path, sizeof err_path, "%s/tool-stderr", scratch);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(99);
        char *argv[16];
        size_t n = 0;
        argv[n++] = (char *)bin;
        for (size_t i = 0; args[i] && n < 15; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(bin, argv);
        _exit(98);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    size_t size = 0;
    char *text = test_read_file(err_path, &size);
    CHECK(text != NULL);
    snprintf(err, err_size, "%s", text);
    free(text);
    return WEXITSTATUS(status);
}

/* The progcache command prints the library's message and exits 1; nothing
 * is stored. */
static void test_tool(void)
{
    if (!getenv("PROGCACHE_BIN")) {
        printf("the progcache command: not tested (PROGCACHE_BIN unset)\n");
        return;
    }
    char secret[4096], artifact[4096], tool_dir[4096], err[8192];
    snprintf(secret, sizeof secret, "%s/empty", scratch);
    snprintf(artifact, sizeof artifact, "%s/artifact", scratch);
    snprintf(tool_dir, sizeof tool_dir, "%s/tool-cache", scratch);
    write_file(artifact, "some bytes", 10, 0600);
    setenv("PROGCACHE_REMOTE", "redis://127.0.0.1:1", 1);
    setenv(VAR, secret, 1);
    char want[4300];
    snprintf(want, sizeof want, VAR " %s is empty: a shared secret must be at least 16 bytes",
             secret);

    const char *put[] = {"put", "00ff", artifact, "--dir", tool_dir, NULL};
    CHECK(run_tool(err, sizeof err, put) == 3);
    if (!strstr(err, want) || strncmp(err, "progcache put: ", 15) != 0) {
        fprintf(stderr, "progcache put said: %s", err);
        CHECK(0);
    }
    const char *get[] = {"get", "00ff", "--dir", tool_dir, NULL};
    CHECK(run_tool(err, sizeof err, get) == 3);
    CHECK(strstr(err, want) && !strncmp(err, "progcache get: ", 15));
    /* Nothing went in: without the remote tier, the key is a miss. */
    unsetenv("PROGCACHE_REMOTE");
    CHECK(run_tool(err, sizeof err, get) == 1);
    CHECK(strstr(err, "a miss") != NULL);
    unsetenv(VAR);
}

int main(void)
{
    signal(SIGALRM, hung);
    scratch = test_mkdtemp("secret");
    snprintf(dir, sizeof dir, "%s/cache", scratch);
    progcache_redis_options ro = PROGCACHE_REDIS_OPTIONS_INIT;
    ro.url = "redis://127.0.0.1:1";
    progcache_store *probe = NULL;
    have_hiredis = progcache_store_redis_new(&probe, &ro) == PROGCACHE_OK;
    progcache_store_free(probe);
    if (!have_hiredis)
        printf("built without hiredis: usable secrets end in PROGCACHE_EREMOTE\n");

    test_unusable_files();
    test_permissions();
    test_paths();
    test_usable();
    test_secret_without_remote();
    test_explicit_secret();
    test_tool();
    test_rmtree(scratch);
    free(scratch);
    printf("test_remote_secret: all passed\n");
    return 0;
}
