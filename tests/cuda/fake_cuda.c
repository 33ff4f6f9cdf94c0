/* A fake CUDA driver for tests on machines without a GPU.
 *
 * It exports what progcache's loader looks up (cuDriverGetVersion,
 * cuGetProcAddress_v2) and answers the table's entry points with plausible
 * behaviour: images must look like a CUBIN (ELF magic) or PTX text, kernels
 * are found by name in the image bytes, module loads and
 * cuKernelGetFunction need a current context. Controls for tests:
 * fake_cuda_reject_next(n) makes the next n image loads fail with
 * CUDA_ERROR_INVALID_IMAGE; fake_cuda_live() counts loaded libraries and
 * modules; FAKE_CUDA_DEVICES sets the device count (default 1). */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

struct image {
    unsigned char *bytes;
    size_t size;
};

static atomic_int live, loads, reject_next;
static _Thread_local CUcontext current;
static int fake_context_storage;

EXPORT int fake_cuda_live(void) { return live; }
EXPORT int fake_cuda_loads(void) { return loads; }
EXPORT void fake_cuda_reject_next(int n) { reject_next = n; }

static CUresult fake_init(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }

EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

/* The errors the fake returns: the driver's name for each and, where a
 * test reads it, its description (NULL: "fake error"). */
static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", NULL},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", NULL},
};

static CUresult error_name(CUresult r, const char **out)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == r) {
            *out = errors[i].name;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult error_string(CUresult r, const char **out)
{
    *out = "fake error";
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == r && errors[i].text)
            *out = errors[i].text;
    return CUDA_SUCCESS;
}

static int devices(void)
{
    const char *s = getenv("FAKE_CUDA_DEVICES");
    return s ? atoi(s) : 1;
}

static CUresult device_count(int *n) { *n = devices(); return CUDA_SUCCESS; }

static CUresult device_get(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= devices())
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

