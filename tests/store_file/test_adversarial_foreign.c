/* The file store pointed at somebody's directory (issue 12): refused; the
 * temp sweep, clear, prune and eviction remove only names progcache or
 * cuda.core create, and verify reports the rest without removing it. */
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

/* ---- 1. a directory that is not a cache -------------------------------- */

static void test_refuses_foreign_directory(void)
{
    char *dir = test_mkdtemp("adv-home");
    char p[4200];
    path_of(p, sizeof p, dir, "notes.txt");
    write_file(p, "my notes");
    path_of(p, sizeof p, dir, "tmp");
    CHECK(mkdir(p, 0755) == 0);

    progcache_store *s = NULL;
    progcache_file_options o = PROGCACHE_FILE_OPTIONS_INIT;
    for (int ro = 0; ro < 2; ro++) {
        o.flags = ro ? PROGCACHE_FILE_READONLY : 0;
        CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(&s, dir, &o));
        CHECK(s == NULL);
        CHECK(strstr(progcache_error_last(), dir) != NULL);
        CHECK(strstr(progcache_error_last(), "\"notes.txt\"") != NULL);
        CHECK(strstr(progcache_error_last(), "choose an empty or new directory for the cache"));
    }
    progcache *cache = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_open(&cache, dir, NULL));
    CHECK(strstr(progcache_error_last(), "\"notes.txt\"") != NULL);
    /* Nothing was made in it. */
    path_of(p, sizeof p, dir, "entries");
    CHECK(!exists(p));
    path_of(p, sizeof p, dir, "progcache");
    CHECK(!exists(p));

    /* A layout name that is not a directory is not a cache either. */
    char *odd = test_mkdtemp("adv-odd");
    path_of(p, sizeof p, odd, "tmp");
    write_file(p, "a file named tmp");
    CHECK_RC(PROGCACHE_EINVAL, progcache_store_file_new(&s, odd, NULL));
    CHECK(strstr(progcache_error_last(), "is not a directory") != NULL);
    CHECK(holds(p, "a file named tmp"));

    /* Missing, empty, cuda.core's layout (entries/ only), ours: caches. */
    char *fresh = test_mkdtemp("adv-fresh");
    s = open_store(fresh);
    progcache_store_free(s);
    s = open_store(fresh); /* now holding entries/, tmp/, progcache/ */
    progcache_store_free(s);
    test_rmdtemp(fresh);
    fresh = test_mkdtemp("adv-fresh");
    path_of(p, sizeof p, fresh, "new/deeper");
    s = open_store(p);
    progcache_store_free(s);
    const char *ref = test_reference_dir();
    if (ref) {
        char src[4200], dst[4200];
        path_of(src, sizeof src, ref, "cuda-core-cache");
        path_of(dst, sizeof dst, fresh, "ref");
        CHECK(test_copytree(src, dst) == 0);
        o.flags = PROGCACHE_FILE_READONLY;
        CHECK_OK(progcache_store_file_new(&s, dst, &o));
        uint64_t n = 0;
        CHECK_OK(progcache_store_count(&n, s));
        CHECK(n > 0);
        progcache_store_free(s);
    }
    test_rmtree(dir);
    test_rmtree(odd);
    test_rmtree(fresh);
    free(dir);
    free(odd);
    free(fresh);
}

/* ---- 1. the temp sweep --------------------------------------------------- */

