/* A file system that cannot lock (issue 20, item 4): flock and fcntl's
 * lock commands fail with ENOLCK, EOPNOTSUPP or ENOSYS, as on NFS without
 * a lock manager or on some FUSE file systems. lock_fail_shim.so, preloaded,
 * makes them fail.
 *
 * Each errno runs in a process of its own (this program, executed again
 * with the shim preloaded): four processes put into one capped directory
 * at once and measure the directory after every put of theirs; each hears
 * one warning naming the directory and the errno; the statistics count the
 * failures and the lock-free passes; single-flight without its lock
 * compiles at once, with no second warning; settings can still be set. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/flight.h"
#include "check.h"
#include "progcache/progcache.h"

#define CAP (20 * 1024)
#define ENTRY 1024
#define WRITERS 4
#define PUTS 40

typedef struct {
    int warnings;
    char first[1024];
} log_seen;

static void on_log(void *ctx, int level, const char *message)
{
    log_seen *seen = ctx;
    if (level != PROGCACHE_LOG_WARN || !strstr(message, "cannot lock"))
        return;
    if (!seen->warnings++)
        snprintf(seen->first, sizeof seen->first, "%s", message);
}

static void add_file(const char *path, void *ctx)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
        *(uint64_t *)ctx += (uint64_t)st.st_size;
}

static void add_shard(const char *path, void *ctx) { test_each_name(path, add_file, ctx); }

/* What the entries of dir hold now, in bytes: the truth, not a counter. */
static uint64_t measure(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/entries", dir);
    uint64_t total = 0;
    test_each_name(path, add_shard, &total);
    return total;
}

static progcache_store *open_capped(const char *dir, log_seen *seen)
{
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    o.max_size = CAP;
    o.flags = PROGCACHE_FILE_NO_FSYNC;
    o.log = on_log;
    o.log_ctx = seen;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, dir, &o));
    return s;
}

/* One warning, naming the directory and the errno. */
static void check_warned_once(const log_seen *seen, const char *dir, const char *errname)
{
    if (seen->warnings != 1 || !strstr(seen->first, dir) || !strstr(seen->first, errname)) {
        fprintf(stderr, "warnings %d, first: %s\n", seen->warnings, seen->first);
        CHECK(0);
    }
}

static void writer(const char *dir, int id, const char *errname)
{
    log_seen seen = {0, ""};
    progcache_store *s = open_capped(dir, &seen);
    char value[ENTRY];
    uint64_t worst = 0;
    for (int i = 0; i < PUTS; i++) {
        char key[32];
        snprintf(key, sizeof key, "w%d-k%d", id, i);
        memset(value, 'a' + id, sizeof value);
        CHECK_OK(progcache_store_put(s, key, strlen(key), value, sizeof value));
        uint64_t now = measure(dir);
        worst = now > worst ? now : worst;
        /* The cap, plus one entry for each writer in flight (its own put
         * and one a concurrent pass did not see: docs/SHARED.md). */
        if (now > CAP + 2 * WRITERS * ENTRY) {
            fprintf(stderr, "writer %d put %d: the directory holds %llu bytes, cap %d\n", id, i,
                    (unsigned long long)now, CAP);
            CHECK(0);
        }
    }
    check_warned_once(&seen, dir, errname);
    printf("test_lock_fail %s: writer %d: at most %llu bytes after a put (cap %d)\n", errname,
           id, (unsigned long long)worst, CAP);
    progcache_store_free(s);
}

/* The progcache command says it on standard error, once. */
static void tool_says_once(const char *dir, const char *errname)
{
    const char *bin = getenv("PROGCACHE_BIN");
    if (!bin || !*bin)
        return;
    /* A fresh directory: its first put seeds the counters, under the lock. */
    char value[4300], cache[4300], cmd[13000];
    snprintf(value, sizeof value, "%s-value", dir); /* beside it: a cache holds only its own */
    snprintf(cache, sizeof cache, "%s-tool", dir);
    FILE *f = fopen(value, "w");
    CHECK(f && fputs("some bytes", f) >= 0 && fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "'%s' put --dir '%s' 00ff '%s' 2>&1 >/dev/null", bin, cache, value);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    char line[2048];
    int said = 0;
    while (fgets(line, sizeof line, p))
        said += strstr(line, "cannot lock") && strstr(line, errname) && strstr(line, cache);
    CHECK(pclose(p) == 0);
    CHECK(said == 1);
    unlink(value);
    test_rmtree(cache);
}

