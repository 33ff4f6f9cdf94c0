/* The PCH tier (src/cuda/pch_*.c, docs/CUDA.md "Precompiled headers"):
 * artifacts with and without a PCH are the same bytes; a header edit gives
 * a new PCH, never the old program; a damaged or truncated PCH is a PCH
 * miss, never a failed or wrong compile; the budget holds; no helper, or
 * a helper that fails, falls back to compiling as before; the in-process
 * tier; PROGCACHE_PROGRAM_NO_PCH.
 *
 * The prefix is a small header of the test's own (a PCH of a few MB, made
 * in a fraction of a second), with PROGCACHE_PCH_MIN_MS=0 so that it is a
 * candidate; the helper is the build's ($PROGCACHE_PCH_HELPER). */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cuda/pch_tier.h"
#include "progcache/admin.h"
#include "progcache/cuda.h"
#include "progcache/file.h"

static char *work;     /* the test's folder: headers and caches */
static char hdr[512];  /* <work>/hdr: the include path */
static char hdr0[512]; /* <work>/hdr0: searched first, empty */
static const char *helper;

/* ---- fixtures -------------------------------------------------------------- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

static void write_header(int factor)
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
static char *source_of(int v)
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

typedef struct compiled {
    unsigned char *bytes;
    size_t size;
    int status;
} compiled;

static char opt_hdr0[600], opt_hdr[600];
static const char *extra_option; /* one more option, or NULL */

/* Compile variant v through cache (NO_LOAD), with flags; digest names the
 * header's version (the program's key must change with the header, or
 * the entry cache answers). */
static compiled compile_v(progcache *cache, int v, unsigned int flags, const char *digest,
                          progcache_target target, progcache_log_fn log, void *ctx)
{
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    char *src = source_of(v);
    p.nvrtc.source = src;
    p.nvrtc.target = target;
    const char *options[4] = {opt_hdr0, opt_hdr,
                              target == PROGCACHE_TARGET_PTX ? "-arch=compute_90" : "-arch=sm_90",
                              extra_option};
    p.nvrtc.options = options;
    p.nvrtc.num_options = extra_option ? 4 : 3;
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
    free(src);
    return c;
}

/* The same program compiled without the tier, into a cache of its own. */
static compiled plain_v(int v, const char *digest, progcache_target target)
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

static int same(const compiled *a, const compiled *b)
{
    return a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

static progcache_stats stats_of(progcache *cache)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    return s;
}

static progcache *open_cache(char **dir, const char *tag)
{
    *dir = test_mkdtemp(tag);
    progcache *cache;
    CHECK_OK(progcache_open(&cache, *dir, NULL));
    return cache;
}

static void close_cache(progcache *cache, char *dir)
{
    progcache_close(cache);
    test_rmtree(dir);
    free(dir);
}

/* The messages a compile logged. */
typedef struct logbook {
    char text[8192];
} logbook;

static void note(void *ctx, int level, const char *message)
{
    logbook *b = ctx;
    (void)level;
    size_t n = strlen(b->text);
    snprintf(b->text + n, sizeof b->text - n, "%s\n", message);
}

/* The PCH files in the cache's PCH directory: their number and total size;
 * the path of the last one in path (if not NULL). */
static int pch_files(const char *cache_dir, uint64_t *total, char *path, size_t len)
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
static void warm(progcache *cache, int base, const char *digest)
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

/* ---- the tests -------------------------------------------------------------------- */

/* With and without a PCH: the same bytes, CUBIN and PTX; the PCH is made
 * on the second sight of its prefix and used on the third. */
