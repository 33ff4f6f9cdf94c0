/* What the persistentProgramCache sample says when the cache fails (issue
 * 12, items 5 and 10), run as a user would, no GPU needed (--arch):
 *  - an unusable PROGCACHE_REMOTE_SECRET_FILE: the open fails, and the
 *    sample runs without a cache, saying so and why (the file, "empty");
 *  - a store that fails in a cache directory of about 4000 bytes: the
 *    "Cache store" line says "FAILED: not stored", the lookup line does not
 *    fail, the warning names the whole path, and the directory line shows
 *    it whole;
 *  - a remote tier that is down: one warning line naming the server
 *    without its password, and the run goes on with the directory.
 *
 * usage: test_sample_messages SAMPLE_EXE */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "progcache/cuda.h"
#include "sample_run.h"

static char *exe;
static char *scratch;
static int have_gpu;

static void run(sample_output *out, const char *const *args, const char *const *env)
{
    sample_run r = {exe, args, NULL, env};
    sample_exec(out, &r, scratch);
    if (out->status != 0)
        sample_dump(out);
    CHECK(out->status == 0);
}

static void expect(const sample_output *out, const char *what, const char *text,
                   const char *part)
{
    if (!text || !strstr(text, part)) {
        sample_dump(out);
        fprintf(stderr, "%s lacks \"%s\"\n", what, part);
        CHECK(0);
    }
}

/* The default problem for sm_90 with the cache in dir and env added: it
 * succeeds, printing status (the lines checked in order and format). */
static void run_default(sample_output *out, const char *dir, const char *const *env,
                        const char *status)
{
    const char *args[] = {"--arch", "sm_90", "--cache-dir", dir, NULL};
    run(out, args, env);
    sample_expect e = {status, dir, 512, 512, 512, 16, "relu", 5, 20, have_gpu};
    char key[25];
    sample_check_format(out, &e, key);
}

static void test_unusable_secret(void)
{
    char dir[4096], secret[4096], remote_env[64], secret_env[4200];
    snprintf(dir, sizeof dir, "%s/cache-secret", scratch);
    snprintf(secret, sizeof secret, "%s/empty-secret", scratch);
    int fd = open(secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && close(fd) == 0);
    snprintf(remote_env, sizeof remote_env, "PROGCACHE_REMOTE=redis://127.0.0.1:1");
    snprintf(secret_env, sizeof secret_env, "PROGCACHE_REMOTE_SECRET_FILE=%s", secret);
    const char *env[] = {remote_env, secret_env, NULL};
    sample_output out;
    run_default(&out, dir, env, "DISABLED");
    char why[4300];
    snprintf(why, sizeof why,
             "PROGCACHE_REMOTE_SECRET_FILE %s is empty: a shared secret must be at least 16 "
             "bytes",
             secret);
    expect(&out, "Cache status", sample_value(&out, "Cache status:"), why);
    expect(&out, "stderr", out.err, "warning: running without a cache: ");
    expect(&out, "stderr", out.err, why);
    sample_output_free(&out);
}

#if SAMPLE_TEST_HAVE_REDIS
/* A remote tier that is down: the run goes on with the cache directory (a
 * MISS, stored), and stderr has one line naming the server without its
 * password and the cause. */
static void test_remote_down(void)
{
    char dir[4096], remote_env[128], want[200];
    snprintf(dir, sizeof dir, "%s/cache-remote-down", scratch);
    snprintf(remote_env, sizeof remote_env, "PROGCACHE_REMOTE=redis://:hunter2@127.0.0.1:1");
    const char *env[] = {remote_env, "PROGCACHE_REMOTE_SECRET_FILE=", NULL};
    sample_output out;
    run_default(&out, dir, env, "MISS");
    snprintf(want, sizeof want,
             "persistentProgramCache: warning: Redis redis://:***@127.0.0.1:1/0: cannot "
             "connect: ");
    expect(&out, "stderr", out.err, want);
    CHECK(strstr(strstr(out.err, want) + 1, want) == NULL); /* once */
    CHECK(strstr(out.err, "hunter2") == NULL);
    for (size_t i = 0; i < out.num_lines; i++)
        CHECK(strstr(out.lines[i], "hunter2") == NULL);
    sample_output_free(&out);
}

#endif

static void test_store_fails_long_path(void)
{
    char dir[4096], path[4200];
    test_long_dir(dir, sizeof dir, scratch);
    const char *args[] = {"--arch", "sm_90", "--cache-dir", dir, NULL};
    sample_output out;
    run(&out, args, NULL); /* creates the cache: MISS, stored */
    CHECK(!strcmp(sample_value(&out, "Cache status:"), "MISS"));
    sample_output_free(&out);

    /* Every shard directory replaced by a file: a lookup is a miss, a
     * store cannot open its shard (no permissions involved: tests may run
     * as root). */
    for (int shard = 0; shard < 256; shard++) {
        snprintf(path, sizeof path, "%s/entries/%02x", dir, shard);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            test_rmtree(path); /* the shard of the entry the first run stored */
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        CHECK(fd >= 0 && close(fd) == 0);
    }
    run(&out, args, NULL);
    CHECK(!strcmp(sample_value(&out, "Cache status:"), "MISS"));
    CHECK(!strcmp(sample_value(&out, "Cache directory:"), dir));
    CHECK(sample_match(sample_value(&out, "Cache lookup:"), "[0-9]+\\.[0-9]{3} ms"));
    CHECK(sample_match(sample_value(&out, "Cache store:"),
                       "[0-9]+\\.[0-9]{3} ms \\(FAILED: not stored\\)"));
    char want[4400];
    snprintf(want, sizeof want,
             "persistentProgramCache: warning: cache store failed: cannot open shard directory "
             "for %s/entries/",
             dir);
    expect(&out, "stderr", out.err, want);
    expect(&out, "stderr", out.err, ": Not a directory");
    sample_output_free(&out);
}

int main(int argc, char **argv)
{
    have_gpu = sample_setup(argc, argv, "samplemsg", &exe, &scratch);
    unsetenv("PROGCACHE_REMOTE");
    unsetenv("PROGCACHE_REMOTE_SECRET_FILE");

    test_unusable_secret();
#if SAMPLE_TEST_HAVE_REDIS
    test_remote_down();
#else
    printf("built without hiredis: the remote-down case is not run\n");
#endif
    test_store_fails_long_path();
    sample_teardown(exe, scratch);
    printf("test_sample_messages: all passed\n");
    return 0;
}