static CUresult device_name(char *name, int len, CUdevice d)
{
    (void)d;
    strncpy(name, "Fake CUDA Device", (size_t)len);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

static CUresult device_attribute(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
    return CUDA_SUCCESS;
}

static CUresult ctx_retain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = (CUcontext)&fake_context_storage;
    return CUDA_SUCCESS;
}
static CUresult ctx_release(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static CUresult ctx_set(CUcontext c) { current = c; return CUDA_SUCCESS; }
static CUresult ctx_get(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
static CUresult no_op(void) { return CUDA_SUCCESS; }

static CUresult mem_alloc(CUdeviceptr *p, size_t n)
{
    void *m = malloc(n ? n : 1);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}
static CUresult mem_free(CUdeviceptr p) { free((void *)(uintptr_t)p); return CUDA_SUCCESS; }
static CUresult htod(CUdeviceptr d, const void *s, size_t n)
{
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
static CUresult dtoh(void *d, CUdeviceptr s, size_t n)
{
    memcpy(d, (const void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}

/* An image is accepted when it starts like an ELF file or holds PTX. Its
 * size is unknown to the driver API; for ELF read the header's section
 * table end, for PTX the text length. */
static CUresult load_image(struct image **out, const void *code)
{
    loads++;
    if (reject_next > 0) {
        reject_next--;
        return CUDA_ERROR_INVALID_IMAGE;
    }
    const unsigned char *b = code;
    size_t size;
    if (!memcmp(b, "\177ELF", 4)) {
        unsigned long long shoff;
        unsigned short shentsize, shnum;
        memcpy(&shoff, b + 40, 8);
        memcpy(&shentsize, b + 58, 2);
        memcpy(&shnum, b + 60, 2);
        size = (size_t)(shoff + (unsigned long long)shentsize * shnum);
    } else if (strstr((const char *)b, ".version")) {
        size = strlen((const char *)b);
    } else {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    struct image *im = malloc(sizeof *im);
    im->bytes = malloc(size);
    memcpy(im->bytes, b, size);
    im->size = size;
    live++;
    *out = im;
    return CUDA_SUCCESS;
}

static void unload_image(struct image *im)
{
    free(im->bytes);
    free(im);
    live--;
}

static CUresult find_kernel(struct image *im, const char *name, void **out)
{
    if (!memmem(im->bytes, im->size, name, strlen(name)))
        return CUDA_ERROR_NOT_FOUND;
    *out = im;
    return CUDA_SUCCESS;
}

static CUresult library_load(CUlibrary *lib, const void *code, CUjit_option *o, void **ov,
                             unsigned int no, CUlibraryOption *lo, void **lv, unsigned int nl)
{
    (void)o; (void)ov; (void)no; (void)lo; (void)lv; (void)nl;
    return load_image((struct image **)lib, code);
}
static CUresult library_unload(CUlibrary lib) { unload_image((struct image *)lib); return CUDA_SUCCESS; }
static CUresult library_kernel(CUkernel *k, CUlibrary lib, const char *name)
{
    return find_kernel((struct image *)lib, name, (void **)k);
}
static CUresult kernel_function(CUfunction *f, CUkernel k)
{
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    *f = (CUfunction)k;
    return CUDA_SUCCESS;
}
static CUresult module_load(CUmodule *m, const void *code)
{
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    return load_image((struct image **)m, code);
}
static CUresult module_unload(CUmodule m) { unload_image((struct image *)m); return CUDA_SUCCESS; }
static CUresult module_function(CUfunction *f, CUmodule m, const char *name)
{
    return find_kernel((struct image *)m, name, (void **)f);
}
static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e)
{
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s;
    (void)p; (void)e;
    return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
static CUresult stream_sync(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult event_create(CUevent *e, unsigned f) { (void)f; *e = (CUevent)malloc(1); return CUDA_SUCCESS; }
static CUresult event_record(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
static CUresult event_sync(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult event_elapsed(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 1.0f; return CUDA_SUCCESS; }
static CUresult event_destroy(CUevent e) { free(e); return CUDA_SUCCESS; }

static const struct {
    const char *name;
    void *fn;
} table[] = {
    {"cuInit", (void *)fake_init},
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuGetErrorName", (void *)error_name},
    {"cuGetErrorString", (void *)error_string},
    {"cuDeviceGetCount", (void *)device_count},
    {"cuDeviceGet", (void *)device_get},
    {"cuDeviceGetName", (void *)device_name},
    {"cuDeviceGetAttribute", (void *)device_attribute},
    {"cuDevicePrimaryCtxRetain", (void *)ctx_retain},
    {"cuDevicePrimaryCtxRelease", (void *)ctx_release},
    {"cuCtxSetCurrent", (void *)ctx_set},
    {"cuCtxGetCurrent", (void *)ctx_get},
    {"cuCtxSynchronize", (void *)no_op},
    {"cuMemAlloc", (void *)mem_alloc},
    {"cuMemFree", (void *)mem_free},
    {"cuMemcpyHtoD", (void *)htod},
    {"cuMemcpyDtoH", (void *)dtoh},
    {"cuLibraryLoadData", (void *)library_load},
    {"cuLibraryUnload", (void *)library_unload},
    {"cuLibraryGetKernel", (void *)library_kernel},
    {"cuKernelGetFunction", (void *)kernel_function},
    {"cuModuleLoadData", (void *)module_load},
    {"cuModuleUnload", (void *)module_unload},
    {"cuModuleGetFunction", (void *)module_function},
    {"cuLaunchKernel", (void *)launch},
    {"cuStreamSynchronize", (void *)stream_sync},
    {"cuEventCreate", (void *)event_create},
    {"cuEventRecord", (void *)event_record},
    {"cuEventSynchronize", (void *)event_sync},
    {"cuEventElapsedTime", (void *)event_elapsed},
    {"cuEventDestroy", (void *)event_destroy},
};

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)version;
    (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, symbol)) {
            *pfn = table[i].fn;
            if (status)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