static void test_identity(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchid");
    for (int v = 0; v < 4; v++) {
        compiled with = compile_v(cache, v, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
        compiled without = plain_v(v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(with.size > 0 && same(&with, &without));
        free(with.bytes);
        free(without.bytes);
        progcache_stats s = stats_of(cache);
        CHECK(s.pch_created == (v >= 1));
        CHECK(s.pch_hits == (uint64_t)(v >= 2 ? v - 1 : 0));
        CHECK(s.pch_misses == (uint64_t)(v >= 1 ? 2 : 1));
        CHECK(s.pch_rejected == 0 && s.pch_fallbacks == 0);
    }
    uint64_t total;
    CHECK(pch_files(dir, &total, NULL, 0) == 1 && total > 0);
    /* PTX: another key (the target is in it), the same bytes. */
    for (int v = 10; v < 13; v++) {
        compiled with = compile_v(cache, v, 0, "h3", PROGCACHE_TARGET_PTX, NULL, NULL);
        compiled without = plain_v(v, "h3", PROGCACHE_TARGET_PTX);
        CHECK(with.size > 0 && same(&with, &without));
        free(with.bytes);
        free(without.bytes);
    }
    CHECK(stats_of(cache).pch_created == 2 && stats_of(cache).pch_hits == 3);
    close_cache(cache, dir);
}

/* A header edit gives a new PCH and the new program, never the old one;
 * a new header that would shadow one makes the PCH stale too; a touch
 * that changes nothing keeps it. */
static void test_invalidation(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchinval");
    write_header(3);
    warm(cache, 0, "h3");
    compiled old3 = compile_v(cache, 5, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);

    /* Same size, new bytes. */
    write_header(5);
    progcache_stats before = stats_of(cache);
    compiled new5 = compile_v(cache, 5, 0, "h5", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain5 = plain_v(5, "h5", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&new5, &plain5) && !same(&new5, &old3));
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_rejected == before.pch_rejected + 1);
    CHECK(s.pch_created == before.pch_created + 1); /* made again at once: the prefix is known */
    uint64_t total;
    CHECK(pch_files(dir, &total, NULL, 0) == 1);

    /* The new PCH serves the next variant. */
    compiled next = compile_v(cache, 6, 0, "h5", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain6 = plain_v(6, "h5", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&next, &plain6));
    CHECK(stats_of(cache).pch_hits == s.pch_hits + 1);

    /* touch: a new stat, the same bytes: still used (hashed again once). */
    char path[600];
    snprintf(path, sizeof path, "%s/mylib.h", hdr);
    CHECK(utimensat(AT_FDCWD, path, NULL, 0) == 0);
    before = stats_of(cache);
    compiled touched = compile_v(cache, 7, 0, "h5", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    s = stats_of(cache);
    CHECK(s.pch_hits == before.pch_hits + 1 && s.pch_rejected == before.pch_rejected);

    /* A header appears where NVRTC looked first and found nothing. */
    snprintf(path, sizeof path, "%s/mylib.h", hdr0);
    write_text(path, "#pragma once\ntemplate <typename T> __device__ T mylib_scale(T x) "
                     "{ return x * T(7); }\n");
    before = stats_of(cache);
    compiled shadowed = compile_v(cache, 8, 0, "h7", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain8 = plain_v(8, "h7", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&shadowed, &plain8));
    CHECK(stats_of(cache).pch_rejected == before.pch_rejected + 1);
    CHECK(unlink(path) == 0);

    free(old3.bytes);
    free(new5.bytes);
    free(plain5.bytes);
    free(next.bytes);
    free(plain6.bytes);
    free(touched.bytes);
    free(shadowed.bytes);
    free(plain8.bytes);
    close_cache(cache, dir);
    write_header(3);
}

static void flip(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK(pread(fd, &c, 1, at) == 1);
    c ^= 0x5a;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
}

/* Rewrite the manifest of the PCH at pch_path so that its size and
 * checksum match the file as it is now (damage the tier's own check
 * cannot see, which NVRTC itself then meets). */
static void bless(const char *pch_path)
{
    char manifest[1000];
    snprintf(manifest, sizeof manifest, "%s", pch_path);
    char *dash = strrchr(manifest, '-');
    CHECK(dash != NULL);
    strcpy(dash, ".manifest");
    size_t len;
    char *text = test_read_file(manifest, &len);
    CHECK(text != NULL);
    pch_manifest m;
    CHECK_OK(progcache__pch_manifest_parse(&m, text, len));
    int fd = open(pch_path, O_RDONLY);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    m.pch_size = (uint64_t)st.st_size;
    CHECK(progcache__pch_checksum(fd, m.pch_size, &m.pch_sum) == 0);
    close(fd);
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache__pch_manifest_format(&out, &m));
    FILE *f = fopen(manifest, "w");
    CHECK(f && fwrite(out.data, 1, out.size, f) == out.size && fclose(f) == 0);
    progcache_buf_free(&out);
    progcache__pch_manifest_free(&m);
    free(text);
}

/* One kind of damage: the next compile is a PCH miss, the compile itself
 * succeeds with the right bytes, and the PCH is gone. */
static void damaged(const char *tag, void (*harm)(const char *pch_path))
{
    char *dir;
    progcache *cache = open_cache(&dir, tag);
    warm(cache, 20, "h3");
    char pch[1000];
    uint64_t total;
    CHECK(pch_files(dir, &total, pch, sizeof pch) == 1);
    harm(pch);
    progcache_stats before = stats_of(cache);
    logbook book = {""};
    compiled c = compile_v(cache, 30, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
    compiled p = plain_v(30, "h3", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&c, &p));
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_rejected == before.pch_rejected + 1);
    CHECK(s.pch_hits == before.pch_hits);
    CHECK(strstr(book.text, "PCH") != NULL);
    free(c.bytes);
    free(p.bytes);
    close_cache(cache, dir);
}

