/* Fixtures of the PCH tier's tests (test_pch.c, test_pch_guard.c): a small
 * header of the tests' own (a PCH of a few MB, made in a fraction of a
 * second), variants of a program that includes it, compiles with and
 * without the tier, the PCH directory's files. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "pch_fixtures.h"

char *work;
char hdr[512];
char hdr0[512];
const char *helper;
char opt_hdr0[600], opt_hdr[600];
const char *extra_option;

void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

void write_header(int factor)
{
    char path[600], text[256];
    snprintf(path, sizeof path, "%s/mylib.h", hdr);
    snprintf(text, sizeof text,
             "#pragma once\ntemplate <typename T> __device__ T mylib_scale(T x) { return x * "
             "T(%d); }\n",
             factor);
    write_text(path, text);
}

/* A variant of the program: the prefix (the header) is shared, the body
 * differs by v. */
char *source_of(int v)
{
    char *s = malloc(512);
    CHECK(s != NULL);
    snprintf(s, 512,
             "// a program of test_pch\n#include \"mylib.h\"\n\n"
             "extern \"C\" __global__ void k%d(float *x) { x[threadIdx.x] = "
             "mylib_scale(x[threadIdx.x]) + %d.0f; }\n",
             v, v);
    return s;
}


/* Compile source through cache (NO_LOAD; named "test_pch.cu"). */
compiled compile_source(progcache *cache, const char *source, const char **options,
                        size_t num_options, const char *digest, unsigned int flags,
                        progcache_target target, progcache_log_fn log, void *ctx)
{
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = source;
    p.nvrtc.target = target;
    p.nvrtc.options = options;
    p.nvrtc.num_options = num_options;
    p.nvrtc.name = "test_pch.cu";
    p.nvrtc.extra_digest = (const unsigned char *)digest;
    p.nvrtc.extra_digest_len = strlen(digest);
    p.flags = flags | PROGCACHE_PROGRAM_NO_LOAD;
    p.log = log;
    p.log_ctx = ctx;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    compiled c = {malloc(r.artifact.size), r.artifact.size, r.status};
    CHECK(c.bytes != NULL);
    memcpy(c.bytes, r.artifact.data, r.artifact.size);
    progcache_program_result_release(&r);
    return c;
}

/* Compile variant v through cache (NO_LOAD), with flags; digest names the
 * header's version (the program's key must change with the header, or
 * the entry cache answers). */
compiled compile_v(progcache *cache, int v, unsigned int flags, const char *digest,
                          progcache_target target, progcache_log_fn log, void *ctx)
{
    char *src = source_of(v);
    const char *options[4] = {opt_hdr0, opt_hdr,
                              target == PROGCACHE_TARGET_PTX ? "-arch=compute_90" : "-arch=sm_90",
                              extra_option};
    compiled c = compile_source(cache, src, options, extra_option ? 4 : 3, digest, flags, target,
                                log, ctx);
    free(src);
    return c;
}

/* The same program compiled without the tier, into a cache of its own. */
compiled plain_v(int v, const char *digest, progcache_target target)
{
    char *dir = test_mkdtemp("pchplain");
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    compiled c = compile_v(cache, v, PROGCACHE_PROGRAM_NO_PCH, digest, target, NULL, NULL);
    progcache_close(cache);
    test_rmtree(dir);
    free(dir);
    return c;
}

int same(const compiled *a, const compiled *b)
{
    return a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

progcache_stats stats_of(progcache *cache)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    return s;
}

progcache *open_cache(char **dir, const char *tag)
{
    *dir = test_mkdtemp(tag);
    progcache *cache;
    CHECK_OK(progcache_open(&cache, *dir, NULL));
    return cache;
}

void close_cache(progcache *cache, char *dir)
{
    progcache_close(cache);
    test_rmtree(dir);
    free(dir);
}

void note(void *ctx, int level, const char *message)
{
    logbook *b = ctx;
    (void)level;
    size_t n = strlen(b->text);
    snprintf(b->text + n, sizeof b->text - n, "%s\n", message);
}

/* The PCH files in the cache's PCH directory: their number and total size;
 * the path of the last one in path (if not NULL). */
