/* Name expressions through compile-or-load (docs/CUDA.md, "Name
 * expressions"), without a GPU (PROGCACHE_PROGRAM_NO_LOAD), and with the
 * fake driver when PROGCACHE_FAKE_CUDA names it (argument "fake"):
 *  - a templated kernel's lowered name on a MISS is NVRTC's, is stored as
 *    the entry's record, and comes back on a HIT without a compile: in the
 *    same process, through a memory tier over the directory, and in a
 *    second process;
 *  - ls-style access to the record (progcache_lowered_names_next), and
 *    the record through progcache export and import;
 *  - an entry without the record, written through the plain store API as
 *    cuda.core writes it: compiled once to learn the names (counted in the
 *    statistics), stored with them, then a HIT without a compile;
 *  - an extern "C" kernel is found from the artifact's own kernels, no
 *    compile; an entry of other bytes is replaced, not trusted;
 *  - results of versions 1 and 2 still work and are written no further;
 *  - with the fake driver: the kernel (and function) of each name. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cuda_fixtures.h"
#include "driver.h"
#include "progcache/admin.h"

static const char templated[] =
    "template <int N, class T> __global__ void fill(T *a) { a[threadIdx.x] = T(N); }\n"
    "extern \"C\" __global__ void plain(int *a) { a[0] = 1; }\n";
static const char *const exprs[] = {"fill<3, int>", "fill<4, float>"};
static const char *const arch[] = {"-arch=sm_90"};

static progcache_program program(const char *source, const char *const *names, size_t n,
                                 unsigned flags)
{
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = source;
    p.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    p.nvrtc.options = arch;
    p.nvrtc.num_options = 1;
    p.nvrtc.name_expressions = names;
    p.nvrtc.num_name_expressions = n;
    p.flags = flags;
    return p;
}

/* The lowered names NVRTC gives, straight from a compile. */
static void nvrtc_names(const progcache_program *p, progcache_buf *names)
{
    progcache_buf art = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_compile(&art, NULL, names, &p->nvrtc));
    progcache_buf_free(&art);
}

static void check_names(const progcache_program_result *r, const progcache_buf *want, size_t n)
{
    CHECK(r->num_names == n && r->lowered_names && r->kernels && r->functions);
    for (size_t i = 0; i < n; i++) {
        CHECK(!strcmp(r->lowered_names[i], progcache_names_at(want, i)));
        CHECK(r->kernels[i] == NULL && r->functions[i] == NULL); /* NO_LOAD */
    }
}

static uint64_t learned(progcache *cache)
{
    progcache_stats s = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_stats_get(&s, cache));
    return s.names_learned;
}