static void test_sweep_only_ours(void)
{
    char *dir = test_mkdtemp("adv-sweep");
    progcache_store_free(open_store(dir));
    char p[4200];
    path_of(p, sizeof p, dir, "tmp"); /* cuda.core's: it makes it, progcache does not */
    CHECK(mkdir(p, 0700) == 0);
    struct {
        const char *rel;
        int removed; /* old, a regular file of ours: swept */
    } files[] = {
        {"progcache/tmp/entry-0123456789abcdef", 1}, /* progcache's put */
        {"progcache/tmp/evict-0123456789abcdef", 1}, /* progcache's eviction */
        {"tmp/entry-0123456789abcdef", 1}, /* an older progcache's put */
        {"tmp/evict-0123456789abcdef", 1}, /* an older progcache's eviction */
        {"tmp/entry-ab_9xyz0", 1},         /* cuda.core's mkstemp */
        {"progcache/state-0123456789abcdef", 1},
        {"progcache/stats-0123456789abcdef", 1},
        {"tmp/old-file", 0},
        {"tmp/entry-", 0},
        {"tmp/entry-ABCDEFGH", 0},
        {"tmp/entry-0123456789ABCDEF", 0},
        {"tmp/entry-0123456789abcdef0", 0},
        {"tmp/evict-xyz", 0},
        {"tmp/.hidden", 0},
        {"progcache/notes", 0},
        {"progcache/state-", 0},
        {"progcache/tmp/entry-ab_9xyz0", 0}, /* cuda.core never writes there */
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        path_of(p, sizeof p, dir, files[i].rel);
        write_file(p, "user data");
        age(p, 7200);
    }
    /* Named like ours, but not regular files, or not old: left alone. */
    char fifo[4200], sub[4200], inner[4300], link[4200], young[4200], other[4200];
    path_of(fifo, sizeof fifo, dir, "tmp/entry-fifo0000");
    CHECK(mkfifo(fifo, 0600) == 0);
    age(fifo, 7200);
    path_of(sub, sizeof sub, dir, "tmp/entry-subdir00");
    CHECK(mkdir(sub, 0700) == 0);
    snprintf(inner, sizeof inner, "%s/entry-0123456789abcdef", sub);
    write_file(inner, "inside");
    age(inner, 7200);
    age(sub, 7200);
    path_of(link, sizeof link, dir, "tmp/evict-fedcba9876543210");
    CHECK(symlink("/etc/hostname", link) == 0);
    age(link, 7200);
    path_of(young, sizeof young, dir, "tmp/entry-fedcba9876543210");
    write_file(young, "in flight");
    /* Another user's temp file (only root can make one here). */
    path_of(other, sizeof other, dir, "tmp/entry-00000000deadbeef");
    write_file(other, "theirs");
    age(other, 7200);
    int chowned = geteuid() == 0 && chown(other, 4242, 4242) == 0;

    /* Open sweeps tmp/; clear (and prune, and an eviction pass) sweeps
     * progcache/ too. */
    progcache_store *s = open_store(dir);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            CHECK_OK(progcache_store_clear(s));
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            path_of(p, sizeof p, dir, files[i].rel);
            int gone = files[i].removed && (pass == 1 || !strncmp(files[i].rel, "tmp/", 4) ||
                                            !strncmp(files[i].rel, "progcache/tmp/", 14));
            if (gone != !exists(p)) {
                fprintf(stderr, "pass %d: %s: %s\n", pass, files[i].rel,
                        exists(p) ? "kept" : "removed");
                CHECK(0);
            }
            if (!files[i].removed)
                CHECK(holds(p, "user data"));
        }
        CHECK(type_of(fifo) == S_IFIFO && type_of(sub) == S_IFDIR && holds(inner, "inside"));
        CHECK(type_of(link) == S_IFLNK && holds(young, "in flight"));
        CHECK(!chowned || holds(other, "theirs"));
    }
    if (!chowned)
        puts("test_adversarial: other owner's temp file: skipped (not root)");
    progcache_store_free(s);
    test_rmdtemp(dir);
}

/* ---- 2. clear, prune, eviction and verify: entries only ---------------- */

static const char *const foreign_rels[] = {
    "entries/%s/notes.txt",
    "entries/%s/%s.bak",      /* an entry's name plus a suffix */
    "entries/%s/%.61s",       /* one digit short */
    "entries/%s/%sX",         /* upper case / other letters */
    "entries/README",
    "tmp/my-download",
};

static void foreign_path(char *out, size_t len, const char *dir, size_t i, const char *shard,
                         const char *name)
{
    char rel[512];
    if (i == 3) {
        char upper[64];
        snprintf(upper, sizeof upper, "%.61s", name);
        upper[0] = 'F';
        snprintf(rel, sizeof rel, foreign_rels[i], shard, upper);
    } else {
        snprintf(rel, sizeof rel, foreign_rels[i], shard, name);
    }
    path_of(out, len, dir, rel);
}