static void run_errno(const char *errname, int errnum)
{
    /* The shim is in place: a lock on an ordinary file fails. */
    char probe[] = "/tmp/progcache-lockprobe-XXXXXX";
    int fd = mkstemp(probe);
    CHECK(fd >= 0);
    errno = 0;
    CHECK(flock(fd, LOCK_EX) != 0 && errno == errnum);
    close(fd);
    unlink(probe);

    char *dir = test_mkdtemp("lockfail");
    pid_t pids[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            writer(dir, i, errname);
            fflush(stdout);
            _exit(0);
        }
    }
    for (int i = 0; i < WRITERS; i++) {
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }

    test_rmdtemp(dir);

    /* One process alone: the cap plus one entry after every put. */
    dir = test_mkdtemp("lockfail-alone");
    log_seen seen = {0, ""};
    progcache_store *s = open_capped(dir, &seen);
    char value[ENTRY];
    memset(value, 'z', sizeof value);
    for (int i = 0; i < PUTS; i++) {
        char key[32];
        snprintf(key, sizeof key, "alone-%d", i);
        CHECK_OK(progcache_store_put(s, key, strlen(key), value, sizeof value));
        CHECK(measure(dir) <= CAP + ENTRY);
    }
    check_warned_once(&seen, dir, errname);
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&st, s));
    printf("test_lock_fail %s: lock_failures %llu, lock_fallbacks %llu, evictions %llu\n",
           errname, (unsigned long long)st.lock_failures, (unsigned long long)st.lock_fallbacks,
           (unsigned long long)st.evictions);
    CHECK(st.lock_failures >= 1 && st.lock_fallbacks >= 1);
    CHECK(st.evictions > 0);
    uint64_t before = st.lock_failures;
    progcache_store_free(s);

    /* Settings are still written (the write is published whole). */
    CHECK_OK(progcache_settings_set(dir, "max_size", "30K"));

    /* Single-flight without its lock: the caller compiles at once (never
     * waits, never hangs), it is counted, and this process, told once
     * already, is not told again. */
    progcache_options co = PROGCACHE_OPTIONS_INIT;
    co.flags = PROGCACHE_FILE_NO_FSYNC;
    co.log = on_log;
    co.log_ctx = &seen;
    progcache *c = NULL;
    CHECK_OK(progcache_open(&c, dir, &co));
    progcache__flight f = PROGCACHE__FLIGHT_INIT;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int owner = 0;
    double waited = 1;
    CHECK_OK(progcache__flight_begin(&f, &owner, &waited, &buf, NULL, c, "cold", 4, 60000));
    CHECK(owner == 1 && f.fd < 0 && waited == 0);
    progcache__flight_end(&f);
    CHECK_OK(progcache_stats_get(&st, c));
    CHECK(st.lock_failures > before);
    CHECK(seen.warnings == 1);
    progcache_buf_free(&buf);
    progcache_close(c);
    tool_says_once(dir, errname);
    test_rmdtemp(dir);
}

static const struct {
    const char *name;
    int errnum;
} errnos[] = {{"ENOLCK", ENOLCK}, {"EOPNOTSUPP", EOPNOTSUPP}, {"ENOSYS", ENOSYS}};

int main(int argc, char **argv)
{
    const char *chosen = getenv("PROGCACHE_TEST_LOCK_ERRNO");
    if (chosen) {
        for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
            if (!strcmp(chosen, errnos[i].name))
                run_errno(errnos[i].name, errnos[i].errnum);
        return 0;
    }
    if (argc < 2 || access(argv[1], R_OK) != 0) {
        fprintf(stderr, "usage: test_lock_fail SHIM.so (the LD_PRELOAD shim)\n");
        return 1;
    }
    /* Again, with the shim preloaded, once per errno. A sanitizer's runtime
     * wants to come first; the shim only wraps libc's lock calls. */
    const char *asan = getenv("ASAN_OPTIONS");
    char asan_options[2048];
    snprintf(asan_options, sizeof asan_options, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            setenv("LD_PRELOAD", argv[1], 1);
            setenv("PROGCACHE_TEST_LOCK_ERRNO", errnos[i].name, 1);
            setenv("ASAN_OPTIONS", asan_options, 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "test_lock_fail: the run with %s failed\n", errnos[i].name);
            return 1;
        }
    }
    puts("test_lock_fail: ok");
    return 0;
}