static void harm_flip(const char *pch)
{
    struct stat st;
    CHECK(stat(pch, &st) == 0);
    flip(pch, st.st_size / 2);
}

static void harm_truncate(const char *pch)
{
    struct stat st;
    CHECK(stat(pch, &st) == 0);
    CHECK(truncate(pch, st.st_size / 2) == 0);
}

static void harm_manifest(const char *pch)
{
    char manifest[1000];
    snprintf(manifest, sizeof manifest, "%s", pch);
    strcpy(strrchr(manifest, '-'), ".manifest");
    flip(manifest, 40);
}

/* Truncated, with a manifest that agrees: NVRTC meets the damage (it dies
 * of SIGBUS on a truncated PCH) in the helper, not in this process. */
static void harm_truncate_blessed(const char *pch)
{
    harm_truncate(pch);
    bless(pch);
}

/* Bytes in the middle replaced, with a manifest that agrees. */
static void harm_scribble_blessed(const char *pch)
{
    struct stat st;
    CHECK(stat(pch, &st) == 0);
    int fd = open(pch, O_RDWR);
    CHECK(fd >= 0);
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 131 + 7);
    CHECK(pwrite(fd, junk, sizeof junk, st.st_size / 10 * 3) == (ssize_t)sizeof junk);
    close(fd);
    bless(pch);
}

static void test_corruption(void)
{
    damaged("pchflip", harm_flip);
    damaged("pchtrunc", harm_truncate);
    damaged("pchmanifest", harm_manifest);
    damaged("pchtruncb", harm_truncate_blessed);
}

/* Scribbled bytes that the checksum is told to accept: NVRTC may die, say
 * the PCH is invalid, or use it; the compile must succeed either way. */