int pch_files(const char *cache_dir, uint64_t *total, char *path, size_t len)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/progcache/pch-%u", cache_dir, (unsigned)geteuid());
    DIR *d = opendir(dir);
    int n = 0;
    *total = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 4, ".pch"))
            continue;
        char p[1000];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        CHECK(stat(p, &st) == 0);
        *total += (uint64_t)st.st_size;
        n++;
        if (path)
            snprintf(path, len, "%s", p);
    }
    closedir(d);
    return n;
}

/* Make a PCH in cache: the first compile of the prefix is seen, the second
 * makes the PCH (and its artifact), the third uses it. */
void warm(progcache *cache, int base, const char *digest)
{
    progcache_stats before = stats_of(cache);
    for (int i = 0; i < 3; i++) {
        compiled c = compile_v(cache, base + i, 0, digest, PROGCACHE_TARGET_CUBIN, NULL, NULL);
        CHECK(c.status == PROGCACHE_STATUS_MISS);
        free(c.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_created == before.pch_created + 1);
    CHECK(s.pch_hits == before.pch_hits + 1);
}

void compile_same(progcache *cache, int first, int n, logbook *book)
{
    for (int v = first; v < first + n; v++) {
        compiled c = compile_v(cache, v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, book);
        compiled p = plain_v(v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
}

progcache *open_warm(char **dir, const char *tag, int base, char *pch, size_t len)
{
    progcache *cache = open_cache(dir, tag);
    warm(cache, base, "h3");
    uint64_t total;
    CHECK(pch_files(*dir, &total, pch, len) == 1);
    return cache;
}

int pch_test_main(const char *name, void (*const *tests)(void), size_t n)
{
    if (!pch_fixtures_setup(name))
        return TEST_SKIP_CODE;
    for (size_t i = 0; i < n; i++)
        tests[i]();
    pch_fixtures_teardown();
    printf("%s: ok\n", name);
    return 0;
}

/* No helper, or one that fails: every compile succeeds as before, counted
 * and said once. */
void without_helper(const char *path, const char *said)
{
    setenv("PROGCACHE_PCH_HELPER", path, 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchnohelper");
    logbook book = {""};
    compile_same(cache, 100, 3, &book);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == 0 && s.pch_created == 0 && s.pch_fallbacks >= 1);
    CHECK(strstr(book.text, said) != NULL);
    /* Once per handle. */
    CHECK(strstr(strstr(book.text, said) + 1, said) == NULL);
    close_cache(cache, dir);
    setenv("PROGCACHE_PCH_HELPER", helper, 1);
}

void write_script(const char *path, const char *text)
{
    write_text(path, text);
    CHECK(chmod(path, 0700) == 0);
}

int pch_fixtures_setup(const char *test)
{
    helper = getenv("PROGCACHE_PCH_HELPER");
    if (!helper || access(helper, X_OK) != 0) {
        printf("%s: SKIPPED (no helper in $PROGCACHE_PCH_HELPER)\n", test);
        return 0;
    }
    setenv("PROGCACHE_PCH_MIN_MS", "0", 1);
    /* These tests follow one compile's creation step by step; the default,
     * a detached creation, has its own (test_pch_detach.c). */
    if (!getenv("PROGCACHE_PCH_CREATE"))
        setenv("PROGCACHE_PCH_CREATE", "inline", 1);
    unsetenv("PROGCACHE_PCH");
    unsetenv("PROGCACHE_PCH_MAX_SIZE");
    work = test_mkdtemp("pchwork");
    snprintf(hdr, sizeof hdr, "%s/hdr", work);
    snprintf(hdr0, sizeof hdr0, "%s/hdr0", work);
    CHECK(mkdir(hdr, 0700) == 0 && mkdir(hdr0, 0700) == 0);
    snprintf(opt_hdr0, sizeof opt_hdr0, "-I%s", hdr0);
    snprintf(opt_hdr, sizeof opt_hdr, "-I%s", hdr);
    write_header(3);
    return 1;
}

void pch_fixtures_teardown(void)
{
    test_rmtree(work);
    free(work);
}
