/* The CUDA driver, opened with dlopen at run time and resolved into a
 * function table once per process.
 *
 * Why not link libcuda: a program linked against it does not even start on
 * a machine without the NVIDIA driver (the dynamic loader fails before
 * main), so it cannot say what is wrong, and its cache tools, which need no
 * GPU at all, would not run either.
 *
 * Why cuGetProcAddress rather than dlsym of each name: the driver exports
 * several versions of many entry points (cuMemAlloc and cuMemAlloc_v2, ...);
 * cuGetProcAddress returns the one matching the CUDA version whose header we
 * compiled against, which is the signature the table declares. */
#include "cuda/driver.h"

#include "sha256.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The process-wide driver state. It is written once under pthread_once and
 * only read afterwards, so it needs no lock; it is the one piece of global
 * state in this layer besides the background-store registry, and both exist
 * because the driver itself is process-wide. */
static struct {
    pthread_once_t once;
    int rc;
    char message[8192]; /* dlerror's text names the library's path, whole */
    progcache_cuda_api api;
    const char *path;
} driver = {PTHREAD_ONCE_INIT, 0, "", {0}, "libcuda.so.1"};

/* Set (release) once the table is complete and the driver initialised, so
 * progcache__cuda_loaded() can read it without going through pthread_once. */
static atomic_int driver_ready;

/* Every member of the table, by the driver's base name. offsetof expands
 * <cuda.h>'s _v2 macros the same way the struct declaration did. */
static const struct {
    const char *name;
    size_t offset;
} entries[] = {
#define ENTRY(sym, member) {sym, offsetof(progcache_cuda_api, member)}
    ENTRY("cuInit", cuInit),
    ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    ENTRY("cuGetErrorName", cuGetErrorName),
    ENTRY("cuGetErrorString", cuGetErrorString),
    ENTRY("cuDeviceGetCount", cuDeviceGetCount),
    ENTRY("cuDeviceGet", cuDeviceGet),
    ENTRY("cuDeviceGetName", cuDeviceGetName),
    ENTRY("cuDeviceGetAttribute", cuDeviceGetAttribute),
    ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease),
    ENTRY("cuCtxSetCurrent", cuCtxSetCurrent),
    ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
    ENTRY("cuCtxSynchronize", cuCtxSynchronize),
    ENTRY("cuMemAlloc", cuMemAlloc),
    ENTRY("cuMemFree", cuMemFree),
    ENTRY("cuMemcpyHtoD", cuMemcpyHtoD),
    ENTRY("cuMemcpyDtoH", cuMemcpyDtoH),
    ENTRY("cuLibraryLoadData", cuLibraryLoadData),
    ENTRY("cuLibraryUnload", cuLibraryUnload),
    ENTRY("cuLibraryGetKernel", cuLibraryGetKernel),
    ENTRY("cuKernelGetFunction", cuKernelGetFunction),
    ENTRY("cuModuleLoadData", cuModuleLoadData),
    ENTRY("cuModuleUnload", cuModuleUnload),
    ENTRY("cuModuleGetFunction", cuModuleGetFunction),
    ENTRY("cuLaunchKernel", cuLaunchKernel),
    ENTRY("cuStreamSynchronize", cuStreamSynchronize),
    ENTRY("cuEventCreate", cuEventCreate),
    ENTRY("cuEventRecord", cuEventRecord),
    ENTRY("cuEventSynchronize", cuEventSynchronize),
    ENTRY("cuEventElapsedTime", cuEventElapsedTime),
    ENTRY("cuEventDestroy", cuEventDestroy),
#undef ENTRY
};

typedef CUresult (CUDAAPI *get_proc_fn)(const char *symbol, void **pfn, int cuda_version,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status);

static void fail(int code, const char *fmt, ...) PROGCACHE_PRINTF(2, 3);

static void fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(driver.message, sizeof driver.message, fmt, ap);
    va_end(ap);
    driver.rc = code;
}

/* Name and text of a CUresult from a table that may be half resolved. */
static void describe(const progcache_cuda_api *api, CUresult r, const char **name,
                     const char **text)
{
    *name = NULL;
    *text = NULL;
    if (api && api->cuGetErrorName)
        api->cuGetErrorName(r, name);
    if (api && api->cuGetErrorString)
        api->cuGetErrorString(r, text);
    if (!*name)
        *name = "unknown CUresult";
    if (!*text)
        *text = "no description";
}

