/* The library's own log writer (PROGCACHE_LOG, util/log.c): unset, each
 * warning once per process and cause on stderr, prefixed "progcache:";
 * "off" silences it; a level and :FILE choose what and where; debug traces
 * every lookup; a callback replaces the writer; a value that cannot be
 * used is named and ignored. Each case runs in a child process of its own,
 * since the variable is read once per process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "error.h"
#include "progcache/progcache.h"

static char *dir;

typedef void (*body_fn)(void);

/* Run body in a child with PROGCACHE_LOG=value (NULL: unset), its stderr
 * into a file; that file's text into out. */
static void run(char *out, size_t len, const char *value, body_fn body)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/stderr", dir);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (value)
            setenv("PROGCACHE_LOG", value, 1);
        else
            unsetenv("PROGCACHE_LOG");
        if (!freopen(path, "w", stderr))
            _exit(2);
        body();
        fflush(NULL);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "child for PROGCACHE_LOG=%s: status %d\n", value ? value : "(unset)",
                status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
}

static void twice_and_info(void)
{
    for (int i = 1; i <= 2; i++)
        progcache__log(NULL, NULL, PROGCACHE_LOG_WARN, "the tier failed (%d)", i);
    progcache__log(NULL, NULL, PROGCACHE_LOG_WARN, "progcache: another cause");
    progcache__log(NULL, NULL, PROGCACHE_LOG_INFO, "an eviction pass");
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static void test_default_once_per_cause(void)
{
    char out[8192];
    run(out, sizeof out, NULL, twice_and_info);
    CHECK(strstr(out, "progcache: warning: the tier failed (1)\n") != NULL);
    CHECK(!strstr(out, "(2)"));
    /* the library's own prefix is not doubled */
    CHECK(strstr(out, "progcache: warning: another cause\n") != NULL);
    CHECK(!strstr(out, "eviction"));
    CHECK(count(out, "progcache:") == 2);
    run(out, sizeof out, "", twice_and_info); /* empty counts as unset */
    CHECK(count(out, "progcache:") == 2);
}

static void test_off_and_levels(void)
{
    char out[8192];
    run(out, sizeof out, "off", twice_and_info);
    CHECK(out[0] == '\0');
    run(out, sizeof out, "error", twice_and_info);
    CHECK(out[0] == '\0');
    /* a level asked for writes every message at or above it */
    run(out, sizeof out, "info", twice_and_info);
    CHECK(strstr(out, "(1)") && strstr(out, "(2)"));
    CHECK(strstr(out, "progcache: an eviction pass\n") != NULL);
    run(out, sizeof out, "WARN", twice_and_info);
    CHECK(strstr(out, "(2)") && !strstr(out, "eviction"));
}

static void test_file(void)
{
    char value[4300], path[4200], out[8192];
    snprintf(path, sizeof path, "%s/pc.log", dir);
    snprintf(value, sizeof value, "info:%s", path);
    run(out, sizeof out, value, twice_and_info);
    CHECK(out[0] == '\0'); /* nothing on stderr */
    run(out, sizeof out, value, twice_and_info); /* appended, not replaced */
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK(count(out, "an eviction pass") == 2 && count(out, "the tier failed (2)") == 2);
    CHECK(!strncmp(out, "progcache[", 10) && strstr(out, "]: warning: the tier failed (1)"));
}

static void test_bad_value(void)
{
    char out[8192];
    run(out, sizeof out, "loud", twice_and_info);
    CHECK(strstr(out, "PROGCACHE_LOG: \"loud\" cannot be used") != NULL);
    CHECK(strstr(out, "ignored") != NULL);
    /* and the default stands */
    CHECK(strstr(out, "(1)") && !strstr(out, "(2)"));
    run(out, sizeof out, "debug:/nonexistent-dir-progcache/x.log", twice_and_info);
    CHECK(strstr(out, "/nonexistent-dir-progcache/x.log") && strstr(out, "ignored"));
}

static void callback(void *ctx, int level, const char *message)
{
    (void)level;
    (void)message;
    ++*(int *)ctx;
}

static void with_callback(void)
{
    int calls = 0;
    progcache__log(callback, &calls, PROGCACHE_LOG_WARN, "to the callback only");
    if (calls != 1)
        _exit(3);
}

static void test_callback_replaces(void)
{
    char out[8192];
    run(out, sizeof out, "debug", with_callback);
    CHECK(out[0] == '\0');
}

static void lookups(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/cache%ld", dir, (long)getpid()); /* a fresh one */
    progcache *cache = NULL;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    const char key[] = "0123456789abcdef-key";
    if (progcache_open(&cache, path, NULL) ||
        progcache_get(&buf, cache, key, sizeof key - 1) != PROGCACHE_ENOTFOUND ||
        progcache_put(cache, key, sizeof key - 1, "bytes", 5) ||
        progcache_get(&buf, cache, key, sizeof key - 1))
        _exit(4);
    progcache_buf_free(&buf);
    progcache_close(cache);
}

static void test_debug_traces_lookups(void)
{
    char out[8192];
    run(out, sizeof out, "debug", lookups);
    /* the key's first 16 bytes in hex: "0123456789abcdef" */
    CHECK(strstr(out, "progcache: debug: lookup 30313233343536373839616263646566...: MISS"));
    CHECK(strstr(out, "...: HIT in the ") && strstr(out, "(5 bytes, "));
    run(out, sizeof out, NULL, lookups);
    CHECK(!strstr(out, "lookup"));
}

static void bad_variable(void)
{
    setenv("PROGCACHE_MAX_SIZE", "abc", 1);
    lookups(); /* the cache is there, not turned off */
}

/* A malformed variable: said once, named with its value, ignored. Before,
 * PROGCACHE_MAX_SIZE=abc failed the open: a program without a callback had
 * no cache and no word of why. */
static void test_bad_variable_said(void)
{
    char out[8192];
    run(out, sizeof out, NULL, bad_variable);
    CHECK(strstr(out, "progcache: warning: PROGCACHE_MAX_SIZE=\"abc\": not a size") != NULL);
    CHECK(strstr(out, "; ignored (max_size stays 5GiB, from default)\n") != NULL);
    CHECK(count(out, "PROGCACHE_MAX_SIZE") == 1);
}

int main(void)
{
    dir = test_mkdtemp("log");
    test_default_once_per_cause();
    test_off_and_levels();
    test_file();
    test_bad_value();
    test_callback_replaces();
    test_debug_traces_lookups();
    test_bad_variable_said();
    test_rmdtemp(dir);
    return 0;
}
