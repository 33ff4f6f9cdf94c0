/* The PCH tier (src/pch/pch_*.c, docs/CUDA.md "Precompiled headers"):
 * artifacts with and without a PCH are the same bytes; a header edit gives
 * a new PCH, never the old program; a damaged or truncated PCH is a PCH
 * miss, never a failed or wrong compile; the budget holds; no helper, or
 * a helper that fails, falls back to compiling as before; the in-process
 * tier; PROGCACHE_PROGRAM_NO_PCH; name expressions. The guards (rules 2
 * and 3, read-only caches, the off switches) are in test_pch_guard.c.
 *
 * The prefix is a small header of the test's own (a PCH of a few MB, made
 * in a fraction of a second), with PROGCACHE_PCH_MIN_MS=0 so that it is a
 * candidate; the helper is the build's ($PROGCACHE_PCH_HELPER); the
 * fixtures are in pch_fixtures.c. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "pch/pch_tier.h"
#include "pch_fixtures.h"
#include "progcache/admin.h"
#include "progcache/cuda.h"
#include "progcache/file.h"

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
    CHECK(progcache__pch_digest(fd, m.pch_size, m.pch_sha) == 0);
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
    char *dir, pch[1000];
    progcache *cache = open_warm(&dir, tag, 20, pch, sizeof pch);
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
    char *dir, pch[1000];
    progcache *cache = open_warm(&dir, "pchscribble", 40, pch, sizeof pch);
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
    compile_same(cache, 110, 4, &book);
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

PCH_TEST_MAIN("test_pch", test_identity, test_invalidation, test_corruption, test_scribbled,
              test_eviction, test_missing_helper, test_inprocess, test_flag,
              test_name_expressions)
