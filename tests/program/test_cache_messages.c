/* Messages that name the real cause and the whole path (issue 12, item 10).
 *
 *  - compile-or-load tells its cache steps apart: a failed lookup, a failed
 *    removal of an unusable entry and a failed store each have their own
 *    code in the result (version 2), and only a store that failed before
 *    its entry was in place means "not stored";
 *  - every message keeps a path of about 4000 bytes whole: the thread's
 *    last error, the result's cache_detail, the log callback, a background
 *    store's failure, a message with a prefix added on the way up;
 *  - a failing tier's message is the one returned with its code, even when
 *    a tier below it set another message meanwhile, or an upper tier's
 *    failure came after it;
 *  - an I/O error injected into each file operation of get, put, remove
 *    and open gives a message that names the whole path and the errno's
 *    own text;
 *  - a result struct of version 1 (a program built against the older
 *    header) is only written as far as version 1 goes. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_fixtures.h"
#include "error.h"
#include "fs.h"
#include "progcache/remote.h"
#include "progcache/sys/store.h"

static char *scratch;
static char root[4096]; /* a cache directory of about 4000 bytes */

static void expect_contains(const char *what, const char *text, const char *part)
{
    if (!text || !strstr(text, part)) {
        fprintf(stderr, "%s: \"%s\"\nlacks \"%s\"\n", what, text ? text : "(null)", part);
        CHECK(0);
    }
}

static char *last_log;
static void keep_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    (void)level;
    free(last_log);
    last_log = strdup(message);
}

static progcache *open_cache(const char *dir)
{
    progcache *cache = NULL;
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_NO_REMOTE;
    opts.log = keep_log;
    if (progcache_open(&cache, dir, &opts))
        fprintf(stderr, "open: %s\n", progcache_error_last());
    CHECK(cache != NULL);
    return cache;
}

/* ---- compile-or-load: which step failed --------------------------------- */

