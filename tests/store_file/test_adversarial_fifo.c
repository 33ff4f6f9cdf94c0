/* FIFOs, sockets, device nodes and directories where the file store
 * expects its files (issue 12): nothing hangs, nothing is replaced, verify
 * --fix removes what is at an entry's path but directories. Calls that
 * used to block run in a forked child under alarm(), so the test itself
 * cannot hang. */
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

/* ---- 6. FIFOs and other non-regular files ------------------------------- */

typedef struct fifo_case {
    const char *dir;
    char entry[4200];
} fifo_case;

static void get_through_fifo(void *arg)
{
    fifo_case *fc = arg;
    progcache_store *s = open_store(fc->dir);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    alarm(1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "k", 1));
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_remove(s, "k", 1)); /* not ours to remove */
    CHECK(type_of(fc->entry) == S_IFIFO);
    progcache_store_free(s);

    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_NO_FSYNC | PROGCACHE_NO_REMOTE;
    CHECK_OK(progcache_open(&cache, fc->dir, &o));
    alarm(1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_get(&buf, cache, "k", 1));
    alarm(0);
    progcache_close(cache);
    progcache_buf_free(&buf);
}

static void compile_through_fifo(void *arg)
{
    fifo_case *fc = arg;
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_NO_FSYNC | PROGCACHE_NO_REMOTE;
    CHECK_OK(progcache_open(&cache, fc->dir, &o));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.artifact.size > 1000 && !r.cache_error);
    /* The put replaced the FIFO at the entry's own path with the entry. */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT);
    progcache_program_result_release(&r);
    progcache_close(cache);
}

static void test_fifo_at_entry(void)
{
    fifo_case fc;
    char *dir = test_mkdtemp("adv-fifo");
    fc.dir = dir;
    progcache_store *s = open_store(dir);
    CHECK_OK(progcache_store_put(s, "k", 1, "v", 1)); /* makes the shard */
    progcache_store_free(s);
    entry_of(fc.entry, sizeof fc.entry, dir, "k");
    CHECK(unlink(fc.entry) == 0 && mkfifo(fc.entry, 0600) == 0);
    in_child(get_through_fifo, &fc, 10, "get of a FIFO entry");

    /* compile-or-load, whose key's entry path is a FIFO. */
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    fixture_entry_path(fc.entry, sizeof fc.entry, dir, r.key);
    progcache_program_result_release(&r);
    progcache_close(cache);
    CHECK(unlink(fc.entry) == 0 && mkfifo(fc.entry, 0600) == 0);
    in_child(compile_through_fifo, &fc, 120, "compile-or-load over a FIFO entry");
    test_rmdtemp(dir);
}

/* verify reports what is not a regular file at an entry's path, and --fix
 * removes it, but for a directory. */
static void test_verify_non_regular(void)
{
    char *dir = test_mkdtemp("adv-nonreg");
    progcache_store *s = open_store(dir);
    const char *keys[] = {"fifo", "sock", "link", "dir", "dev"};
    char paths[5][4200];
    for (int i = 0; i < 5; i++) {
        CHECK_OK(progcache_store_put(s, keys[i], strlen(keys[i]), "v", 1));
        entry_of(paths[i], sizeof paths[i], dir, keys[i]);
        CHECK(unlink(paths[i]) == 0);
    }
    char target[4200];
    path_of(target, sizeof target, dir, "progcache/lock"); /* exists, must survive */
    CHECK(mkfifo(paths[0], 0600) == 0);
    int sock = make_socket(paths[1]) == 0;
    CHECK(symlink(target, paths[2]) == 0);
    CHECK(mkdir(paths[3], 0700) == 0);
    char inside[4300];
    snprintf(inside, sizeof inside, "%s/keep", paths[3]);
    write_file(inside, "kept");
    int dev = mknod(paths[4], S_IFCHR | 0600, makedev(1, 3)) == 0; /* /dev/null's numbers */
    int expected = 3 + sock + dev;
    progcache_verify_result res;
    seen v;
    verify(&res, &v, s, 0);
    CHECK(res.bad == (uint64_t)expected && v.bad == expected && res.removed == 0);
    CHECK(strstr(v.text, "a FIFO where an entry belongs"));
    CHECK(strstr(v.text, "a symbolic link where an entry belongs"));
    CHECK(strstr(v.text, "a directory where an entry belongs; remove it by hand"));
    CHECK(!sock || strstr(v.text, "a socket where an entry belongs"));
    CHECK(!dev || strstr(v.text, "a character device where an entry belongs"));
    /* Neither a get, nor clear, nor remove touches them. */
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 5; i++)
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, keys[i], strlen(keys[i])));
    CHECK_OK(progcache_store_clear(s));
    CHECK(type_of(paths[0]) == S_IFIFO && type_of(paths[2]) == S_IFLNK);
    verify(&res, &v, s, PROGCACHE_VERIFY_FIX);
    CHECK(res.removed == (uint64_t)expected - 1);
    CHECK(!exists(paths[0]) && !exists(paths[1]) && !exists(paths[2]) && !exists(paths[4]));
    CHECK(type_of(paths[3]) == S_IFDIR && holds(inside, "kept"));
    CHECK(type_of(target) == S_IFREG); /* the link was removed, not followed */
    if (!dev)
        puts("test_adversarial: device node at an entry path: skipped (no mknod here)");
    progcache_buf_free(&buf);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