static void test_scribbled(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchscribble");
    warm(cache, 40, "h3");
    char pch[1000];
    uint64_t total;
    CHECK(pch_files(dir, &total, pch, sizeof pch) == 1);
    harm_scribble_blessed(pch);
    compiled c = compile_v(cache, 50, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    CHECK(c.size > 0);
    free(c.bytes);
    close_cache(cache, dir);
}

/* The budget: PROGCACHE_PCH_MAX_SIZE holds after every creation, the least
 * recently used PCH goes first, and a PCH larger than the budget is not
 * kept. */
static void test_eviction(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchsize");
    warm(cache, 60, "h3");
    uint64_t one;
    CHECK(pch_files(dir, &one, NULL, 0) == 1);
    progcache_close(cache);

    /* Room for two. Prefixes that differ by an option: another key each. */
    char budget[32];
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)(one * 5 / 2));
    setenv("PROGCACHE_PCH_MAX_SIZE", budget, 1);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    static const char *defines[] = {"-DVARIANT_A", "-DVARIANT_B", "-DVARIANT_C"};
    for (int d = 0; d < 3; d++) {
        extra_option = defines[d];
        for (int i = 0; i < 2; i++) {
            compiled c = compile_v(cache, 70 + 10 * d + i, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL,
                                   NULL);
            free(c.bytes);
        }
        uint64_t total;
        CHECK(pch_files(dir, &total, NULL, 0) == 2);
        CHECK(total <= one * 5 / 2);
    }
    extra_option = NULL;
    CHECK(stats_of(cache).pch_created == 4);
    progcache_close(cache);

    /* Less than one PCH: none is kept, every compile still succeeds. */
    snprintf(budget, sizeof budget, "%llu", (unsigned long long)(one / 2));
    setenv("PROGCACHE_PCH_MAX_SIZE", budget, 1);
    char *dir2;
    cache = open_cache(&dir2, "pchsmall");
    logbook book = {""};
    for (int i = 0; i < 3; i++) {
        compiled c = compile_v(cache, 90 + i, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        CHECK(c.size > 0);
        free(c.bytes);
    }
    uint64_t total;
    CHECK(pch_files(dir2, &total, NULL, 0) == 0);
    CHECK(stats_of(cache).pch_created == 0);
    CHECK(strstr(book.text, "over the PCH budget") != NULL);
    close_cache(cache, dir2);
    unsetenv("PROGCACHE_PCH_MAX_SIZE");
    test_rmtree(dir);
    free(dir);
}

/* No helper, or one that fails: every compile succeeds as before, counted
 * and said once. */
