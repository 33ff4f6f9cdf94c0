/* Loading compile-or-load's artifact: cuLibraryLoadData (or
 * cuModuleLoadData), the kernel the program names, and the kernel of each
 * name expression. docs/CUDA.md, "cuLibraryLoadData, not
 * cuModuleLoadData", says why the library API is the default. */
#include "program/program_load.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "program/program_names.h"
#include "cuda/driver.h"
#include "error.h"
#include "progcache/artifact.h"

/* Driver results that mean "these bytes are no good", as opposed to "the
 * driver or the context is in trouble", which recompiling cannot fix.
 * CUDA_ERROR_NOT_FOUND (no such kernel) is not one: it is almost always a
 * wrong kernel name, and healing it would recompile on every call. */
static int image_refused(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND: return 1;
    default: return 0;
    }
}

void progcache__program_unload(const progcache_cuda_api *api, progcache_program_result *out)
{
    if (api && out->library)
        api->cuLibraryUnload(out->library);
    if (api && out->module)
        api->cuModuleUnload(out->module);
    out->library = NULL;
    out->kernel = NULL;
    out->module = NULL;
    out->function = NULL;
    if (out->version >= 3)
        progcache__names_unloaded(out);
}

/* Load the artifact and fetch the kernel. *refused is set when the driver
 * rejected the bytes themselves (see image_refused). */
PROGCACHE_HOT
int progcache__program_load(progcache_program_result *out, const progcache_program *program,
                            int *refused)
{
    *refused = 0;
    const progcache_cuda_api *api;
    int rc = progcache_cuda_load(&api);
    if (rc)
        return rc;
    const char *kernel = program->kernel;
    const char *target = progcache_target_name(program->nvrtc.target);
    double t = progcache__clock_ms();
    CUresult r;
    if (program->flags & PROGCACHE_PROGRAM_MODULE_API) {
        r = api->cuModuleLoadData(&out->module, out->artifact.data);
        if (r) {
            rc = progcache__cuda_error(r, "cuModuleLoadData of a %zu-byte %s", out->artifact.size,
                                       target);
            goto done;
        }
        if (kernel && (r = api->cuModuleGetFunction(&out->function, out->module, kernel))) {
            rc = progcache__cuda_error(r, "cuModuleGetFunction of kernel '%s'", kernel);
            goto done;
        }
        r = CUDA_SUCCESS; /* a name's failure is not about the bytes */
        if (out->version >= 3 && (rc = progcache__names_load(out, api, program->flags)))
            goto done;
    } else {
        /* With PRESERVE_BINARY the driver keeps pointing at out->artifact,
         * which release frees only after unloading. */
        CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
        void *value = (void *)(uintptr_t)1;
        unsigned int nopt = (program->flags & PROGCACHE_PROGRAM_PRESERVE_BINARY) ? 1 : 0;
        r = api->cuLibraryLoadData(&out->library, out->artifact.data, NULL, NULL, 0,
                                   nopt ? &opt : NULL, nopt ? &value : NULL, nopt);
        if (r) {
            rc = progcache__cuda_error(r, "cuLibraryLoadData of a %zu-byte %s",
                                       out->artifact.size, target);
            goto done;
        }
        if (kernel && (r = api->cuLibraryGetKernel(&out->kernel, out->library, kernel))) {
            rc = progcache__cuda_error(r, "cuLibraryGetKernel of kernel '%s'", kernel);
            goto done;
        }
        if (kernel && (program->flags & PROGCACHE_PROGRAM_GET_FUNCTION)) {
            r = api->cuKernelGetFunction(&out->function, out->kernel);
            if (r) {
                rc = progcache__cuda_error(r, "cuKernelGetFunction of kernel '%s' (is a context "
                                              "current on this thread?)",
                                           kernel);
                /* The bytes loaded fine: this is about the context. */
                r = CUDA_SUCCESS;
                goto done;
            }
        }
        r = CUDA_SUCCESS;
        if (out->version >= 3 && (rc = progcache__names_load(out, api, program->flags)))
            goto done;
    }
done:
    out->load_ms += progcache__clock_ms() - t;
    if (rc) {
        *refused = image_refused(r);
        progcache__program_unload(api, out);
    }
    return rc;
}


int progcache__program_check_kernel(const progcache_program_result *out,
                                    const progcache_program *program)
{
    const char *kernel = program->kernel;
    if (!kernel || program->nvrtc.target == PROGCACHE_TARGET_LTOIR)
        return PROGCACHE_OK;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    int rc = progcache_artifact_inspect(&info, out->artifact.data, out->artifact.size);
    if (rc || (info.kind != PROGCACHE_KIND_CUBIN && info.kind != PROGCACHE_KIND_PTX))
        goto done;
    char some[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < info.num_kernels; i++) {
        const char *k = progcache_artifact_kernel(&info, i);
        if (!strcmp(k, kernel))
            goto done;
        if (used < sizeof some - 1)
            used += (size_t)snprintf(some + used, sizeof some - used, "%s%s", i ? ", " : "", k);
    }
    rc = progcache__error(PROGCACHE_EINVAL,
                          "kernel '%s' is not in the %s (its kernels: %s): a C++ kernel that is "
                          "not extern \"C\" is named by its lowered name; to name it as "
                          "written (\"%s\"), list it in nvrtc.name_expressions",
                          kernel, progcache_kind_name(info.kind),
                          info.num_kernels ? some : "none", kernel);
done:
    progcache_artifact_info_release(&info);
    return rc;
}