/* A FIFO (or a directory) at progcache/stats, state, lock, flight: the
 * store opens without blocking, works without that file, says so, and
 * leaves the thing alone. */
typedef struct state_case {
    const char *dir;
    const char *name;
    int as_dir;
} state_case;

static void use_with_state_fifo(void *arg)
{
    state_case *sc = arg;
    char p[4200];
    path_of(p, sizeof p, sc->dir, sc->name);
    log_text[0] = '\0';
    progcache *cache;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_NO_FSYNC | PROGCACHE_NO_REMOTE;
    o.log = capture_log;
    o.max_size = 1 << 20;
    CHECK_OK(progcache_open(&cache, sc->dir, &o));
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_put(cache, "k", 1, "value", 5));
    CHECK_OK(progcache_get(&buf, cache, "k", 1));
    CHECK(buf.size == 5 && !memcmp(buf.data, "value", 5));
    if (!strcmp(sc->name, "progcache/flight")) {
        progcache_program prog = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
        progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
        CHECK_OK(progcache_compile_or_load(&r, cache, &prog));
        CHECK(r.status == PROGCACHE_STATUS_MISS && !r.cache_error);
        progcache_program_result_release(&r);
    }
    uint64_t n = 0;
    CHECK_OK(progcache_count(&n, cache));
    CHECK(n >= 1);
    progcache_close(cache);
    /* Said so, naming the file and what it is. */
    if (!strstr(log_text, p) || !strstr(log_text, sc->as_dir ? "a directory" : "a FIFO")) {
        fprintf(stderr, "log for %s: %s\n", sc->name, log_text);
        CHECK(0);
    }
    CHECK(type_of(p) == (sc->as_dir ? S_IFDIR : S_IFIFO));
    if (!strcmp(sc->name, "progcache/stats")) {
        /* Read-only opens (progcache stats, ls, verify) used to block here. */
        progcache_store *s = open_store_opts(sc->dir, 0, PROGCACHE_FILE_READONLY, 0);
        progcache_store_free(s);
    }
    progcache_buf_free(&buf);
}

static void test_fifo_state_files(void)
{
    const char *names[] = {"progcache/stats", "progcache/state", "progcache/lock",
                           "progcache/flight"};
    for (int as_dir = 0; as_dir < 2; as_dir++) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char *dir = test_mkdtemp("adv-state");
            char p[4200];
            path_of(p, sizeof p, dir, "progcache");
            CHECK(mkdir(p, 0700) == 0);
            path_of(p, sizeof p, dir, names[i]);
            CHECK(as_dir ? mkdir(p, 0700) == 0 : mkfifo(p, 0600) == 0);
            state_case sc = {dir, names[i], as_dir};
            in_child(use_with_state_fifo, &sc, 60, names[i]);
            test_rmdtemp(dir);
        }
    }
}

/* A header file that is a FIFO: the digest over files refuses it, at once. */
static void digest_fifo(void *arg)
{
    const char *const paths[] = {arg};
    unsigned char out[PROGCACHE_KEY_SIZE];
    CHECK_RC(PROGCACHE_EIO, progcache_digest_files(out, paths, 1));
    CHECK(strstr(progcache_error_last(), "not a regular file") != NULL);
}

static void test_digest_fifo(void)
{
    char *dir = test_mkdtemp("adv-digest");
    char p[4200];
    path_of(p, sizeof p, dir, "header.h");
    CHECK(mkfifo(p, 0600) == 0);
    in_child(digest_fifo, p, 5, "digest over a FIFO");
    test_rmdtemp(dir);
}

ADVERSARIAL_MAIN("test_adversarial_fifo", ADVERSARIAL_TEST(fifo_at_entry),
                 ADVERSARIAL_TEST(verify_non_regular), ADVERSARIAL_TEST(fifo_state_files),
                 ADVERSARIAL_TEST(digest_fifo))
