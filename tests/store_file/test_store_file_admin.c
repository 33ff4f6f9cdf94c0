/* The admin functions of the file store (src/dir/dir_admin.c, over src/store/file/file_walk.c):
 * listing entries (and only entries), reading one by name, verify with and
 * without --fix, prune by size and by age in LRU order. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define N 5

static const char *ptx_of(int i, char *buf, size_t len)
{
    snprintf(buf, len,
             "// entry %d\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
             ".visible .entry kernel%d(\n\t.param .u64 p\n)\n{\n\tret;\n}\n",
             i, i);
    return buf;
}

typedef struct listing {
    char names[16][65];
    size_t count;
    int kinds_ok, data_ok;
} listing;

static int list_fn(void *ctx, const progcache_entry *e)
{
    listing *l = ctx;
    CHECK(l->count < 16);
    memcpy(l->names[l->count++], e->name, 65);
    if (e->artifact && e->artifact->kind == PROGCACHE_KIND_PTX && e->artifact->valid &&
        e->artifact->num_kernels == 1 &&
        !strncmp(progcache_artifact_kernel(e->artifact, 0), "kernel", 6))
        l->kinds_ok++;
    if (e->data && e->size > 20 && !memcmp(e->data, "// entry ", 9))
        l->data_ok++;
    return 0;
}

static int stop_at_two(void *ctx, const progcache_entry *e)
{
    (void)e;
    return ++*(int *)ctx == 2 ? 7 : 0;
}

static void entry_path(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%.900s/entries/%.2s/%.62s", dir, name, name + 2);
}

static void fill(const char *dir, progcache_store **out)
{
    CHECK_OK(progcache_store_file_new(out, dir, NULL));
    char text[256], key[16];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        ptx_of(i, text, sizeof text);
        CHECK_OK(progcache_store_put(*out, key, strlen(key), text, strlen(text)));
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

static void test_foreach(void)
{
    char *dir = test_mkdtemp("admin");
    progcache_store *fs;
    fill(dir, &fs);
    /* Things in entries/ that are not entries: a bad shard name, a short
     * name, upper-case hex, a directory, a symbolic link to an entry. */
    char path[1024], target[1024];
    snprintf(path, sizeof path, "%s/entries/zz", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/entries/zz/%062d", dir, 0);
    write_file(path, "not an entry");
    listing before = {{{0}}, 0, 0, 0};
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), 0, list_fn, &before));
    CHECK(before.count == N);
    snprintf(path, sizeof path, "%s/entries/%.2s/short", dir, before.names[0]);
    write_file(path, "short");
    snprintf(path, sizeof path, "%s/entries/%.2s/%062d", dir, before.names[0], 0);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/entries/%.2s/%s", dir, before.names[0],
             "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789" + 2);
    write_file(path, "upper case");
    entry_path(target, sizeof target, dir, before.names[1]);
    snprintf(path, sizeof path, "%s/entries/%.2s/%062x", dir, before.names[1], 1);
    CHECK(symlink(target, path) == 0);

    listing l = {{{0}}, 0, 0, 0};
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), PROGCACHE_ENTRIES_INSPECT, list_fn, &l));
    CHECK(l.count == N && l.kinds_ok == N && l.data_ok == N);
    for (size_t i = 1; i < l.count; i++)
        CHECK(strcmp(l.names[i - 1], l.names[i]) < 0); /* name order */
    listing r = {{{0}}, 0, 0, 0};
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), PROGCACHE_ENTRIES_READ, list_fn, &r));
    CHECK(r.data_ok == N && r.kinds_ok == 0);
    listing bare = {{{0}}, 0, 0, 0};
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), 0, list_fn, &bare));
    CHECK(bare.count == N && bare.data_ok == 0);
    int calls = 0;
    CHECK_RC(7, progcache_file_foreach(progcache_store_as_file(fs), 0, stop_at_two, &calls));
    CHECK(calls == 2);

    /* Reading an entry does not make it recently used. */
    entry_path(path, sizeof path, dir, l.names[0]);
    struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
    CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_file_read_entry(&buf, progcache_store_as_file(fs), l.names[0]));
    CHECK(buf.size > 20 && !memcmp(buf.data, "// entry ", 9));
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_atim.tv_sec == 1000000000);

    CHECK_RC(PROGCACHE_ENOTFOUND,
             progcache_file_read_entry(
                 &buf, progcache_store_as_file(fs), "00000000000000000000000000000000000000000000000000000000000000ff"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_read_entry(&buf, progcache_store_as_file(fs), "../etc/passwd"));
    CHECK_RC(PROGCACHE_EINVAL,
             progcache_file_read_entry(
                 &buf, progcache_store_as_file(fs), "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"));
    /* The symbolic link is never followed, even by name. */
    char link_name[65];
    snprintf(link_name, sizeof link_name, "%.2s%062x", l.names[1], 1);
    CHECK_RC(PROGCACHE_ENOTFOUND, progcache_file_read_entry(&buf, progcache_store_as_file(fs), link_name));

    /* Not a file store: the admin functions take a progcache_file, and a
     * store of another kind has none. */
    progcache_store *mem;
    CHECK_OK(progcache_store_memory_new(&mem, NULL));
    CHECK(progcache_store_as_file(mem) == NULL);
    CHECK(progcache_store_as_file(NULL) == NULL);
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_foreach(progcache_store_as_file(mem), 0, list_fn, &l));
    CHECK(strstr(progcache_error_last(), "the cache directory is NULL"));
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_foreach(progcache_store_as_file(fs), 0, NULL, NULL));
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_foreach(progcache_store_as_file(fs), 0x80, list_fn, &l));
    progcache_store_free(mem);
    progcache_buf_free(&buf);
    progcache_store_free(fs);
    test_rmdtemp(dir);
}

