/* A fresh process's compile through the PCH helper does not load NVRTC
 * (pch_prefix.c reads its IDs from the NVRTC file the cache's record
 * names, pch_compile.c leaves the compile to the helper): the helper
 * loads it. Anything that ends in a compile in the process loads it first
 * and checks it is the NVRTC the key was derived for.
 *
 * Each case runs in a fresh process (this program again, with --child):
 *  - a PCH hit: NVRTC not loaded, the bytes of a compile without the tier;
 *  - no PCH (a new prefix): compiled here, NVRTC loaded;
 *  - the key's version from PROGCACHE_NVRTC_VERSION, not a record: NVRTC
 *    loaded to check it, even for a hit;
 *  - a helper that fails (exits 1), and one that dies of SIGKILL after
 *    reading the request: compiled here (NVRTC loaded then), the same
 *    bytes, the failure said;
 *  - a helper whose exit comes long after its answer (the real helper
 *    under a script that then sleeps): the compile, by the helper, returns
 *    on the answer while the helper still runs, and the helper is reaped
 *    in the background (no zombie left); and one that never exits, killed
 *    by that background reaper at its 5 s deadline. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "key/nvrtc_lib.h"
#include "pch_fixtures.h"
#include "progcache/cuda.h"

enum { LOADED = 1, HIT = 2, NOT_WAITED = 4 };

static const char *self;

/* --child WORK CACHE V OUT: compile variant v in cache; the artifact to
 * OUT, the messages to OUT.log; exit status LOADED | HIT. */
static int child(char **argv)
{
    work = argv[2];
    snprintf(hdr, sizeof hdr, "%s/hdr", work);
    snprintf(hdr0, sizeof hdr0, "%s/hdr0", work);
    snprintf(opt_hdr0, sizeof opt_hdr0, "-I%s", hdr0);
    snprintf(opt_hdr, sizeof opt_hdr, "-I%s", hdr);
    extra_option = getenv("TEST_PCH_EXTRA");
    progcache *cache;
    CHECK_OK(progcache_open(&cache, argv[3], NULL));
    logbook book = {""};
    progcache_stats before = stats_of(cache);
    compiled c = compile_v(cache, atoi(argv[4]), 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
    int hit = stats_of(cache).pch_hits == before.pch_hits + 1;
    char path[1100];
    snprintf(path, sizeof path, "%s.log", argv[5]);
    write_text(path, book.text);
    int fd = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, c.bytes, c.size) == (ssize_t)c.size);
    close(fd);
    free(c.bytes);
    progcache_close(cache);
    int not_waited = 0;
    const char *pid_file = getenv("TEST_PCH_PID_FILE");
    if (pid_file) {
        size_t n;
        char *text = test_read_file(pid_file, &n);
        pid_t pid = text ? (pid_t)atol(text) : 0;
        free(text);
        /* Alive (its sleep has seconds to go): the compile did not wait for
         * its exit. Then gone, not a zombie (kill finds a zombie): reaped. */
        int alive = pid > 0 && kill(pid, 0) == 0;
        struct timespec wait = {8, 0};
        nanosleep(&wait, NULL);
        not_waited = alive && kill(pid, 0) != 0 && errno == ESRCH;
    }
    return (progcache__nvrtc_loaded() ? LOADED : 0) | (hit ? HIT : 0) |
           (not_waited ? NOT_WAITED : 0);
}

/* Run variant v in a fresh process on cache_dir: its exit status; its
 * bytes checked against a compile without the tier; its messages in log. */
static int fresh(const char *cache_dir, int v, char *log, size_t log_len)
{
    char out[1000], vs[16];
    snprintf(out, sizeof out, "%s/out", work);
    snprintf(vs, sizeof vs, "%d", v);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "--child", work, cache_dir, vs, out, (char *)NULL);
        _exit(127);
    }
    int status;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status));
    CHECK(WEXITSTATUS(status) <= (LOADED | HIT | NOT_WAITED));
    size_t len;
    char *bytes = test_read_file(out, &len);
    CHECK(bytes != NULL);
    compiled c = {(unsigned char *)bytes, len, 0}, p = plain_v(v, "h3", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&c, &p));
    free(bytes);
    free(p.bytes);
    char path[1100];
    snprintf(path, sizeof path, "%s.log", out);
    char *text = test_read_file(path, &len);
    CHECK(text != NULL);
    snprintf(log, log_len, "%s", text);
    free(text);
    return WEXITSTATUS(status);
}

