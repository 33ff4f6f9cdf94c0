/* The helpers the test_adversarial_*.c files share (issue 12): a store
 * that logs into log_text, paths in the cache, files of every type, a
 * child under alarm() for calls that used to block, and verify with its
 * reports collected. */
#include "adversarial_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

char log_text[8192];

void capture_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    (void)level;
    size_t used = strlen(log_text);
    snprintf(log_text + used, sizeof log_text - used, "%s\n", message);
}

progcache_store *open_store_opts(const char *dir, uint64_t max_size, unsigned int flags,
                                 uint64_t max_artifact)
{
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.max_size = max_size;
    o.flags = PROGCACHE_FILE_NO_FSYNC | flags;
    o.max_artifact_size = max_artifact;
    o.log = capture_log;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, dir, &o));
    return s;
}

progcache_store *open_store(const char *dir)
{
    return open_store_opts(dir, 0, 0, 0);
}

void path_of(char *out, size_t len, const char *dir, const char *rel)
{
    snprintf(out, len, "%s/%s", dir, rel);
}

void entry_of(char *out, size_t len, const char *dir, const char *key)
{
    char rel[FILE_REL_PATH_MAX];
    CHECK_OK(progcache__file_rel_path(rel, NULL, key, strlen(key)));
    path_of(out, len, dir, rel);
}

void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

void age(const char *path, time_t seconds)
{
    struct timespec t[2] = {{time(NULL) - seconds, 0}, {time(NULL) - seconds, 0}};
    CHECK(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0);
}

int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

mode_t type_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

/* The file holds exactly text. */
int holds(const char *path, const char *text)
{
    size_t n = 0;
    char *got = test_read_file(path, &n);
    int same = got && n == strlen(text) && !memcmp(got, text, n);
    free(got);
    return same;
}

size_t count_names(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* A socket at path, bound from inside its directory (a full path may be
 * longer than sun_path). 0 or -1. */
int make_socket(const char *path)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    const char *name = strrchr(path, '/') + 1;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", name);
    int here = open(".", O_RDONLY | O_DIRECTORY);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int rc = here >= 0 && fd >= 0 && chdir(dir) == 0 &&
                     bind(fd, (struct sockaddr *)&a, sizeof a) == 0
                 ? 0
                 : -1;
    CHECK(here < 0 || fchdir(here) == 0);
    if (fd >= 0)
        close(fd);
    if (here >= 0)
        close(here);
    return rc;
}

/* Run fn in a child under alarm(seconds): it must exit 0, not hang and
 * not die of a signal. */
void in_child(void (*fn)(void *), void *arg, unsigned int seconds, const char *what)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(seconds);
        fn(arg);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: child %s %d\n", what, WIFSIGNALED(status) ? "killed by signal" : "exit",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        CHECK(0);
    }
}

int have_xattrs(const char *dir)
{
    char p[4200];
    path_of(p, sizeof p, dir, "xattr-probe");
    write_file(p, "x");
    int ok = setxattr(p, "user.probe", "1", 1, 0) == 0;
    unlink(p);
    return ok;
}

static int note_entry(void *ctx, const progcache_entry *e)
{
    seen *v = ctx;
    if (!e->error)
        return 0;
    v->bad++;
    v->removed += e->removed;
    size_t used = strlen(v->text);
    snprintf(v->text + used, sizeof v->text - used, "bad %s: %s\n", e->name, e->error);
    return 0;
}

static int note_foreign(void *ctx, const char *path, const char *what)
{
    seen *v = ctx;
    v->foreign++;
    size_t used = strlen(v->text);
    snprintf(v->text + used, sizeof v->text - used, "foreign %s: %s\n", path, what);
    return 0;
}

void verify(progcache_verify_result *res, seen *v, progcache_store *s, unsigned int flags)
{
    memset(v, 0, sizeof *v);
    progcache_verify_options o = PROGCACHE_VERIFY_OPTIONS_INIT;
    o.flags = flags;
    o.on_entry = note_entry;
    o.on_foreign = note_foreign;
    o.ctx = v;
    progcache_verify_result r = PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&r, progcache_store_as_file(s), &o));
    *res = r;
}

void adversarial_run(int argc, char **argv, const adversarial_test *tests, size_t n,
                     const char *label)
{
    for (size_t i = 0; i < n; i++)
        if (argc < 2 || !strcmp(argv[1], tests[i].name))
            tests[i].fn();
    printf("%s: all passed\n", label);
}