static void test_steps(void)
{
    progcache *cache = open_cache(root);
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    p.log = keep_log;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;

    /* The lookup fails (EIO opening the entry), the store works: compiled,
     * stored, and nothing says "not stored". */
    progcache__fs_fail(PROGCACHE_FS_OPEN, 1, EIO);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.cache_error == PROGCACHE_EIO && r.lookup_error == PROGCACHE_EIO);
    CHECK(r.store_error == 0 && r.remove_error == 0 && r.stored == 1);
    char want[4400];
    snprintf(want, sizeof want, "cache lookup failed: cannot open cache entry %s/entries/", root);
    CHECK(!strncmp((const char *)r.cache_detail.data, want, strlen(want)));
    expect_contains("cache_detail", (const char *)r.cache_detail.data,
                    ": Input/output error\n");
    CHECK(strchr((const char *)r.cache_detail.data, '\n') ==
          (const char *)r.cache_detail.data + r.cache_detail.size - 1); /* one line */
    /* The fixed-size copy is cut, and says the same as far as it goes. */
    CHECK(strlen(r.cache_message) == sizeof r.cache_message - 1);
    CHECK(!strncmp(r.cache_message, (const char *)r.cache_detail.data,
                   sizeof r.cache_message - 1));
    /* The log callback got it whole too. */
    expect_contains("log", last_log, root);
    expect_contains("log", last_log, "Input/output error");
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.cache_error == 0 && r.cache_detail.size == 0);

    /* A lookup that fails once, then finds the entry on the second look
     * under the single-flight lock: a HIT, with the failure said. */
    progcache__fs_fail(PROGCACHE_FS_READ, 1, EIO);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.lookup_error == PROGCACHE_EIO);
    CHECK(r.store_error == 0 && r.stored == 0);
    snprintf(want, sizeof want, "cache lookup failed: cannot read cache entry %s/entries/", root);
    CHECK(!strncmp((const char *)r.cache_detail.data, want, strlen(want)));

    /* The store fails before its entry is in place: not stored. */
    CHECK_OK(progcache_clear(cache));
    progcache__fs_fail(PROGCACHE_FS_WRITE, 1, ENOSPC);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.artifact.size > 1000);
    CHECK(r.store_error == PROGCACHE_EIO && r.lookup_error == 0 && r.stored == 0);
    snprintf(want, sizeof want, "cache store failed: cannot write temp file %s/progcache/tmp/",
             root);
    CHECK(!strncmp((const char *)r.cache_detail.data, want, strlen(want)));
    expect_contains("cache_detail", (const char *)r.cache_detail.data, "No space left on device");
    uint64_t count = 1;
    CHECK_OK(progcache_count(&count, cache));
    CHECK(count == 0);

    /* The store fails after its entry is in place (the directory's fsync):
     * the entry is there, and stored says so. */
    progcache__fs_fail(PROGCACHE_FS_FSYNC, 2, EIO);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.store_error == PROGCACHE_EIO && r.stored == 1);
    snprintf(want, sizeof want, "cache store failed: cannot fsync directory of %s/entries/", root);
    CHECK(!strncmp((const char *)r.cache_detail.data, want, strlen(want)));
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT);

    /* Both the lookup and the store fail: two lines, in order. */
    CHECK_OK(progcache_clear(cache));
    progcache__fs_fail(PROGCACHE_FS_OPEN, 1, EIO);
    progcache__fs_fail(PROGCACHE_FS_WRITE, 1, EIO);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.lookup_error == PROGCACHE_EIO && r.store_error == PROGCACHE_EIO && !r.stored);
    CHECK(r.cache_error == PROGCACHE_EIO && !strncmp(r.cache_message, "cache lookup failed", 19));
    const char *d = (const char *)r.cache_detail.data;
    const char *second = strchr(d, '\n') + 1;
    CHECK(!strncmp(d, "cache lookup failed: ", 21));
    CHECK(!strncmp(second, "cache store failed: ", 20));
    CHECK(strchr(second, '\n') == d + r.cache_detail.size - 1);

    /* An unusable entry that cannot be removed: healed, stored over it.
     * (The second look under the single-flight lock finds the same bad
     * entry again: it must not come back as a HIT.) */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    size_t good_size = r.artifact.size;
    char path[4200];
    fixture_entry_path(path, sizeof path, root, r.key);
    fixture_replace_file(path, "not a cubin", 11);
    progcache__fs_fail(PROGCACHE_FS_UNLINK, 1, EIO);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r.healed == 1 && r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.artifact.size == good_size && !memcmp(r.artifact.data, "\177ELF", 4));
    CHECK(r.remove_error == PROGCACHE_EIO && r.store_error == 0 && r.stored == 1);
    snprintf(want, sizeof want,
             "cache removal of the unusable entry failed: cannot remove %s/entries/", root);
    CHECK(!strncmp((const char *)r.cache_detail.data, want, strlen(want)));
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !r.healed);

    progcache_program_result_release(&r);
    CHECK(r.version == PROGCACHE_PROGRAM_RESULT_VERSION && r.cache_detail.data == NULL);
    progcache_close(cache);
}

/* A caller built against version 1 of the result: its struct ends before
 * the version 2 fields, and nothing past it may be written. */
static void test_result_version_1(void)
{
    progcache *cache = open_cache(root);
    CHECK_OK(progcache_clear(cache));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    /* volatile: the compiler must not see that the struct is cut short,
     * only ASan, which catches any write past its version 1 end. */
    volatile size_t v1 = offsetof(progcache_program_result, lookup_error);
    progcache_program_result *r = calloc(1, v1);
    CHECK(r != NULL);
    r->version = 1;
    progcache__fs_fail(PROGCACHE_FS_WRITE, 1, EIO);
    CHECK_OK(progcache_compile_or_load(r, cache, &p));
    progcache__fs_fail_reset();
    CHECK(r->status == PROGCACHE_STATUS_MISS && r->cache_error == PROGCACHE_EIO);
    CHECK(!strncmp(r->cache_message, "cache store failed: ", 20));
    progcache_program_result_release(r);
    CHECK(r->version == 1 && r->artifact.data == NULL);
    free(r);

    progcache_program_result newer = PROGCACHE_PROGRAM_RESULT_INIT;
    newer.version = PROGCACHE_PROGRAM_RESULT_VERSION + 1;
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&newer, cache, &p));
    expect_contains("newer result", progcache_error_last(),
                    "out->version is 4, newer than this library knows (3");
    progcache_close(cache);
}

/* ---- whole paths in every message ---------------------------------------- */