static void test_record_round_trip(const char *dir)
{
    progcache *cache = NULL;
    progcache_options o = PROGCACHE_OPTIONS_INIT;
    o.memory_size = 1 << 20;
    CHECK_OK(progcache_open(&cache, dir, &o));
    progcache_program p = program(templated, exprs, 2, PROGCACHE_PROGRAM_NO_LOAD);
    progcache_buf want = PROGCACHE_BUF_INIT;
    nvrtc_names(&p, &want);
    CHECK(!strcmp(progcache_names_at(&want, 0), "_Z4fillILi3EiEvPT0_"));

    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && !r.names_learned);
    check_names(&r, &want, 2);
    progcache_program_result_release(&r);
    CHECK(r.num_names == 0 && r.lowered_names == NULL && r.names_memory.data == NULL);

    /* A hit from the memory tier, then from the directory alone. */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.compile_ms == 0 && !r.names_learned);
    check_names(&r, &want, 2);
    progcache_program_result_release(&r);
    progcache_close(cache);
    CHECK_OK(progcache_open(&cache, dir, NULL));
    /* Another order of the same expressions: the same key, names in the
     * caller's order. */
    const char *swapped[] = {exprs[1], exprs[0]};
    progcache_program q = program(templated, swapped, 2, PROGCACHE_PROGRAM_NO_LOAD);
    CHECK_OK(progcache_compile_or_load(&r, cache, &q));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.compile_ms == 0);
    CHECK(!strcmp(r.lowered_names[0], progcache_names_at(&want, 1)) &&
          !strcmp(r.lowered_names[1], progcache_names_at(&want, 0)));
    progcache_program_result_release(&r);
    progcache_close(cache);

    /* A second process: a hit with the names and no compile. */
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        progcache *c = NULL;
        progcache_program_result cr = PROGCACHE_PROGRAM_RESULT_INIT;
        int ok = progcache_open(&c, dir, NULL) == PROGCACHE_OK &&
                 progcache_compile_or_load(&cr, c, &p) == PROGCACHE_OK &&
                 cr.status == PROGCACHE_STATUS_HIT && cr.compile_ms == 0 && cr.num_names == 2 &&
                 !strcmp(cr.lowered_names[0], progcache_names_at(&want, 0)) &&
                 !strcmp(cr.lowered_names[1], progcache_names_at(&want, 1));
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* The record, as `progcache ls` reads it. */
    progcache_file *file = NULL;
    CHECK_OK(progcache_file_open(&file, dir, NULL));
    progcache_entry_meta meta = PROGCACHE_ENTRY_META_INIT;
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    progcache_program_result kr = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&kr, NULL, &p)); /* the key, DISABLED */
    CHECK_OK(progcache_store_get_meta(&bytes, &meta, progcache_file_store(file), kr.key, 32));
    const unsigned char *rec;
    size_t len, pos = 0;
    const char *e, *l;
    CHECK_OK(progcache_entry_meta_find(&rec, &len, &meta, PROGCACHE_RECORD_LOWERED_NAMES));
    CHECK(progcache_lowered_names_next(rec, len, &pos, &e, &l) == 1);
    CHECK(!strcmp(e, "s:fill<3, int>") && !strcmp(l, progcache_names_at(&want, 0)));
    CHECK(progcache_lowered_names_next(rec, len, &pos, &e, &l) == 1);
    CHECK(!strcmp(e, "s:fill<4, float>") && !strcmp(l, progcache_names_at(&want, 1)));
    CHECK(progcache_lowered_names_next(rec, len, &pos, &e, &l) == 0);
    /* A record cut anywhere is not well formed, never read past its end. */
    for (size_t cut = 1; cut < len; cut++) {
        size_t p2 = 0;
        int r2;
        while ((r2 = progcache_lowered_names_next(rec, cut, &p2, &e, &l)) == 1)
            ;
        CHECK(r2 == PROGCACHE_ECORRUPT || (r2 == 0 && p2 == cut));
    }
    progcache_program_result_release(&kr);
    progcache_entry_meta_release(&meta);
    progcache_buf_free(&bytes);

    /* Through an archive: export carries the records as a pax extended
     * attribute, import puts them back, sealed with the entry; the hit in
     * the new directory needs no compile. */
    char archive[4200], other[4200];
    snprintf(archive, sizeof archive, "%s.tar", dir);
    snprintf(other, sizeof other, "%s-imported", dir);
    CHECK_OK(progcache_file_export(NULL, file, archive, NULL));
    progcache_file_close(file);
    CHECK_OK(progcache_file_open(&file, other, NULL));
    CHECK_OK(progcache_file_import(NULL, file, archive, NULL));
    progcache_file_close(file);
    progcache *imported = NULL;
    CHECK_OK(progcache_open(&imported, other, NULL));
    CHECK_OK(progcache_compile_or_load(&r, imported, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.compile_ms == 0 && !r.names_learned);
    check_names(&r, &want, 2);
    progcache_program_result_release(&r);
    progcache_close(imported);
    unlink(archive);
    test_rmtree(other);
    progcache_buf_free(&want);
}

/* An entry as cuda.core writes it: bytes only, through the plain store API. */
static void put_plain(const char *dir, const unsigned char *key, const progcache_buf *art)
{
    progcache_file *file = NULL;
    CHECK_OK(progcache_file_open(&file, dir, NULL));
    CHECK_OK(progcache_store_put(progcache_file_store(file), key, 32, art->data, art->size));
    progcache_file_close(file);
}

/* The entry of p (its key from a compile without a cache) planted as
 * another program writes one: the bytes art, no records. */
static void plant(const char *dir, const progcache_program *p, const progcache_buf *art)
{
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, NULL, p));
    put_plain(dir, r.key, art);
    progcache_program_result_release(&r);
}

