/* The load half of compile-or-load, against the fake driver
 * (tests/cuda/fake_cuda.c) so that it runs without a GPU: library and
 * module APIs, contexts, a cached artifact the driver refuses (healed), a
 * fresh one it refuses (an error), a wrong kernel name, unloading.
 * Argument "nodevice": the fake reports no device (FAKE_CUDA_DEVICES=0). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_fixtures.h"
#include "driver.h"

static int (*fake_live)(void);
static int (*fake_loads)(void);
static void (*fake_reject_next)(int);

static const progcache_cuda_api *setup(const char *path)
{
    progcache__cuda_set_library_path(path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    fake_live = (int (*)(void))dlsym(h, "fake_cuda_live");
    fake_loads = (int (*)(void))dlsym(h, "fake_cuda_loads");
    fake_reject_next = (void (*)(int))dlsym(h, "fake_cuda_reject_next");
    CHECK(fake_live && fake_loads && fake_reject_next);
    const progcache_cuda_api *api = NULL;
    CHECK_OK(progcache_cuda_load(&api));
    CHECK(api->version == PROGCACHE_CUDA_API_VERSION && api->driver_version == 13000);
    /* Every member was resolved. */
    const char *p = (const char *)&api->cuInit;
    const char *end = (const char *)&api->cuEventDestroy + sizeof api->cuEventDestroy;
    for (; p < end; p += sizeof(void *)) {
        void *fn;
        memcpy(&fn, p, sizeof fn);
        CHECK(fn != NULL);
    }
    return api;
}

static void test_library_api(const progcache_cuda_api *api, progcache *cache)
{
    progcache_program p = fixture_program(0);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.library != NULL && r.kernel != NULL && r.function == NULL && r.module == NULL);
    CHECK(fake_live() == 1);
    /* Holding loaded code, the result must be released before reuse. */
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&r, cache, &p));
    progcache_program_result_release(&r);
    CHECK(fake_live() == 0 && r.library == NULL);

    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.kernel != NULL && r.load_ms >= 0);
    progcache_program_result_release(&r);

    /* A CUfunction needs a current context: without one, a clear error and
     * nothing left loaded (and no healing: the bytes were fine). */
    CHECK(api->cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    p.flags = PROGCACHE_PROGRAM_GET_FUNCTION;
    CHECK_RC(PROGCACHE_ECUDA, progcache_compile_or_load(&r, cache, &p));
    CHECK(strstr(progcache_error_last(), "cuKernelGetFunction"));
    CHECK(strstr(progcache_error_last(), "CUDA_ERROR_INVALID_CONTEXT"));
    CHECK(!r.healed && r.library == NULL && fake_live() == 0);

    CUcontext ctx;
    CHECK(api->cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    CHECK(api->cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.function != NULL && r.kernel != NULL);
    progcache_program_result_release(&r);

    p.flags = PROGCACHE_PROGRAM_MODULE_API;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.module != NULL && r.function != NULL && r.library == NULL);
    CHECK(fake_live() == 1);
    progcache_program_result_release(&r);
    CHECK(fake_live() == 0);
}

static void test_refused(progcache *cache)
{
    progcache_program p = fixture_program(0);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p)); /* a hit by now */
    CHECK(r.status == PROGCACHE_STATUS_HIT);
    progcache_program_result_release(&r);

    /* The driver refuses the cached artifact: remove, compile, store, load. */
    int loads = fake_loads();
    fake_reject_next(1);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.healed == 1 && r.status == PROGCACHE_STATUS_MISS);
    CHECK(strstr(r.heal_reason, "CUDA_ERROR_INVALID_IMAGE"));
    CHECK(r.compile_ms > 0 && r.kernel != NULL);
    CHECK(fake_loads() == loads + 2);
    progcache_program_result_release(&r);

    /* A freshly compiled artifact the driver refuses is an error, not a
     * cache problem; the artifact is still stored and returned. */
    CHECK_OK(progcache_clear(cache));
    fake_reject_next(1);
    CHECK_RC(PROGCACHE_ECUDA, progcache_compile_or_load(&r, cache, &p));
    CHECK(strstr(progcache_error_last(), "cuLibraryLoadData"));
    CHECK(strstr(progcache_error_last(), "CUDA_ERROR_INVALID_IMAGE"));
    CHECK(!r.healed && r.status == PROGCACHE_STATUS_MISS && r.artifact.size > 1000);
    CHECK(r.library == NULL && fake_live() == 0);
    progcache_program_result_release(&r);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT);
    progcache_program_result_release(&r);

    /* A wrong kernel name is the caller's: no healing, no recompiling. */
    p.kernel = "no_such_kernel";
    CHECK_RC(PROGCACHE_ECUDA, progcache_compile_or_load(&r, cache, &p));
    CHECK(strstr(progcache_error_last(), "kernel 'no_such_kernel'"));
    CHECK(strstr(progcache_error_last(), "CUDA_ERROR_NOT_FOUND"));
    CHECK(!r.healed && r.status == PROGCACHE_STATUS_HIT && r.compile_ms == 0);
    CHECK(fake_live() == 0);
    progcache_program_result_release(&r);
}

int main(int argc, char **argv)
{
    const char *path = getenv("PROGCACHE_FAKE_CUDA");
    if (!path || !*path) {
        puts("test_cuda_fake_driver: PROGCACHE_FAKE_CUDA is not set: SKIPPED");
        return TEST_SKIP_CODE;
    }
    if (argc > 1 && !strcmp(argv[1], "nodevice")) {
        progcache__cuda_set_library_path(path);
        const progcache_cuda_api *api;
        CHECK_RC(PROGCACHE_ENOCUDA, progcache_cuda_load(&api));
        CHECK(strstr(progcache_error_last(), "no CUDA device") == progcache_error_last());
        CHECK(progcache__cuda_loaded() == NULL);
        puts("test_cuda_fake_driver nodevice: ok");
        return 0;
    }
    const progcache_cuda_api *api = setup(path);
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "fakecuda");
    test_library_api(api, cache);
    test_refused(cache);
    test_cache_done(cache, dir);
    puts("test_cuda_fake_driver: ok");
    return 0;
}
