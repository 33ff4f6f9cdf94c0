#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

void test_fail(const char *file, int line, const char *expr, const char *detail)
{
    fprintf(stderr, "%s:%d: CHECK failed: %s%s%s\n", file, line, expr, detail ? ": " : "",
            detail ? detail : "");
    const char *msg = progcache_error_last();
    if (msg && *msg)
        fprintf(stderr, "  last progcache error: %s\n", msg);
    fflush(stderr);
    abort();
}

char *test_mkdtemp(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *path = malloc(n);
    CHECK(path != NULL);
    snprintf(path, n, "%s/progcache-%s-XXXXXX", base, tag);
    CHECK(mkdtemp(path) != NULL);
    return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else {
        /* chmod follows symbolic links: a test's link to /dev/null must not
         * change /dev/null. */
        if (flag != FTW_SL && flag != FTW_SLN)
            chmod(path, 0700);
        unlink(path);
    }
    return 0;
}

void test_rmtree(const char *path)
{
    if (path)
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

progcache *test_cache_tmp(char **dir, const char *tag)
{
    progcache *cache = NULL;
    *dir = test_mkdtemp(tag);
    CHECK_OK(progcache_open(&cache, *dir, NULL));
    return cache;
}

void test_cache_done(progcache *cache, char *dir)
{
    progcache_close(cache);
    test_rmdtemp(dir);
}

size_t test_long_dir(char *out, size_t size, const char *base)
{
    CHECK(size >= 4096);
    size_t len = (size_t)snprintf(out, size, "%s", base);
    while (len < 3800) {
        out[len++] = '/';
        for (int i = 0; i < 180; i++)
            out[len++] = 'd';
        out[len] = '\0';
        CHECK(mkdir(out, 0700) == 0);
    }
    len += (size_t)snprintf(out + len, size - len, "/cache");
    CHECK(len > 3800 && len < 4000);
    return len;
}

void test_flip_byte(const char *path, long at, unsigned char mask)
{
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK(pread(fd, &c, 1, (off_t)at) == 1);
    c ^= mask;
    CHECK(pwrite(fd, &c, 1, (off_t)at) == 1);
    CHECK(close(fd) == 0);
}

void test_rmdtemp(char *path)
{
    test_rmtree(path);
    free(path);
}

long test_each_name(const char *dir, void (*fn)(const char *path, void *ctx), void *ctx)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (fn)
            fn(path, ctx);
        n++;
    }
    closedir(d);
    return n;
}

static void count_file(const char *path, void *ctx)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
        *(size_t *)ctx += test_count_names(path, 1);
    else
        ++*(size_t *)ctx;
}

size_t test_count_names(const char *dir, int recursive)
{
    if (!recursive) {
        long n = test_each_name(dir, NULL, NULL);
        return n < 0 ? 0 : (size_t)n;
    }
    size_t n = 0;
    test_each_name(dir, count_file, &n);
    return n;
}

const char *test_reference_dir(void)
{
    /* The data is in the repository (tests/data, the default of the CMake
     * cache variable); tests/key/test_key_vectors and test_tool_admin fail
     * without it, the tests that use it on the side skip that part. */
    const char *dir = getenv("PROGCACHE_REFERENCE_DIR");
    char probe[4096];
    struct stat st;
    if (!dir || !*dir)
        return NULL;
    snprintf(probe, sizeof probe, "%s/cuda-core-key-vectors.jsonl", dir);
    return stat(probe, &st) == 0 ? dir : NULL;
}

char *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *data = malloc(cap + 1);
    size_t n;
    while (data && (n = fread(data + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            char *bigger = realloc(data, cap + 1);
            if (!bigger) {
                free(data);
                data = NULL;
            }
            data = bigger;
        }
    }
    fclose(f);
    if (data) {
        data[len] = '\0';
        if (size)
            *size = len;
    }
    return data;
}

static int copy_file(const char *src, const char *dst)
{
    size_t n;
    char *data = test_read_file(src, &n);
    if (!data)
        return -1;
    FILE *f = fopen(dst, "wb");
    int rc = f && fwrite(data, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(data);
    return rc;
}

int test_copytree(const char *src, const char *dst)
{
    if (mkdir(dst, 0755) != 0 && errno != EEXIST)
        return -1;
    DIR *d = opendir(src);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char s[4096], t[4096];
        snprintf(s, sizeof s, "%s/%s", src, e->d_name);
        snprintf(t, sizeof t, "%s/%s", dst, e->d_name);
        struct stat st;
        if (lstat(s, &st) != 0)
            rc = -1;
        else if (S_ISDIR(st.st_mode))
            rc = test_copytree(s, t);
        else if (S_ISREG(st.st_mode))
            rc = copy_file(s, t);
    }
    closedir(d);
    return rc;
}