typedef struct problems {
    int bad, removed;
    char reasons[512];
} problems;

static int note_problem(void *ctx, const progcache_entry *e)
{
    problems *p = ctx;
    if (!e->error)
        return 0;
    p->bad++;
    p->removed += e->removed;
    strncat(p->reasons, e->error, sizeof p->reasons - strlen(p->reasons) - 2);
    strcat(p->reasons, "|");
    return 0;
}

static void test_verify(void)
{
    char *dir = test_mkdtemp("adminverify");
    progcache_store *fs;
    fill(dir, &fs);
    CHECK_OK(progcache_store_put(fs, "junk", 4, "\x01\x02garbage", 9));
    listing l = {{{0}}, 0, 0, 0};
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), PROGCACHE_ENTRIES_INSPECT, list_fn, &l));
    CHECK(l.count == N + 1 && l.kinds_ok == N);

    /* Bytes of no known kind (progcache put and cuda.core store any) are
     * not damage: counted apart, never bad. */
    progcache_verify_result res = PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&res, progcache_store_as_file(fs), NULL));
    CHECK(res.checked == N + 1 && res.bad == 0 && res.removed == 0 && res.unknown == 1);

    /* Damage two PTX entries: one cut short inside its function, one with
     * a flipped letter in a comment (still well-formed PTX: only the
     * SHA-256 recorded at put catches it). */
    char path[1024];
    int damaged = 0;
    for (size_t i = 0; i < l.count && damaged < 2; i++) {
        progcache_buf buf = PROGCACHE_BUF_INIT;
        CHECK_OK(progcache_file_read_entry(&buf, progcache_store_as_file(fs), l.names[i]));
        if (memcmp(buf.data, "// entry", 8)) {
            progcache_buf_free(&buf);
            continue;
        }
        entry_path(path, sizeof path, dir, l.names[i]);
        if (damaged == 0) {
            CHECK(truncate(path, (off_t)buf.size - 4) == 0);
        } else {
            int fd = open(path, O_WRONLY);
            CHECK(fd >= 0 && pwrite(fd, "E", 1, 3) == 1);
            close(fd);
        }
        damaged++;
        progcache_buf_free(&buf);
    }
    /* Without user xattrs (some file systems) there is no digest to catch
     * the flipped letter. */
    const int digests = getxattr(path, "user.progcache.sha256", NULL, 0) == 42; /* the seal */
    const uint64_t bad = digests ? 2 : 1;
    if (!digests)
        printf("verify by SHA-256: skipped (no user xattrs on this file system)\n");
    problems p = {0, 0, ""};
    progcache_verify_options opts = PROGCACHE_VERIFY_OPTIONS_INIT;
    opts.on_entry = note_problem;
    opts.ctx = &p;
    CHECK_OK(progcache_file_verify(&res, progcache_store_as_file(fs), &opts));
    CHECK(res.checked == N + 1 && res.bad == bad && res.removed == 0 && p.bad == (int)bad);
    CHECK(res.unknown == 1 && strstr(p.reasons, "cut short") && !strstr(p.reasons, "not a CUBIN"));
    CHECK(!digests || strstr(p.reasons, "SHA-256"));

    /* --fix on a read-only store is refused. */
    progcache_file_options ro = PROGCACHE_FILE_OPTIONS_INIT;
    ro.flags = PROGCACHE_FILE_READONLY;
    progcache_store *rofs;
    CHECK_OK(progcache_store_file_new(&rofs, dir, &ro));
    opts.flags = PROGCACHE_VERIFY_FIX;
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_verify(&res, progcache_store_as_file(rofs), &opts));
    progcache_store_free(rofs);

    memset(&p, 0, sizeof p);
    CHECK_OK(progcache_file_verify(&res, progcache_store_as_file(fs), &opts));
    CHECK(res.bad == bad && res.removed == bad && p.removed == (int)bad);
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&s, fs));
    CHECK(s.corrupt_removed == bad && s.entries == N + 1 - bad);
    CHECK_OK(progcache_file_verify(&res, progcache_store_as_file(fs), NULL));
    CHECK(res.checked == N + 1 - bad && res.bad == 0 && res.unknown == 1);
    /* A version-2 result has no room for the unknown counts. */
    unsigned char raw[sizeof res + 8];
    memset(raw, 0xab, sizeof raw);
    progcache_verify_result *v2 = (progcache_verify_result *)(void *)raw;
    v2->version = 2;
    CHECK_OK(progcache_file_verify(v2, progcache_store_as_file(fs), NULL));
    for (size_t i = offsetof(progcache_verify_result, unknown); i < sizeof raw; i++)
        CHECK(raw[i] == 0xab);
    /* Asked for exactly that, they go (and nothing else). */
    opts.flags = PROGCACHE_VERIFY_FIX_UNKNOWN;
    CHECK_OK(progcache_file_verify(&res, progcache_store_as_file(fs), &opts));
    CHECK(res.unknown == 1 && res.unknown_removed == 1 && res.removed == 1 && res.bad == 0);
    CHECK_OK(progcache_store_stats_get(&s, fs));
    CHECK(s.entries == N - bad && s.corrupt_removed == bad);

    progcache_verify_result unversioned;
    memset(&unversioned, 0, sizeof unversioned);
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_verify(&unversioned, progcache_store_as_file(fs), NULL));
    opts.flags = 0x100;
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_verify(&res, progcache_store_as_file(fs), &opts));
    progcache_store_free(fs);
    test_rmdtemp(dir);
}

