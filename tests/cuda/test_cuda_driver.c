/* progcache_cuda_load on this machine, and the CUresult helpers.
 * Without a driver (CI): ENOCUDA with a message a user can act on. With one
 * (the GPU machine): the table. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "driver.h"

static void test_load(void)
{
    CHECK_RC(PROGCACHE_EINVAL, progcache_cuda_load(NULL));
    const progcache_cuda_api *api = (const progcache_cuda_api *)1;
    int rc = progcache_cuda_load(&api);
    void *probe = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!probe) {
        CHECK(rc == PROGCACHE_ENOCUDA);
        CHECK(api == NULL);
        char first[1024];
        snprintf(first, sizeof first, "%s", progcache_error_last());
        CHECK(strstr(first, "no CUDA driver: libcuda.so.1 could not be loaded (") == first);
        CHECK(strstr(first, "install the NVIDIA driver or run on a machine with a GPU"));
        CHECK(progcache__cuda_loaded() == NULL);
        /* Later calls give the same answer, at once. */
        progcache_error_clear();
        CHECK_RC(PROGCACHE_ENOCUDA, progcache_cuda_load(&api));
        CHECK(!strcmp(first, progcache_error_last()));
        return;
    }
    dlclose(probe);
    if (rc == PROGCACHE_ENOCUDA) {
        CHECK(strstr(progcache_error_last(), "no CUDA device"));
        return;
    }
    CHECK_OK(rc);
    CHECK(api && api->version == PROGCACHE_CUDA_API_VERSION && api->driver_version >= 12000);
    CHECK(api->cuLibraryLoadData && api->cuLaunchKernel && api->cuEventDestroy);
    CHECK(progcache__cuda_loaded() == api);
    int count = 0;
    CHECK(api->cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0);
}

static void test_results(void)
{
    CHECK_OK(progcache_cuda_check(CUDA_SUCCESS, "cuInit"));
    CHECK_RC(PROGCACHE_ECUDA, progcache_cuda_check(CUDA_ERROR_INVALID_IMAGE, "cuLibraryLoadData"));
    CHECK(strstr(progcache_error_last(), "cuLibraryLoadData failed: CUDA_ERROR_INVALID_IMAGE"));
    CHECK_RC(PROGCACHE_ECUDA, progcache_cuda_check(CUDA_ERROR_OUT_OF_MEMORY, NULL));
    CHECK(strstr(progcache_error_last(), "CUDA_ERROR_OUT_OF_MEMORY"));
    CHECK(!strcmp(progcache_cuda_result_name(CUDA_ERROR_NO_DEVICE), "CUDA_ERROR_NO_DEVICE"));
    CHECK(progcache_cuda_result_name((CUresult)123456) != NULL);
    CHECK_RC(PROGCACHE_ECUDA, progcache__cuda_error(CUDA_ERROR_NOT_FOUND, "kernel '%s'", "k"));
    CHECK(strstr(progcache_error_last(), "kernel 'k' failed: CUDA_ERROR_NOT_FOUND"));
}

int main(void)
{
    test_load();
    test_results();
    puts("test_cuda_driver: ok");
    return 0;
}