static void test_unloaded(void)
{
    char *dir;
    /* This process compiles (NVRTC loaded: the record is written) and
     * makes the PCH. */
    progcache *cache = open_cache(&dir, "pchunloaded");
    warm(cache, 10, "h3");
    progcache_close(cache);
    char log[8192];

    CHECK(fresh(dir, 20, log, sizeof log) == HIT);

    /* A prefix without a PCH (another option: another key): compiled here. */
    setenv("PROGCACHE_PCH_MIN_MS", "100000", 1); /* and not made: no detached helper */
    extra_option = "-DUNLOADED_OTHER";
    setenv("TEST_PCH_EXTRA", extra_option, 1);
    CHECK(fresh(dir, 21, log, sizeof log) == LOADED);
    unsetenv("TEST_PCH_EXTRA");
    extra_option = NULL;
    setenv("PROGCACHE_PCH_MIN_MS", "0", 1);

    /* The key's version from a setting: NVRTC is loaded to check it. */
    setenv("PROGCACHE_NVRTC_VERSION", "13.0", 1);
    int st = fresh(dir, 22, log, sizeof log);
    CHECK(st & LOADED);
    unsetenv("PROGCACHE_NVRTC_VERSION");

    /* Helpers that fail: compiled here, said. */
    setenv("PROGCACHE_PCH_HELPER", "/bin/false", 1);
    CHECK(fresh(dir, 23, log, sizeof log) == LOADED);
    CHECK(strstr(log, "the PCH helper failed") != NULL);
    char script[1000];
    snprintf(script, sizeof script, "%s/dies.sh", work);
    write_script(script, "#!/bin/sh\ncat > /dev/null\nkill -KILL $$\n");
    setenv("PROGCACHE_PCH_HELPER", script, 1);
    CHECK(fresh(dir, 24, log, sizeof log) == LOADED);
    CHECK(strstr(log, "signal 9") != NULL);
    setenv("PROGCACHE_PCH_HELPER", helper, 1);

    /* A helper that answers, then takes 5 s to exit. */
    char pid_file[1000], text[4000];
    snprintf(pid_file, sizeof pid_file, "%s/slow-exit.pid", work);
    snprintf(script, sizeof script, "%s/slow-exit.sh", work);
    snprintf(text, sizeof text, "#!/bin/sh\necho $$ > '%s'\n'%s'\n/bin/sleep 5\n", pid_file, helper);
    write_script(script, text);
    setenv("PROGCACHE_PCH_HELPER", script, 1);
    setenv("TEST_PCH_PID_FILE", pid_file, 1);
    /* Compiled by the helper (NVRTC not loaded here; with or without the
     * PCH: this helper's identity is another's), returned on its answer. */
    st = fresh(dir, 25, log, sizeof log);
    if ((st & ~HIT) != NOT_WAITED)
        fprintf(stderr, "slow exit: status %d, log:\n%s\n", st, log);
    CHECK((st & ~HIT) == NOT_WAITED);

    /* A helper that answers and never exits (it becomes a long sleep):
     * the compile returns on its answer, and the thread that reaps it
     * kills it at its 5 s deadline. */
    snprintf(script, sizeof script, "%s/no-exit.sh", work);
    snprintf(text, sizeof text, "#!/bin/sh\necho $$ > '%s'\n'%s'\nexec /bin/sleep 1000\n",
             pid_file, helper);
    write_script(script, text);
    setenv("PROGCACHE_PCH_HELPER", script, 1);
    st = fresh(dir, 26, log, sizeof log);
    if ((st & ~HIT) != NOT_WAITED)
        fprintf(stderr, "no exit: status %d, log:\n%s\n", st, log);
    CHECK((st & ~HIT) == NOT_WAITED);
    unsetenv("TEST_PCH_PID_FILE");
    setenv("PROGCACHE_PCH_HELPER", helper, 1);
    test_rmtree(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 6 && !strcmp(argv[1], "--child"))
        return child(argv);
    if (!pch_fixtures_setup("test_pch_unloaded"))
        return TEST_SKIP_CODE;
    test_unloaded();
    pch_fixtures_teardown();
    puts("test_pch_unloaded: ok");
    return 0;
}
