/* The file store under limits (issue 12):
 *  - a file size limit (ulimit -f): no SIGXFSZ, a clear error, no temp
 *    files left, and compile-or-load keeps the artifact;
 *  - max_artifact_size: bigger puts refused, bigger entries never read.
 * The ulimit cases run in a forked child under alarm(). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "adversarial_fixture.h"
#include "cuda_fixtures.h"

/* ---- 7. the file size limit ------------------------------------------------ */

static void no_temp_files(const char *dir)
{
    char p[4200];
    path_of(p, sizeof p, dir, "tmp");
    CHECK(count_names(p, "entry-") == 0 && count_names(p, "evict-") == 0);
    path_of(p, sizeof p, dir, "progcache/tmp");
    CHECK(count_names(p, "entry-") == 0 && count_names(p, "evict-") == 0);
    path_of(p, sizeof p, dir, "progcache");
    CHECK(count_names(p, "state-") == 0 && count_names(p, "stats-") == 0);
}

static void set_size_limit(rlim_t bytes)
{
    struct rlimit rl = {bytes, bytes};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
}

static void sigxfsz_untouched(void)
{
    struct sigaction sa;
    CHECK(sigaction(SIGXFSZ, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL);
}

static void put_over_limit(void *arg)
{
    const char *dir = arg;
    progcache_store *s = open_store(dir); /* opened before the limit */
    set_size_limit(1000);
    char big[5000];
    memset(big, 'x', sizeof big);
    CHECK_RC(PROGCACHE_EIO, progcache_store_put(s, "big", 3, big, sizeof big));
    const char *msg = progcache_error_last();
    if (!strstr(msg, dir) || !strstr(msg, "file size limit (ulimit -f) of 1000 bytes")) {
        fprintf(stderr, "message: %s\n", msg);
        CHECK(0);
    }
    CHECK_OK(progcache_store_put(s, "small", 5, big, 500)); /* under it: fine */
    no_temp_files(dir);
    sigxfsz_untouched();
    progcache_store_free(s);
}

static void open_under_tiny_limit(void *arg)
{
    const char *dir = arg;
    set_size_limit(100); /* smaller than progcache/state and progcache/stats */
    log_text[0] = '\0';
    progcache_store *s = open_store(dir);
    CHECK(strstr(log_text, "progcache/state") && strstr(log_text, "ulimit -f"));
    CHECK(strstr(log_text, "progcache/stats"));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_put(s, "k", 1, "fits", 4));
    CHECK_OK(progcache_store_get(&buf, s, "k", 1));
    CHECK(buf.size == 4);
    uint64_t n = 0;
    CHECK_OK(progcache_store_count(&n, s));
    CHECK(n == 1);
    no_temp_files(dir);
    sigxfsz_untouched();
    progcache_buf_free(&buf);
    progcache_store_free(s);
}

static void compile_over_limit(void *arg)
{
    const char *dir = arg;
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_NO_REMOTE;
    CHECK_OK(progcache_open(&cache, dir, &o));
    set_size_limit(1000); /* a CUBIN is several KiB */
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.artifact.size > 1000);
    CHECK(r.cache_error == PROGCACHE_EIO && strstr(r.cache_message, "ulimit -f"));
    no_temp_files(dir);
    sigxfsz_untouched();
    progcache_program_result_release(&r);
    progcache_close(cache);
}

static void test_file_size_limit(void)
{
    void (*cases[])(void *) = {put_over_limit, open_under_tiny_limit, compile_over_limit};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = test_mkdtemp("adv-fsize");
        in_child(cases[i], dir, 120, "under ulimit -f");
        test_rmdtemp(dir);
    }
}

/* ---- 8. max_artifact_size --------------------------------------------------- */

static void test_max_artifact_size(void)
{
    char *dir = test_mkdtemp("adv-max");
    progcache_store *s = open_store_opts(dir, 0, 0, 100);
    char bytes[300];
    memset(bytes, 'b', sizeof bytes);
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_put(s, "k", 1, bytes, 101));
    CHECK(strstr(progcache_error_last(), "101 bytes") && strstr(progcache_error_last(), "100 bytes"));
    CHECK(strstr(progcache_error_last(), "max_artifact_size"));
    CHECK_OK(progcache_store_put(s, "k", 1, bytes, 100));

    /* An entry larger than the bound (another process allowed it): not
     * read, not removed. */
    progcache_store *big = open_store(dir);
    CHECK_OK(progcache_store_put(big, "huge", 4, bytes, 300));
    progcache_store_free(big);
    char path[4200];
    entry_of(path, sizeof path, dir, "huge");
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_store_get(&buf, s, "huge", 4));
    CHECK(strstr(progcache_error_last(), path) && strstr(progcache_error_last(), "300 bytes") &&
          strstr(progcache_error_last(), "100 bytes"));
    CHECK(exists(path));
    char name[65];
    snprintf(name, sizeof name, "%.2s%s", path + strlen(dir) + 9, strrchr(path, '/') + 1);
    CHECK_RC(PROGCACHE_ECORRUPT, progcache_file_read_entry(&buf, progcache_store_as_file(s), name));
    progcache_verify_result res;
    seen v;
    verify(&res, &v, s, PROGCACHE_VERIFY_FIX);
    /* 'b' bytes are of no known kind (kept); huge is bad and stays. */
    CHECK(res.bad == 1 && res.removed == 0 && res.unknown == 1);
    CHECK(strstr(v.text, "more than max_artifact_size (100 bytes); not read"));
    CHECK(exists(path));
    progcache_store_free(s);

    /* compile-or-load reports it and recompiles; the put replaces it. */
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_NO_REMOTE | PROGCACHE_FILE_NO_FSYNC;
    o.max_artifact_size = 64 * 1024;
    CHECK_OK(progcache_open(&cache, dir, &o));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    fixture_entry_path(path, sizeof path, dir, r.key);
    size_t huge = 128 * 1024;
    unsigned char *planted = calloc(1, huge);
    CHECK(planted);
    fixture_replace_file(path, planted, huge);
    free(planted);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.cache_error == PROGCACHE_ECORRUPT);
    CHECK(strstr(r.cache_message, path) && strstr(r.cache_message, "max_artifact_size"));
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !r.cache_error);
    progcache_program_result_release(&r);
    progcache_close(cache);
    progcache_buf_free(&buf);
    test_rmdtemp(dir);
}

ADVERSARIAL_MAIN("test_adversarial_limits", ADVERSARIAL_TEST(file_size_limit),
                 ADVERSARIAL_TEST(max_artifact_size))
