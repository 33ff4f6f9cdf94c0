/* The file store as a hostile or careless user meets it (issue 12):
 *  - a cache pointed at somebody's directory: refused; the temp sweep,
 *    clear, prune and eviction remove only names progcache or cuda.core
 *    create, and verify reports the rest without removing it;
 *  - an entry copied, linked or moved to another key's path: a miss,
 *    removed, and recompiled (the seal binds the entry's name);
 *  - FIFOs, sockets, device nodes and directories where the cache expects
 *    its files: nothing hangs, nothing is replaced, verify --fix removes
 *    what is at an entry's path but directories;
 *  - a file size limit (ulimit -f): no SIGXFSZ, a clear error, no temp
 *    files left, and compile-or-load keeps the artifact;
 *  - max_artifact_size: bigger puts refused, bigger entries never read.
 * Calls that used to block run in a forked child under alarm(), so the
 * test itself cannot hang. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cuda_fixtures.h"
#include "progcache/admin.h"
#include "progcache/stats.h"
#include "store/file/file_store.h"

/* ---- helpers --------------------------------------------------------- */

static char log_text[8192];

static void capture_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    (void)level;
    size_t used = strlen(log_text);
    snprintf(log_text + used, sizeof log_text - used, "%s\n", message);
}

static progcache_store *open_store_opts(const char *dir, uint64_t max_size, unsigned int flags,
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

static progcache_store *open_store(const char *dir)
{
    return open_store_opts(dir, 0, 0, 0);
}

static void path_of(char *out, size_t len, const char *dir, const char *rel)
{
    snprintf(out, len, "%s/%s", dir, rel);
}

static void entry_of(char *out, size_t len, const char *dir, const char *key)
{
    char rel[FILE_REL_PATH_MAX];
    CHECK_OK(progcache__file_rel_path(rel, NULL, key, strlen(key)));
    path_of(out, len, dir, rel);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void age(const char *path, time_t seconds)
{
    struct timespec t[2] = {{time(NULL) - seconds, 0}, {time(NULL) - seconds, 0}};
    CHECK(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static mode_t type_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

/* The file holds exactly text. */
static int holds(const char *path, const char *text)
{
    size_t n = 0;
    char *got = test_read_file(path, &n);
    int same = got && n == strlen(text) && !memcmp(got, text, n);
    free(got);
    return same;
}

static size_t count_names(const char *dir, const char *prefix)
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
static int make_socket(const char *path)
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
static void in_child(void (*fn)(void *), void *arg, unsigned int seconds, const char *what)
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

static int have_xattrs(const char *dir)
{
    char p[4200];
    path_of(p, sizeof p, dir, "xattr-probe");
    write_file(p, "x");
    int ok = setxattr(p, "user.probe", "1", 1, 0) == 0;
    unlink(p);
    return ok;
}

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
    test_rmtree(fresh);
    free(fresh);
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
    test_rmtree(dir);
    free(dir);
}

/* ---- 2. clear, prune, eviction and verify: entries only ---------------- */

typedef struct seen {
    int bad, removed, foreign;
    char text[4096];
} seen;

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

static void verify(progcache_verify_result *res, seen *v, progcache_store *s, unsigned int flags)
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
    test_rmtree(dir);
    free(dir);
}

/* ---- 4. the seal binds the entry's name --------------------------------- */

static void copy_with_seal(const char *from, const char *to)
{
    size_t n = 0;
    char *bytes = test_read_file(from, &n);
    unsigned char seal[128];
    ssize_t len = getxattr(from, FILE_SEAL_XATTR, seal, sizeof seal);
    CHECK(bytes && len > 0);
    FILE *f = fopen(to, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0);
    CHECK(setxattr(to, FILE_SEAL_XATTR, seal, (size_t)len, 0) == 0);
    free(bytes);
}

static void test_seal_binds_key(void)
{
    char *dir = test_mkdtemp("adv-seal");
    if (!have_xattrs(dir)) {
        puts("test_adversarial: the seal: skipped (no user xattrs on this file system)");
        test_rmtree(dir);
        free(dir);
        return;
    }
    progcache_store *s = open_store(dir);
    char a[4200], b[4200], c[4200];
    entry_of(a, sizeof a, dir, "key-a");
    entry_of(b, sizeof b, dir, "key-b");
    entry_of(c, sizeof c, dir, "key-c");
    const char *const how[] = {"copy", "hard link", "rename"};
    progcache_buf buf = PROGCACHE_BUF_INIT;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(progcache_store_put(s, "key-a", 5, "value of a", 10));
        CHECK_OK(progcache_store_put(s, "key-b", 5, "value of b", 10)); /* makes b's shard */
        CHECK(unlink(b) == 0);
        if (i == 0)
            copy_with_seal(a, b);
        else if (i == 1)
            CHECK(link(a, b) == 0);
        else
            CHECK(rename(a, b) == 0);
        progcache_stats st = PROGCACHE_STATS_INIT;
        CHECK_OK(progcache_store_stats_get(&st, s));
        uint64_t before = st.corrupt_removed;
        log_text[0] = '\0';
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "key-b", 5));
        CHECK_OK(progcache_store_stats_get(&st, s));
        if (st.corrupt_removed != before + 1 || exists(b)) {
            fprintf(stderr, "%s: not removed\n", how[i]);
            CHECK(0);
        }
        CHECK(strstr(log_text, "sealed for another entry") != NULL);
        if (i < 2) { /* the original is untouched and still a hit */
            CHECK_OK(progcache_store_get(&buf, s, "key-a", 5));
            CHECK(buf.size == 10 && !memcmp(buf.data, "value of a", 10));
        }
    }

    /* verify names it; --fix removes it. */
    CHECK_OK(progcache_store_put(s, "key-a", 5, "value of a", 10));
    copy_with_seal(a, b);
    progcache_verify_result res;
    seen v;
    verify(&res, &v, s, 0);
    CHECK(strstr(v.text, "sealed for another entry") != NULL);
    verify(&res, &v, s, PROGCACHE_VERIFY_FIX);
    CHECK(!exists(b)); /* (a went too: "value of a" is no artifact) */

    /* Seals that bind no name (an older progcache's, 32 or 33 bytes) or of
     * a format this version does not know: read as no seal, as cuda.core's
     * entries are (a plain value passes the structure check). */
    unsigned char seal[64];
    memset(seal, 0x5a, sizeof seal);
    const size_t lens[] = {32, 33, FILE_SEAL_SIZE, FILE_SEAL_SIZE + 1};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        CHECK_OK(progcache_store_put(s, "key-c", 5, "value of c", 10));
        seal[0] = 9; /* not format 2 */
        CHECK(setxattr(c, FILE_SEAL_XATTR, seal, lens[i], 0) == 0);
        CHECK_OK(progcache_store_get(&buf, s, "key-c", 5));
        CHECK(buf.size == 10 && !memcmp(buf.data, "value of c", 10));
    }
    /* Import seals with the entry's name too (progcache__file_put_rel). */
    char rel[FILE_REL_PATH_MAX];
    int shard;
    CHECK_OK(progcache__file_rel_path(rel, &shard, "key-c", 5));
    CHECK_OK(progcache__file_put_rel(progcache_store_as_file(s), rel, shard, "imported", 8, NULL));
    CHECK(getxattr(c, FILE_SEAL_XATTR, seal, sizeof seal) == FILE_SEAL_SIZE && seal[0] == 2);
    CHECK_OK(progcache_store_get(&buf, s, "key-c", 5));
    CHECK(unlink(b) == 0 || errno == ENOENT);
    copy_with_seal(c, b);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&buf, s, "key-b", 5));

    progcache_buf_free(&buf);
    progcache_store_free(s);
    test_rmtree(dir);
    free(dir);
}

