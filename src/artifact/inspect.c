/* Checking artifact bytes of any format: recognise the format (format.c),
 * hand the bytes to its checker, and turn the verdict into the answer of
 * progcache_artifact_inspect (progcache/artifact.h). */
#include "artifact/inspect.h"

#include <string.h>

#include "artifact/cubin.h"
#include "artifact/fatbin.h"
#include "artifact/format.h"
#include "artifact/ltoir.h"
#include "artifact/ptx.h"
#include "artifact/verdict.h"
#include "buf.h"
#include "error.h"
#include "options.h"

/* The kind the format announces, and its checker's verdict. */
static int check_format(progcache__verdict *v)
{
    progcache_artifact_info *out = v->out;
    switch (progcache__format_of(v->data, v->size)) {
    case PROGCACHE__FORMAT_ELF:
        out->kind = PROGCACHE_KIND_CUBIN;
        return progcache__cubin_check(v);
    case PROGCACHE__FORMAT_FATBIN:
        out->kind = PROGCACHE_KIND_FATBIN;
        return progcache__fatbin_check(v);
    case PROGCACHE__FORMAT_NVVM:
        out->kind = PROGCACHE_KIND_LTOIR;
        return progcache__nvvm_check(v);
    case PROGCACHE__FORMAT_BITCODE:
        out->kind = PROGCACHE_KIND_LTOIR;
        return progcache__bitcode_check(v);
    case PROGCACHE__FORMAT_PTX:
        out->kind = PROGCACHE_KIND_PTX;
        return progcache__ptx_check(v);
    default: {
        const unsigned char *d = v->data;
        size_t n = v->size;
        return progcache__verdict_invalid(
            v, "not a CUBIN, PTX, LTO-IR or fatbin (%zu bytes, starting %02x %02x %02x %02x)", n,
            d[0], n > 1 ? d[1] : 0, n > 2 ? d[2] : 0, n > 3 ? d[3] : 0);
    }
    }
}

int progcache__validate(progcache_artifact_info *out, const unsigned char *data, size_t size,
                        int want_names)
{
    progcache__verdict v = {data, size, out, want_names, 0};
    out->kind = PROGCACHE_KIND_UNKNOWN;
    out->valid = 0;
    out->reason[0] = '\0';
    out->arch[0] = '\0';
    out->num_kernels = 0;
    out->kernels.size = 0;
    if (out->kernels.data)
        out->kernels.data[0] = '\0';
    if (size == 0 || !data) {
        progcache__verdict_invalid(&v, "empty");
        return PROGCACHE_OK;
    }
    int ok = check_format(&v);
    if (v.failed)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory listing kernel names");
    out->valid = ok && out->kind != PROGCACHE_KIND_UNKNOWN;
    if (out->valid)
        out->reason[0] = '\0';
    return PROGCACHE_OK;
}

int progcache_artifact_inspect(progcache_artifact_info *out, const void *data, size_t size)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_artifact_inspect: out is NULL");
    if (!data && size)
        return progcache__error(PROGCACHE_EINVAL, "progcache_artifact_inspect: data is NULL");
    int bad = progcache__version_check(out, PROGCACHE_ARTIFACT_INFO_VERSION,
                                       "progcache_artifact_inspect", "out",
                                       "progcache_artifact_info");
    if (bad)
        return bad;
    return progcache__validate(out, data, size, 1);
}

const char *progcache_artifact_kernel(const progcache_artifact_info *info, size_t index)
{
    if (!info || index >= info->num_kernels || !info->kernels.data)
        return NULL;
    const char *p = (const char *)info->kernels.data;
    const char *end = p + info->kernels.size;
    for (size_t i = 0; i < index && p < end; i++)
        p += strlen(p) + 1;
    return p < end ? p : NULL;
}

void progcache_artifact_info_release(progcache_artifact_info *info)
{
    if (!info)
        return;
    progcache_buf_free(&info->kernels);
    memset(info, 0, sizeof *info);
    info->version = PROGCACHE_ARTIFACT_INFO_VERSION;
}