static void test_long_paths(void)
{
    progcache *cache = open_cache(root);
    CHECK_OK(progcache_put(cache, "k", 1, "value", 5));

    /* A failing put and a failing get name the directory whole. */
    progcache__fs_fail(PROGCACHE_FS_RENAME, 1, EIO);
    CHECK_RC(PROGCACHE_EIO, progcache_put(cache, "k2", 2, "value", 5));
    progcache__fs_fail_reset();
    char want[4400];
    snprintf(want, sizeof want, "cannot rename temp file into %s/entries/", root);
    CHECK(!strncmp(progcache_error_last(), want, strlen(want)));
    expect_contains("put", progcache_error_last(), ": Input/output error");
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache__fs_fail(PROGCACHE_FS_READ, 1, EIO);
    CHECK_RC(PROGCACHE_EIO, progcache_get(&buf, cache, "k", 1));
    progcache__fs_fail_reset();
    snprintf(want, sizeof want, "cannot read cache entry %s/entries/", root);
    CHECK(!strncmp(progcache_error_last(), want, strlen(want)));
    progcache_buf_free(&buf);

    /* A background store that fails: progcache_flush says why, whole.
     * (progcache/tmp/ replaced by a file: fs_fail is per thread, and the
     * store runs on the background thread.) */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/progcache/tmp", root);
    CHECK(rmdir(tmp) == 0);
    fixture_write_file(tmp, "x", 1);
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD | PROGCACHE_PROGRAM_ASYNC_STORE);
    p.log = keep_log;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.store_pending == 1);
    CHECK_RC(PROGCACHE_EIO, progcache_flush(cache));
    snprintf(want, sizeof want, "cannot open temp directory %s/progcache/tmp: Not a directory",
             root);
    expect_contains("flush", progcache_error_last(), want);
    CHECK(!strncmp(progcache_error_last(), "background store of key ", 24));
    expect_contains("log of the background store", last_log, want);
    CHECK(unlink(tmp) == 0 && mkdir(tmp, 0700) == 0);
    progcache_program_result_release(&r);
    progcache_close(cache);

    /* A prefix added on the way up keeps the message whole: a secret
     * file at a long path that is empty (beside the cache directory, which
     * may hold nothing but the cache). */
    char secret[4200];
    snprintf(secret, sizeof secret, "%s/../secret", root);
    fixture_write_file(secret, "", 0);
    CHECK(chmod(secret, 0600) == 0);
    setenv("PROGCACHE_REMOTE", "redis://127.0.0.1:1", 1);
    setenv("PROGCACHE_REMOTE_SECRET_FILE", secret, 1);
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&cache, root, NULL));
    snprintf(want, sizeof want,
             "progcache_open: PROGCACHE_REMOTE_SECRET_FILE %s is empty: a shared secret must be "
             "at least 16 bytes (openssl rand 32 > FILE; chmod 600 FILE)",
             secret);
    CHECK(!strcmp(progcache_error_last(), want));
    unsetenv("PROGCACHE_REMOTE");
    unsetenv("PROGCACHE_REMOTE_SECRET_FILE");
    CHECK(unlink(secret) == 0);
}

/* ---- a failing tier's message stays its own ------------------------------- */

/* A tier that sets a message of its own on every call, and fails its
 * removes: like the Redis store, which restores an earlier message cut
 * short after a value it rejected. */
static int noisy_get(progcache_buf *out, progcache_store *s, const void *k, size_t n)
{
    (void)out, (void)s, (void)k, (void)n;
    char cut[64];
    snprintf(cut, sizeof cut, "%s", progcache_error_last());
    progcache__error(PROGCACHE_EIO, "%s", cut);
    return PROGCACHE_ENOTFOUND;
}
static int noisy_put(progcache_store *s, const void *k, size_t n, const void *d, size_t size)
{
    (void)s, (void)k, (void)n, (void)d, (void)size;
    return PROGCACHE_OK;
}
static int noisy_remove(progcache_store *s, const void *k, size_t n)
{
    (void)s, (void)k, (void)n;
    return progcache__error(PROGCACHE_EIO, "the noisy tier cannot remove anything");
}
static int noisy_clear(progcache_store *s)
{
    (void)s;
    return PROGCACHE_OK;
}
static int noisy_count(uint64_t *out, progcache_store *s)
{
    (void)s;
    *out = 0;
    return PROGCACHE_OK;
}
static void noisy_free(progcache_store *s) { free(s); }

static progcache_store *noisy_store(void)
{
    progcache_store *s = calloc(1, sizeof *s);
    CHECK(s != NULL);
    s->version = PROGCACHE_STORE_VERSION;
    s->name = "noisy";
    s->get = noisy_get;
    s->put = noisy_put;
    s->remove = noisy_remove;
    s->clear = noisy_clear;
    s->count = noisy_count;
    s->total_size = noisy_count;
    s->free = noisy_free;
    return s;
}