static void test_entry_without_record(const char *dir)
{
    progcache_program p = program(templated, exprs, 2, PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    progcache_buf want = PROGCACHE_BUF_INIT, art = PROGCACHE_BUF_INIT;
    nvrtc_names(&p, &want);
    CHECK_OK(progcache_nvrtc_compile(&art, NULL, NULL, &p.nvrtc));
    plant(dir, &p, &art);

    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    uint64_t before = learned(cache);
    /* Two templates in one artifact: the kernels alone cannot say which
     * is which. Compiled once to learn them; the same bytes. */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.names_learned == 1 && r.compile_ms > 0);
    CHECK(!r.healed && r.artifact.size == art.size && !memcmp(r.artifact.data, art.data, art.size));
    check_names(&r, &want, 2);
    CHECK(learned(cache) == before + 1);
    progcache_program_result_release(&r);
    /* Stored with the entry: the next hit needs no compile. */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.names_learned == 0 && r.compile_ms == 0);
    check_names(&r, &want, 2);
    CHECK(learned(cache) == before + 1);
    progcache_program_result_release(&r);

    /* An extern "C" kernel by its own name: found among the artifact's
     * kernels, no compile. */
    const char *plain[] = {"plain"};
    progcache_program q = program(templated, plain, 1, PROGCACHE_PROGRAM_NO_LOAD);
    plant(dir, &q, &art);
    CHECK_OK(progcache_compile_or_load(&r, cache, &q));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !r.names_learned && r.compile_ms == 0);
    CHECK(r.num_names == 1 && !strcmp(r.lowered_names[0], "plain"));
    progcache_program_result_release(&r);

    /* One name, one kernel whose mangled name is that template: no compile. */
    static const char one[] = "template <int N> __global__ void only(int *a) { a[0] = N; }\n";
    const char *only[] = {"only<7>"};
    progcache_program s = program(one, only, 1, PROGCACHE_PROGRAM_NO_LOAD);
    progcache_buf one_art = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_compile(&one_art, NULL, NULL, &s.nvrtc));
    plant(dir, &s, &one_art);
    CHECK_OK(progcache_compile_or_load(&r, cache, &s));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !r.names_learned && r.compile_ms == 0);
    CHECK(!strcmp(r.lowered_names[0], "_Z4onlyILi7EEvPi"));
    progcache_program_result_release(&r);

    /* An entry of other bytes under the key (not this compile's): never
     * trusted for names; replaced by the fresh artifact. */
    unsigned char key[32];
    CHECK_OK(progcache_compile_or_load(&r, NULL, &p));
    memcpy(key, r.key, 32);
    progcache_program_result_release(&r);
    (void)progcache_remove(cache, key, 32);
    put_plain(dir, key, &one_art);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.names_learned == 1 && r.healed == 1 && r.status == PROGCACHE_STATUS_MISS);
    CHECK(strstr(r.heal_reason, "no lowered names"));
    CHECK(r.artifact.size == art.size && !memcmp(r.artifact.data, art.data, art.size));
    check_names(&r, &want, 2);
    progcache_program_result_release(&r);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.compile_ms == 0);
    progcache_program_result_release(&r);

    progcache_close(cache);
    progcache_buf_free(&one_art);
    progcache_buf_free(&art);
    progcache_buf_free(&want);
}

/* Results of versions 1 and 2: the call works, writes nothing past them. */
static void test_older_results(const char *dir)
{
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program p = program(templated, exprs, 2, PROGCACHE_PROGRAM_NO_LOAD);
    for (unsigned v = 1; v <= 2; v++) {
        size_t size = v == 1 ? offsetof(progcache_program_result, lookup_error)
                             : offsetof(progcache_program_result, num_names);
        unsigned char *block = malloc(sizeof(progcache_program_result) + 64);
        memset(block, 0xa5, sizeof(progcache_program_result) + 64);
        progcache_program_result *r = (progcache_program_result *)block;
        memset(r, 0, size);
        r->version = v;
        CHECK_OK(progcache_compile_or_load(r, cache, &p));
        CHECK(r->status == PROGCACHE_STATUS_HIT);
        for (size_t i = size; i < sizeof(progcache_program_result) + 64; i++)
            CHECK(block[i] == 0xa5);
        progcache_program_result_release(r);
        for (size_t i = size; i < sizeof(progcache_program_result) + 64; i++)
            CHECK(block[i] == 0xa5);
        free(block);
    }
    progcache_close(cache);
}

/* With the fake driver: each name's kernel, and function. */
static void test_fake_driver(const char *dir, const char *fake)
{
    progcache__cuda_set_library_path(fake);
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program p = program(templated, exprs, 2, 0);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    for (int round = 0; round < 2; round++) {
        CHECK_OK(progcache_compile_or_load(&r, cache, &p));
        CHECK(r.library && r.num_names == 2 && r.kernels[0] && r.kernels[1]);
        CHECK(r.functions[0] == NULL && r.kernels[0] != NULL);
        progcache_program_result_release(&r);
    }
    /* A name that is a variable, not a kernel: NULL, not an error. */
    static const char var[] = "template <int N> __device__ int value = N;\n"
                              "extern \"C\" __global__ void k(int *a) { a[0] = value<5>; }\n";
    const char *names[] = {"&value<5>", "k"};
    progcache_program q = program(var, names, 2, 0);
    CHECK_OK(progcache_compile_or_load(&r, cache, &q));
    CHECK(r.num_names == 2 && r.kernels[1] != NULL);
    progcache_program_result_release(&r);
    /* The module API fetches functions. */
    p.flags = PROGCACHE_PROGRAM_MODULE_API;
    const progcache_cuda_api *api = NULL;
    CHECK_OK(progcache_cuda_load(&api));
    CUcontext ctx = NULL;
    CHECK(api->cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(api->cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.module && r.functions[0] && r.functions[1] && !r.kernels[0]);
    progcache_program_result_release(&r);
    progcache_close(cache);
}

int main(int argc, char **argv)
{
    char *dir = test_mkdtemp("names");
    if (argc > 1 && !strcmp(argv[1], "fake")) {
        const char *fake = getenv("PROGCACHE_FAKE_CUDA");
        if (!fake) {
            printf("SKIPPED: PROGCACHE_FAKE_CUDA is not set\n");
            return TEST_SKIP_CODE;
        }
        test_fake_driver(dir, fake);
    } else {
        test_record_round_trip(dir);
        test_entry_without_record(dir);
        test_older_results(dir);
    }
    test_rmdtemp(dir);
    printf("name expressions: ok\n");
    return 0;
}