static void without_helper(const char *path, const char *said)
{
    setenv("PROGCACHE_PCH_HELPER", path, 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchnohelper");
    logbook book = {""};
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, 100 + v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        compiled p = plain_v(100 + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_hits == 0 && s.pch_created == 0 && s.pch_fallbacks >= 1);
    CHECK(strstr(book.text, said) != NULL);
    /* Once per handle. */
    CHECK(strstr(strstr(book.text, said) + 1, said) == NULL);
    close_cache(cache, dir);
    setenv("PROGCACHE_PCH_HELPER", helper, 1);
}

static void test_missing_helper(void)
{
    without_helper("/nonexistent/progcache-nvrtc-helper", "cannot be used");
    /* Runs, answers nothing, exits 1. */
    without_helper("/bin/false", "the PCH helper failed");
}

/* PROGCACHE_PCH=inprocess: the PCHs of one process, the same bytes, and a
 * header edit seen there too. */
static void test_inprocess(void)
{
    setenv("PROGCACHE_PCH", "inprocess", 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchinproc");
    logbook book = {""};
    for (int v = 0; v < 4; v++) {
        compiled with = compile_v(cache, 110 + v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        compiled without = plain_v(110 + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&with, &without));
        free(with.bytes);
        free(without.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_created == 1 && s.pch_hits == 2);
    uint64_t total;
    CHECK(pch_files(dir, &total, NULL, 0) == 0); /* none shared */
    write_header(5);
    compiled edited = compile_v(cache, 120, 0, "h5", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    compiled plain = plain_v(120, "h5", PROGCACHE_TARGET_CUBIN);
    CHECK(same(&edited, &plain));
    CHECK(stats_of(cache).pch_rejected == 1);
    free(edited.bytes);
    free(plain.bytes);
    write_header(3);
    close_cache(cache, dir);
    unsetenv("PROGCACHE_PCH");
}

/* PROGCACHE_PROGRAM_NO_PCH: the tier stays out entirely. */
static void test_flag(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchflag");
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, 130 + v, PROGCACHE_PROGRAM_NO_PCH, "h3",
                               PROGCACHE_TARGET_CUBIN, NULL, NULL);
        free(c.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_misses == 0 && s.pch_created == 0 && s.pch_hits == 0);
    close_cache(cache, dir);
}

/* Name expressions: the lowered names come back from a compile with a PCH
 * (made in the helper, or used there) as from one without. */
static void test_name_expressions(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchnames");
    const char *options[] = {opt_hdr0, opt_hdr, "-arch=sm_90"};
    for (int v = 0; v < 3; v++) {
        char src[512], expr[64];
        snprintf(src, sizeof src,
                 "#include \"mylib.h\"\n\ntemplate <typename T> __global__ void tk%d(T *x) "
                 "{ x[threadIdx.x] = mylib_scale(x[threadIdx.x]); }\n",
                 v);
        snprintf(expr, sizeof expr, "tk%d<float>", v);
        const char *exprs[] = {expr};
        const char *lowered[2] = {NULL, NULL};
        for (int with = 0; with < 2; with++) {
            char *plain_dir = NULL;
            progcache *c = cache;
            if (!with) {
                plain_dir = test_mkdtemp("pchnamesplain");
                CHECK_OK(progcache_open(&c, plain_dir, NULL));
            }
            progcache_program p = PROGCACHE_PROGRAM_INIT;
            p.nvrtc.source = src;
            p.nvrtc.options = options;
            p.nvrtc.num_options = 3;
            p.nvrtc.name = "test_pch.cu";
            p.nvrtc.name_expressions = exprs;
            p.nvrtc.num_name_expressions = 1;
            p.nvrtc.extra_digest = (const unsigned char *)"h3";
            p.nvrtc.extra_digest_len = 2;
            p.flags = PROGCACHE_PROGRAM_NO_LOAD | (with ? 0 : PROGCACHE_PROGRAM_NO_PCH);
            progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
            CHECK_OK(progcache_compile_or_load(&r, c, &p));
            CHECK(r.status == PROGCACHE_STATUS_MISS && r.num_names == 1 && r.lowered_names[0]);
            lowered[with] = strdup(r.lowered_names[0]);
            progcache_program_result_release(&r);
            if (!with)
                close_cache(c, plain_dir);
        }
        CHECK(lowered[0] && lowered[1] && !strcmp(lowered[0], lowered[1]));
        free((void *)lowered[0]);
        free((void *)lowered[1]);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_created == 1 && s.pch_hits == 1);
    close_cache(cache, dir);
}

/* A cache opened read-only gets nothing written, PCHs included: the tier
 * stays out (it would make, touch and remove PCHs there). */
static void test_read_only(void)
{
    char *dir;
    progcache *cache = open_cache(&dir, "pchro");
    progcache_close(cache);
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_open(&cache, dir, &o));
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, 190 + v, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
        compiled p = plain_v(190 + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(lstat(path, &st) != 0);
    CHECK(stats_of(cache).pch_misses == 0);
    close_cache(cache, dir);
}

/* The off switches: PROGCACHE_PCH=0 (or off) and NVRTC_DISABLE_PCH keep
 * the tier out entirely (no PCH directory made, nothing counted); a setting
 * that cannot be used turns the tier off and says so, once per handle. The
 * compiles are the same either way. */
static void off_with(const char *var, const char *value, const char *said)
{
    setenv(var, value, 1);
    char *dir;
    progcache *cache = open_cache(&dir, "pchoff");
    logbook book = {""};
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, 140 + v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        compiled p = plain_v(140 + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_misses == 0 && s.pch_hits == 0 && s.pch_created == 0 && s.pch_fallbacks == 0);
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(lstat(path, &st) != 0);
    if (said) {
        const char *at = strstr(book.text, said);
        CHECK(at != NULL && strstr(at + 1, said) == NULL);
    }
    close_cache(cache, dir);
    unsetenv(var);
}

static void test_off(void)
{
    off_with("PROGCACHE_PCH", "0", NULL);
    off_with("PROGCACHE_PCH", "off", NULL);
    off_with("NVRTC_DISABLE_PCH", "1", "NVRTC_DISABLE_PCH is set");
    off_with("PROGCACHE_PCH", "maybe", "PROGCACHE_PCH=maybe cannot be used");
    off_with("PROGCACHE_PCH_MAX_SIZE", "lots", "PROGCACHE_PCH_MAX_SIZE=lots cannot be used");
    off_with("PROGCACHE_PCH_MIN_MS", "-1", "PROGCACHE_PCH_MIN_MS=-1 cannot be used");
}

static void write_script(const char *path, const char *text)
{
    write_text(path, text);
    CHECK(chmod(path, 0700) == 0);
}

/* Rule 3: a helper that is killed, one that hangs, and ones that close
 * their socket and then hang cannot hold or fail the caller: the helper is
 * killed at the deadline and reaped, the compile runs here with the same
 * bytes, counted and said once. (The deadline is shortened from ten
 * minutes for the test; nothing here asserts a time.) */
static void test_helper_hangs_or_dies(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/die.sh", work);
    write_script(path, "#!/bin/sh\nkill -KILL $$\n");
    without_helper(path, "died of signal 9");
    unsigned int saved = progcache__pch_helper_timeout_ms;
    progcache__pch_helper_timeout_ms = 1000;
    snprintf(path, sizeof path, "%s/hang.sh", work);
    write_script(path, "#!/bin/sh\nexec /bin/sleep 600\n");
    without_helper(path, "did not finish within 1000 ms");
    /* Reads the request, closes its socket, stays: not waited for past
     * the deadline. */
    snprintf(path, sizeof path, "%s/mute.sh", work);
    write_script(path, "#!/bin/sh\n/bin/cat >/dev/null\nexec 0<&- 1>&-\nexec /bin/sleep 600\n");
    without_helper(path, "did not finish within 1000 ms");
    /* Closes its socket unread and stays: killed a second later. */
    snprintf(path, sizeof path, "%s/rude.sh", work);
    write_script(path, "#!/bin/sh\nexec 0<&- 1>&-\nexec /bin/sleep 600\n");
    without_helper(path, "gave no usable answer");
    progcache__pch_helper_timeout_ms = saved;
}

static int count_names(const char *path)
{
    DIR *d = opendir(path);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* Compiles of three variants through a cache whose PCH directory is not
 * this user's private one: all succeed, the tier is off and says why. */
static void compile_refused(progcache *cache, int base)
{
    logbook book = {""};
    for (int v = 0; v < 3; v++) {
        compiled c = compile_v(cache, base + v, 0, "h3", PROGCACHE_TARGET_CUBIN, note, &book);
        compiled p = plain_v(base + v, "h3", PROGCACHE_TARGET_CUBIN);
        CHECK(same(&c, &p));
        free(c.bytes);
        free(p.bytes);
    }
    CHECK(strstr(book.text, "the PCH tier is off for this cache") != NULL);
    progcache_stats s = stats_of(cache);
    CHECK(s.pch_created == 0 && s.pch_hits == 0);
}

static int on_foreign(void *ctx, const char *path, const char *what)
{
    (void)what;
    fprintf(stderr, "test_pch: foreign %s\n", path);
    ++*(int *)ctx;
    return 0;
}

/* Rule 2: the cache touches only what it made. A pch-<uid> directory that
 * others may enter, or a symbolic link in its place, turns the tier off
 * for that cache and is left exactly as it was (nothing created through
 * the link). In the tier's own directory, names it does not make survive
 * its sweeps, however old. The file store's verify does not call the PCH
 * directory foreign, and clearing the entries leaves the PCHs alone. */
static void test_foreign(void)
{
    char pdir[700];
    /* Others may enter it. */
    char *dir = test_mkdtemp("pchforeign");
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    snprintf(pdir, sizeof pdir, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(mkdir(pdir, 0700) == 0 && chmod(pdir, 0755) == 0);
    compile_refused(cache, 150);
    struct stat st;
    CHECK(lstat(pdir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755);
    CHECK(count_names(pdir) == 0);
    close_cache(cache, dir);

    /* A symbolic link to a directory elsewhere. */
    char elsewhere[600];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", work);
    CHECK(mkdir(elsewhere, 0700) == 0);
    dir = test_mkdtemp("pchlink");
    CHECK_OK(progcache_open(&cache, dir, NULL));
    snprintf(pdir, sizeof pdir, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    CHECK(symlink(elsewhere, pdir) == 0);
    compile_refused(cache, 160);
    CHECK(lstat(pdir, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(count_names(elsewhere) == 0);
    close_cache(cache, dir);
    CHECK(rmdir(elsewhere) == 0);

    /* Names the tier does not make, in its own directory, two days old. */
    cache = open_cache(&dir, "pchnames2");
    warm(cache, 170, "h3");
    progcache_close(cache);
    snprintf(pdir, sizeof pdir, "%s/progcache/pch-%u", dir, (unsigned)geteuid());
    static const char *const strangers[] = {"notes.txt", "mine.pch", "tmp-x", "proc-zz",
                                            "nopin", "0123.seen"};
    struct timespec old[2] = {{time(NULL) - 2 * 86400, 0}, {time(NULL) - 2 * 86400, 0}};
    for (size_t i = 0; i < sizeof strangers / sizeof *strangers; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", pdir, strangers[i]);
        write_text(path, "not progcache's\n");
        CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
    }
    int before = count_names(pdir);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    compiled c = compile_v(cache, 180, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    free(c.bytes);
    CHECK(stats_of(cache).pch_hits == 2); /* warm's one, and this one */
    CHECK(count_names(pdir) == before);
    for (size_t i = 0; i < sizeof strangers / sizeof *strangers; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", pdir, strangers[i]);
        CHECK(access(path, F_OK) == 0);
    }

    /* The file store: verify finds nothing foreign, clear keeps the PCHs. */
    CHECK_OK(progcache_clear(cache));
    uint64_t total;
    CHECK(pch_files(dir, &total, NULL, 0) == 2); /* ours and mine.pch */
    progcache_file *file;
    CHECK_OK(progcache_file_open(&file, dir, NULL));
    int foreign = 0;
    progcache_verify_options vo = PROGCACHE_VERIFY_OPTIONS_INIT;
    vo.on_foreign = on_foreign;
    vo.ctx = &foreign;
    progcache_verify_result vr = PROGCACHE_VERIFY_RESULT_INIT;
    CHECK_OK(progcache_file_verify(&vr, file, &vo));
    CHECK(vr.foreign == 0 && foreign == 0);
    progcache_file_close(file);
    c = compile_v(cache, 181, 0, "h3", PROGCACHE_TARGET_CUBIN, NULL, NULL);
    free(c.bytes);
    CHECK(stats_of(cache).pch_hits == 3);
    close_cache(cache, dir);
}

int main(void)
{
    helper = getenv("PROGCACHE_PCH_HELPER");
    if (!helper || access(helper, X_OK) != 0) {
        puts("test_pch: SKIPPED (no helper in $PROGCACHE_PCH_HELPER)");
        return TEST_SKIP_CODE;
    }
    setenv("PROGCACHE_PCH_MIN_MS", "0", 1);
    unsetenv("PROGCACHE_PCH");
    unsetenv("PROGCACHE_PCH_MAX_SIZE");
    work = test_mkdtemp("pchwork");
    snprintf(hdr, sizeof hdr, "%s/hdr", work);
    snprintf(hdr0, sizeof hdr0, "%s/hdr0", work);
    CHECK(mkdir(hdr, 0700) == 0 && mkdir(hdr0, 0700) == 0);
    snprintf(opt_hdr0, sizeof opt_hdr0, "-I%s", hdr0);
    snprintf(opt_hdr, sizeof opt_hdr, "-I%s", hdr);
    write_header(3);

    test_identity();
    test_invalidation();
    test_corruption();
    test_scribbled();
    test_eviction();
    test_missing_helper();
    test_inprocess();
    test_flag();
    test_name_expressions();
    test_helper_hangs_or_dies();
    test_foreign();
    test_read_only();
    test_off(); /* last: NVRTC_DISABLE_PCH was set */
    test_rmtree(work);
    free(work);
    puts("test_pch: ok");
    return 0;
}