/* compile-or-load: another program's entry copied to this program's path
 * is a miss and is recompiled. */
static const char other_source[] =
    "extern \"C\" __global__ void scale(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s + 1.0f; }\n";

static void test_seal_heals_compile(void)
{
    char *dir = test_mkdtemp("adv-sealc");
    if (!have_xattrs(dir)) {
        test_rmtree(dir);
        free(dir);
        return;
    }
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program pa = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program pb = pa;
    pb.nvrtc.source = other_source;
    progcache_program_result ra = PROGCACHE_PROGRAM_RESULT_INIT, rb = PROGCACHE_PROGRAM_RESULT_INIT;
    size_t na, nb;
    unsigned char *art_a = fixture_compile_copy(&ra, cache, &pa, &na);
    unsigned char *art_b = fixture_compile_copy(&rb, cache, &pb, &nb);
    CHECK(na != nb || memcmp(art_a, art_b, na) != 0);
    char path_a[4096], path_b[4096];
    fixture_entry_path(path_a, sizeof path_a, dir, ra.key);
    fixture_entry_path(path_b, sizeof path_b, dir, rb.key);
    CHECK(unlink(path_b) == 0);
    copy_with_seal(path_a, path_b); /* a's CUBIN, sealed, at b's path */
    CHECK_OK(progcache_compile_or_load(&rb, cache, &pb));
    CHECK(rb.status == PROGCACHE_STATUS_MISS);
    CHECK(rb.artifact.size == nb && !memcmp(rb.artifact.data, art_b, nb));
    CHECK_OK(progcache_compile_or_load(&rb, cache, &pb)); /* healed: b's own entry */
    CHECK(rb.status == PROGCACHE_STATUS_HIT);
    CHECK(rb.artifact.size == nb && !memcmp(rb.artifact.data, art_b, nb));
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&st, cache));
    CHECK(st.corrupt_removed == 1);
    free(art_a);
    free(art_b);
    progcache_program_result_release(&ra);
    progcache_program_result_release(&rb);
    progcache_close(cache);
    test_rmtree(dir);
    free(dir);
}

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
    test_rmtree(dir);
    free(dir);
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
    test_rmtree(dir);
    free(dir);
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
            test_rmtree(dir);
            free(dir);
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
    test_rmtree(dir);
    free(dir);
}

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
        test_rmtree(dir);
        free(dir);
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
    test_rmtree(dir);
    free(dir);
}

/* With an argument, only the test of that name runs (for a bisect). */
int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"refuses_foreign_directory", test_refuses_foreign_directory},
        {"sweep_only_ours", test_sweep_only_ours},
        {"admin_only_entries", test_admin_only_entries},
        {"seal_binds_key", test_seal_binds_key},
        {"seal_heals_compile", test_seal_heals_compile},
        {"fifo_at_entry", test_fifo_at_entry},
        {"verify_non_regular", test_verify_non_regular},
        {"fifo_state_files", test_fifo_state_files},
        {"digest_fifo", test_digest_fifo},
        {"file_size_limit", test_file_size_limit},
        {"max_artifact_size", test_max_artifact_size},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (argc < 2 || !strcmp(argv[1], tests[i].name))
            tests[i].fn();
    printf("test_adversarial: all passed\n");
    return 0;
}