static void test_tier_messages(void)
{
    progcache_store *file = NULL;
    progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
    CHECK_OK(progcache_store_file_new(&file, root, &fo));
    progcache_store *tiers[3] = {noisy_store(), file, noisy_store()};
    progcache *cache = NULL;
    CHECK_OK(progcache_open_tiers(&cache, tiers, 3, NULL));
    CHECK_OK(progcache_put(cache, "k", 1, "value", 5));

    /* The file tier fails, the tier below misses with a message of its
     * own: the file tier's code comes back with its own message, whole. */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache__fs_fail(PROGCACHE_FS_READ, 1, EIO);
    CHECK_RC(PROGCACHE_EIO, progcache_get(&buf, cache, "k", 1));
    progcache__fs_fail_reset();
    char want[4400];
    snprintf(want, sizeof want, "cannot read cache entry %s/entries/", root);
    CHECK(!strncmp(progcache_error_last(), want, strlen(want)));
    expect_contains("get", progcache_error_last(), ": Input/output error");

    /* The file tier refuses a put; dropping the key from the tier above
     * fails too: the put's own message comes back, whole. */
    progcache__fs_fail(PROGCACHE_FS_WRITE, 1, EIO);
    CHECK_RC(PROGCACHE_EIO, progcache_put(cache, "k3", 2, "value", 5));
    progcache__fs_fail_reset();
    snprintf(want, sizeof want, "cannot write temp file %s/progcache/tmp/", root);
    CHECK(!strncmp(progcache_error_last(), want, strlen(want)));
    expect_contains("put", progcache_error_last(), ": Input/output error");
    progcache_buf_free(&buf);
    progcache_close(cache);
}

/* ---- an injected I/O error in each file operation ------------------------ */

/* Each message must name the whole directory and EIO's own text, and no
 * other errno's. */
static void check_eio_message(const char *call, int op, long nth)
{
    const char *m = progcache_error_last();
    if (!strstr(m, root) || !strstr(m, "Input/output error") || strstr(m, "Success") ||
        strstr(m, "No such file")) {
        fprintf(stderr, "%s, op %d, call %ld: \"%s\"\n", call, op, nth, m);
        CHECK(0);
    }
}

static void test_every_operation(void)
{
    for (int op = 0; op < PROGCACHE_FS_OP_COUNT; op++) {
        for (int call = 0; call < 4; call++) {
            for (long nth = 1; nth < 40; nth++) {
                char dir[4200];
                snprintf(dir, sizeof dir, "%s-%d-%d-%ld", root, op, call, nth);
                progcache *cache = NULL;
                if (call > 0) {
                    cache = open_cache(dir);
                    CHECK_OK(progcache_put(cache, "k", 1, "value", 5));
                }
                progcache_buf buf = PROGCACHE_BUF_INIT;
                progcache__fs_fail((progcache__fs_op)op, nth, EIO);
                int rc;
                const char *name;
                if (call == 0) {
                    name = "open";
                    progcache_options opts = PROGCACHE_OPTIONS_INIT;
                    opts.flags = PROGCACHE_NO_REMOTE;
                    rc = progcache_open(&cache, dir, &opts);
                } else if (call == 1) {
                    name = "get";
                    rc = progcache_get(&buf, cache, "k", 1);
                } else if (call == 2) {
                    name = "put";
                    rc = progcache_put(cache, "k2", 2, "other", 5);
                } else {
                    name = "remove";
                    rc = progcache_remove(cache, "k", 1);
                }
                progcache__fs_fail_reset();
                if (rc != PROGCACHE_OK && rc != PROGCACHE_ENOTFOUND)
                    check_eio_message(name, op, nth);
                progcache_buf_free(&buf);
                progcache_close(cache);
                test_rmtree(dir);
                if (rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND)
                    break; /* the nth call of op is past this call's last */
            }
        }
    }
}

int main(void)
{
    scratch = test_mkdtemp("messages");
    test_long_dir(root, sizeof root, scratch);
    test_steps();
    test_result_version_1();
    test_long_paths();
    test_tier_messages();
    test_every_operation();
    free(last_log);
    test_rmdtemp(scratch);
    printf("test_cache_messages: all passed\n");
    return 0;
}