static void set_atime(const char *dir, const char *name, time_t when)
{
    char path[1024];
    entry_path(path, sizeof path, dir, name);
    struct timespec t[2] = {{when, 0}, {0, UTIME_OMIT}};
    CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
}

static int exists(const char *dir, const char *name)
{
    char path[1024];
    entry_path(path, sizeof path, dir, name);
    return access(path, F_OK) == 0;
}

static void test_prune(void)
{
    char *dir = test_mkdtemp("adminprune");
    progcache_store *fs;
    fill(dir, &fs);
    listing l = {{{0}}, 0, 0, 0};
    CHECK_OK(progcache_file_foreach(progcache_store_as_file(fs), 0, list_fn, &l));
    CHECK(l.count == N);
    /* Last uses: entry i was used i days ago (entry 0 now). */
    time_t now = time(NULL);
    for (size_t i = 0; i < N; i++)
        set_atime(dir, l.names[i], now - (time_t)i * 86400 - 60);

    progcache_prune_options po = PROGCACHE_PRUNE_OPTIONS_INIT;
    progcache_prune_result pr = PROGCACHE_PRUNE_RESULT_INIT;
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_prune(&pr, progcache_store_as_file(fs), &po)); /* no bound */
    po.older_than = 3 * 86400;                                      /* entries 3 and 4 */
    CHECK_OK(progcache_file_prune(&pr, progcache_store_as_file(fs), &po));
    CHECK(pr.removed == 2 && pr.entries == N - 2);
    CHECK(exists(dir, l.names[0]) && exists(dir, l.names[2]));
    CHECK(!exists(dir, l.names[3]) && !exists(dir, l.names[4]));

    /* By size: keep the most recently used that fit. */
    uint64_t size0, total;
    {
        progcache_buf buf = PROGCACHE_BUF_INIT;
        CHECK_OK(progcache_file_read_entry(&buf, progcache_store_as_file(fs), l.names[0]));
        size0 = buf.size;
        progcache_buf_free(&buf);
    }
    CHECK_OK(progcache_store_total_size(&total, fs));
    po.older_than = 0;
    po.max_size = size0 + 10; /* room for one entry: the newest */
    CHECK_OK(progcache_file_prune(&pr, progcache_store_as_file(fs), &po));
    CHECK(pr.removed == 2 && pr.entries == 1 && pr.total_size == size0);
    CHECK(pr.removed_bytes == total - size0);
    CHECK(exists(dir, l.names[0]) && !exists(dir, l.names[1]) && !exists(dir, l.names[2]));

    /* Nothing over the bound: nothing removed. */
    CHECK_OK(progcache_file_prune(&pr, progcache_store_as_file(fs), &po));
    CHECK(pr.removed == 0 && pr.entries == 1);
    CHECK_OK(progcache_file_prune(NULL, progcache_store_as_file(fs), &po));

    progcache_file_options ro = PROGCACHE_FILE_OPTIONS_INIT;
    ro.flags = PROGCACHE_FILE_READONLY;
    progcache_store *rofs;
    CHECK_OK(progcache_store_file_new(&rofs, dir, &ro));
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_prune(&pr, progcache_store_as_file(rofs), &po));
    progcache_store_free(rofs);
    CHECK_RC(PROGCACHE_EINVAL, progcache_file_prune(&pr, progcache_store_as_file(fs), NULL));
    progcache_store_free(fs);
    test_rmdtemp(dir);
}

int main(void)
{
    test_foreach();
    test_verify();
    test_prune();
    puts("test_store_file_admin: ok");
    return 0;
}