static void test_admin_only_entries(void)
{
    const size_t nforeign = sizeof foreign_rels / sizeof foreign_rels[0];
    char *dir = test_mkdtemp("adv-clear");
    progcache_store *s = open_store(dir);
    char tmp_dir[4200];
    path_of(tmp_dir, sizeof tmp_dir, dir, "tmp"); /* cuda.core's, made as it makes it */
    CHECK(mkdir(tmp_dir, 0700) == 0);
    char value[300];
    memset(value, 'v', sizeof value);
    CHECK_OK(progcache_store_put(s, "k0", 2, value, sizeof value));
    CHECK_OK(progcache_store_put(s, "k1", 2, value, sizeof value));
    char e0[4200];
    entry_of(e0, sizeof e0, dir, "k0");
    char shard[3] = {e0[strlen(dir) + 9], e0[strlen(dir) + 10], 0};
    const char *name = strrchr(e0, '/') + 1;
    char p[4400];
    for (size_t i = 0; i < nforeign; i++) {
        foreign_path(p, sizeof p, dir, i, shard, name);
        write_file(p, "not an entry");
        age(p, 30 * 86400); /* the oldest thing in the directory */
    }

    /* Counted as nothing, listed as nothing. */
    uint64_t n = 0, bytes = 0;
    CHECK_OK(progcache_store_count(&n, s));
    CHECK_OK(progcache_store_total_size(&bytes, s));
    CHECK(n == 2 && bytes == 2 * sizeof value);

    /* verify reports them, never as bad entries, and --fix leaves them. */
    progcache_verify_result res;
    seen v;
    verify(&res, &v, s, PROGCACHE_VERIFY_FIX);
    /* 'v' bytes: of no known kind, not damage: kept by --fix. */
    CHECK(res.checked == 2 && res.bad == 0 && res.removed == 0 && res.unknown == 2);
    verify(&res, &v, s, PROGCACHE_VERIFY_FIX_UNKNOWN);
    CHECK(res.checked == 2 && res.bad == 0 && res.removed == 2 && res.unknown_removed == 2);
    CHECK(res.foreign == nforeign && v.foreign == (int)nforeign);
    CHECK(strstr(v.text, "foreign entries/README: not an entry"));
    CHECK(strstr(v.text, "foreign tmp/my-download: not a temp file"));
    for (size_t i = 0; i < nforeign; i++) {
        foreign_path(p, sizeof p, dir, i, shard, name);
        CHECK(holds(p, "not an entry"));
    }

    /* Eviction over the cap, prune by age and size, clear: entries go,
     * the rest stays. */
    progcache_store_free(s);
    s = open_store_opts(dir, 500, 0, 0);
    for (int i = 0; i < 6; i++) {
        char key[8];
        snprintf(key, sizeof key, "e%d", i);
        CHECK_OK(progcache_store_put(s, key, strlen(key), value, sizeof value));
    }
    CHECK_OK(progcache_store_total_size(&bytes, s));
    CHECK(bytes <= 500);
    progcache_prune_options po = PROGCACHE_PRUNE_OPTIONS_INIT;
    po.older_than = 86400;
    po.max_size = 1;
    progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
    CHECK_OK(progcache_file_prune(&pr, progcache_store_as_file(s), &po));
    CHECK(pr.entries == 0);
    CHECK_OK(progcache_store_put(s, "k2", 2, value, sizeof value));
    CHECK_OK(progcache_store_clear(s));
    CHECK_OK(progcache_store_count(&n, s));
    CHECK(n == 0);
    for (size_t i = 0; i < nforeign; i++) {
        foreign_path(p, sizeof p, dir, i, shard, name);
        CHECK(holds(p, "not an entry"));
    }
    progcache_store_free(s);

    /* A program built against version 1 of the verify structs: no foreign
     * count written, no on_foreign read. */
    s = open_store(dir);
    union {
        progcache_verify_result r;
        unsigned char raw[sizeof(progcache_verify_result) + 16];
    } old;
    memset(&old, 0xAA, sizeof old);
    old.r.version = 1;
    union {
        progcache_verify_options o;
        unsigned char raw[sizeof(progcache_verify_options)];
    } oo;
    memset(&oo, 0xAA, sizeof oo); /* on_foreign: garbage */
    oo.o.version = 1;
    oo.o.flags = 0;
    oo.o.on_entry = NULL;
    oo.o.ctx = NULL;
    CHECK_OK(progcache_file_verify(&old.r, progcache_store_as_file(s), &oo.o));
    CHECK(old.r.version == 1 && old.r.checked == 0);
    for (size_t i = offsetof(progcache_verify_result, foreign); i < sizeof old.raw; i++)
        CHECK(old.raw[i] == 0xAA);
    progcache_store_free(s);
    test_rmdtemp(dir);
}

ADVERSARIAL_MAIN("test_adversarial_foreign", ADVERSARIAL_TEST(refuses_foreign_directory),
                 ADVERSARIAL_TEST(sweep_only_ours), ADVERSARIAL_TEST(admin_only_entries))
