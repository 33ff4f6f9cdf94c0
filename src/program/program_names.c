/* Name expressions on compile-or-load's path: which kernel each one is, on
 * a miss (NVRTC says, and the entry records it) and on a hit (the record
 * says; an entry without one, written by cuda.core or an older progcache,
 * is read from its own kernels when that is certain, else the program is
 * compiled once to learn the names: compile_or_load.c). Never a guess:
 * a wrong kernel would run silently. */
#include "program/program_names.h"

#include <string.h>

#include "alloc.h"
#include "artifact/names.h"
#include "buf.h"
#include "cuda/driver.h"
#include "error.h"

int progcache__names_of_entry(progcache_buf *lowered, const progcache_key_nvrtc_options *o,
                              const progcache_entry_meta *meta, const progcache_buf *artifact)
{
    const unsigned char *rec = NULL;
    size_t rec_len = 0;
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    int inspected = 0, rc = 1;
    if (meta)
        (void)progcache_entry_meta_find(&rec, &rec_len, meta, PROGCACHE_RECORD_LOWERED_NAMES);
    lowered->size = 0;
    for (size_t i = 0; i < o->num_name_expressions && rc == 1; i++) {
        const char *expr = o->name_expressions[i];
        const char *name = rec ? progcache__names_find(rec, rec_len, expr,
                                                       o->name_expressions_are_bytes)
                               : NULL;
        if (!name) {
            if (!inspected) {
                inspected = 1;
                if (progcache_artifact_inspect(&info, artifact->data, artifact->size)) {
                    rc = progcache_error_code();
                    break;
                }
            }
            name = progcache__names_from_kernels(expr, o->num_name_expressions, &info.kernels,
                                                 info.num_kernels);
        }
        if (!name)
            rc = 0;
        else if (progcache__buf_append(lowered, name, strlen(name) + 1))
            rc = PROGCACHE_ENOMEM;
    }
    progcache_artifact_info_release(&info);
    return rc;
}

/* The index-th name of lowered. */
static const char *name_at(const progcache_buf *lowered, size_t index)
{
    return progcache_names_at(lowered, index);
}

int progcache__names_add_record(progcache_entry_meta *meta, const progcache_key_nvrtc_options *o,
                                const progcache_buf *lowered)
{
    size_t n = o->num_name_expressions;
    if (!n)
        return PROGCACHE_OK;
    const char **names = progcache__calloc(n, sizeof *names);
    if (!names)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory recording lowered names");
    int rc = PROGCACHE_OK;
    for (size_t i = 0; i < n && !rc; i++)
        if (!(names[i] = name_at(lowered, i)))
            rc = progcache__error(PROGCACHE_EINVAL, "no lowered name for name expression %zu", i);
    progcache_buf rec = PROGCACHE_BUF_INIT;
    if (!rc)
        rc = progcache__names_encode(&rec, o->name_expressions, names, n,
                                     o->name_expressions_are_bytes);
    if (!rc)
        rc = progcache_entry_meta_add(meta, PROGCACHE_RECORD_LOWERED_NAMES, rec.data, rec.size);
    progcache_buf_free(&rec);
    progcache__free(names);
    return rc;
}

int progcache__names_to_result(progcache_program_result *out,
                               const progcache_key_nvrtc_options *o, const progcache_buf *lowered)
{
    size_t n = o->num_name_expressions;
    out->num_names = 0;
    out->lowered_names = NULL;
    out->kernels = NULL;
    out->functions = NULL;
    if (!n)
        return PROGCACHE_OK;
    /* One block: the three arrays (pointer-sized items, so each stays
     * aligned), then the names. */
    size_t arrays = n * (sizeof(char *) + sizeof(CUkernel) + sizeof(CUfunction));
    int rc = progcache__buf_reserve(&out->names_memory, arrays + lowered->size);
    if (rc)
        return rc;
    unsigned char *base = out->names_memory.data;
    const char **names = (const char **)(void *)base;
    CUkernel *kernels = (CUkernel *)(void *)(base + n * sizeof(char *));
    CUfunction *functions = (CUfunction *)(void *)(base + n * (sizeof(char *) + sizeof(CUkernel)));
    char *text = (char *)base + arrays;
    memcpy(text, lowered->data, lowered->size);
    progcache_buf copy = {(unsigned char *)text, lowered->size, lowered->size};
    for (size_t i = 0; i < n; i++) {
        names[i] = name_at(&copy, i);
        kernels[i] = NULL;
        functions[i] = NULL;
    }
    progcache__buf_set_size(&out->names_memory, arrays + lowered->size);
    out->num_names = n;
    out->lowered_names = names;
    out->kernels = kernels;
    out->functions = functions;
    return PROGCACHE_OK;
}

PROGCACHE_HOT
int progcache__names_load(progcache_program_result *out, const progcache_cuda_api *api,
                          unsigned int flags)
{
    for (size_t i = 0; i < out->num_names; i++) {
        const char *name = out->lowered_names[i];
        CUresult r;
        if (out->module) {
            r = api->cuModuleGetFunction(&out->functions[i], out->module, name);
            if (r == CUDA_ERROR_NOT_FOUND) {
                out->functions[i] = NULL; /* a variable, not a kernel */
                continue;
            }
            if (r)
                return progcache__cuda_error(r, "cuModuleGetFunction of '%s'", name);
            continue;
        }
        r = api->cuLibraryGetKernel(&out->kernels[i], out->library, name);
        if (r == CUDA_ERROR_NOT_FOUND) {
            out->kernels[i] = NULL;
            continue;
        }
        if (r)
            return progcache__cuda_error(r, "cuLibraryGetKernel of '%s'", name);
        if ((flags & PROGCACHE_PROGRAM_GET_FUNCTION) &&
            (r = api->cuKernelGetFunction(&out->functions[i], out->kernels[i])))
            return progcache__cuda_error(r, "cuKernelGetFunction of '%s' (is a context current "
                                            "on this thread?)",
                                         name);
    }
    return PROGCACHE_OK;
}

void progcache__names_unloaded(progcache_program_result *out)
{
    for (size_t i = 0; i < out->num_names; i++) {
        out->kernels[i] = NULL;
        out->functions[i] = NULL;
    }
}