static void load_once(void)
{
    progcache_cuda_api *api = &driver.api;
    /* Every GPU program calls this before its first compile-or-load, and it
     * is slow anyway (cuInit: a quarter of a second). Pay the one-time
     * set-up of what a cache hit then uses here too: OpenSSL's (0.4-0.9 ms
     * for the first digest of a process). Measured: the first key
     * derivation of a process drops from 1-2.6 ms (OpenSSL's set-up) to
     * about 15 us; what is left is code and data touched for the first
     * time. NVRTC is not touched: a hit does not load it (the key's NVRTC
     * version comes from a record, src/cuda/nvrtc_record.c). */
    unsigned char digest[PROGCACHE_SHA256_SIZE];
    progcache__sha256 *h = progcache__sha256_new();
    if (h && progcache__sha256_update(h, "progcache", 9) == PROGCACHE_OK)
        progcache__sha256_final(h, digest);
    else
        progcache__sha256_free(h);
    progcache_error_clear();

    void *lib = dlopen(driver.path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        fail(PROGCACHE_ENOCUDA,
             "no CUDA driver: %s could not be loaded (%s); install the NVIDIA driver or run "
             "on a machine with a GPU",
             driver.path, why ? why : "unknown reason");
        return;
    }
    /* The handle is never closed: the driver stays for the life of the
     * process, as it would if it were linked. */
    get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
    CUresult (CUDAAPI *get_version)(int *) =
        (CUresult (CUDAAPI *)(int *))dlsym(lib, "cuDriverGetVersion");
    int version = 0;
    if (get_version)
        get_version(&version);
    if (!get_proc || version < 12000) {
        fail(PROGCACHE_ENOCUDA,
             "no usable CUDA driver: %s is CUDA %d.%d, and progcache needs CUDA 12.0 or newer "
             "(the library loading API); update the NVIDIA driver",
             driver.path, version / 1000, version % 1000 / 10);
        return;
    }
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = get_proc(entries[i].name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
                              &status);
        if (r != CUDA_SUCCESS || !fn || status != CU_GET_PROC_ADDRESS_SUCCESS) {
            fail(PROGCACHE_ENOCUDA,
                 "no usable CUDA driver: %s (CUDA %d.%d) has no entry point %s; update the "
                 "NVIDIA driver",
                 driver.path, version / 1000, version % 1000 / 10, entries[i].name);
            return;
        }
        memcpy((char *)api + entries[i].offset, &fn, sizeof fn);
    }
    api->driver_version = version;

    CUresult r = api->cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        fail(PROGCACHE_ENOCUDA,
             "no CUDA device: the CUDA %d.%d driver found none (cuInit: CUDA_ERROR_NO_DEVICE); "
             "check nvidia-smi and CUDA_VISIBLE_DEVICES",
             version / 1000, version % 1000 / 10);
        return;
    }
    const char *name, *text;
    if (r != CUDA_SUCCESS) {
        describe(api, r, &name, &text);
        fail(PROGCACHE_ECUDA, "cuInit failed: %s (%s)", name, text);
        return;
    }
    int count = 0;
    r = api->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        describe(api, r, &name, &text);
        fail(PROGCACHE_ECUDA, "cuDeviceGetCount failed: %s (%s)", name, text);
        return;
    }
    if (count < 1) {
        fail(PROGCACHE_ENOCUDA,
             "no CUDA device: the CUDA %d.%d driver found none; check nvidia-smi and "
             "CUDA_VISIBLE_DEVICES",
             version / 1000, version % 1000 / 10);
        return;
    }
    api->version = PROGCACHE_CUDA_API_VERSION;
    driver.rc = PROGCACHE_OK;
    atomic_store_explicit(&driver_ready, 1, memory_order_release);
}

int progcache_cuda_load(const progcache_cuda_api **out)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_cuda_load: out is NULL");
    *out = NULL;
    pthread_once(&driver.once, load_once);
    if (driver.rc)
        return progcache__error(driver.rc, "%s", driver.message);
    *out = &driver.api;
    return PROGCACHE_OK;
}

const progcache_cuda_api *progcache__cuda_loaded(void)
{
    /* A caller that races the first load gets NULL, which is right: it
     * cannot hold anything that needs unloading yet. */
    return atomic_load_explicit(&driver_ready, memory_order_acquire) ? &driver.api : NULL;
}

void progcache__cuda_set_library_path(const char *path)
{
    driver.path = path ? path : "libcuda.so.1";
}

const char *progcache_cuda_result_name(CUresult result)
{
    const progcache_cuda_api *api = progcache__cuda_loaded();
    const char *name = NULL;
    if (api && api->cuGetErrorName(result, &name) == CUDA_SUCCESS && name)
        return name;
    switch (result) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    default: return "unknown CUresult";
    }
}

int progcache_cuda_check(CUresult result, const char *what)
{
    if (result == CUDA_SUCCESS)
        return PROGCACHE_OK;
    return progcache__cuda_error(result, "%s", what ? what : "a CUDA driver call");
}

int progcache__cuda_error(CUresult result, const char *fmt, ...)
{
    /* Formatted straight into the message: what can hold a kernel's
     * mangled name, of any length. */
    va_list ap;
    va_start(ap, fmt);
    progcache__error_v(PROGCACHE_ECUDA, fmt, ap);
    va_end(ap);
    const char *name, *text;
    describe(progcache__cuda_loaded(), result, &name, &text);
    if (!strcmp(name, "unknown CUresult"))
        name = progcache_cuda_result_name(result);
    progcache__error_append(" failed: %s (%s)", name, text);
    return PROGCACHE_ECUDA;
}
