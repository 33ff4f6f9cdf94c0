/* Recognising an artifact's format from its first bytes: ELF (a CUBIN when
 * its header says CUDA), fatbin, NVVM container or LLVM bitcode (LTO-IR),
 * PTX text. Cache entries are raw artifact bytes with no header of ours
 * (cuda.core's format), so the bytes are all there is to go by.
 *
 * The file store asks progcache__kind_of on every hit: everything it calls
 * is in this file or inline (bytes.h), so it stays a few comparisons and,
 * for text, one bounded memmem. */
#include "artifact/format.h"

#include <elf.h>
#include <string.h>

#include "bytes.h"
#include "error.h" /* PROGCACHE_HOT */

#ifndef EM_CUDA
#define EM_CUDA 190
#endif

const char *progcache_kind_name(progcache_kind kind)
{
    switch (kind) {
    case PROGCACHE_KIND_CUBIN: return "CUBIN";
    case PROGCACHE_KIND_PTX: return "PTX";
    case PROGCACHE_KIND_LTOIR: return "LTO-IR";
    case PROGCACHE_KIND_FATBIN: return "fatbin";
    case PROGCACHE_KIND_MANIFEST: return "manifest";
    case PROGCACHE_KIND_BUNDLE: return "bundle";
    default: return "unknown";
    }
}

PROGCACHE_HOT
progcache_kind progcache__kind_of_target(progcache_target target)
{
    switch (target) {
    case PROGCACHE_TARGET_CUBIN: return PROGCACHE_KIND_CUBIN;
    case PROGCACHE_TARGET_PTX: return PROGCACHE_KIND_PTX;
    case PROGCACHE_TARGET_LTOIR: return PROGCACHE_KIND_LTOIR;
    default: return PROGCACHE_KIND_UNKNOWN;
    }
}

/* A .version directive near the start, and no NUL before it. */
static int looks_like_ptx(const unsigned char *data, size_t len)
{
    size_t probe = len < PROGCACHE__PTX_PROBE ? len : PROGCACHE__PTX_PROBE;
    const unsigned char *v = memmem(data, probe, ".version", 8);
    return v && !memchr(data, '\0', (size_t)(v - data));
}

PROGCACHE_HOT
progcache__format progcache__format_of(const unsigned char *data, size_t size)
{
    if (size >= 4) {
        uint32_t magic = progcache__le32(data);
        if (memcmp(data, ELFMAG, SELFMAG) == 0)
            return PROGCACHE__FORMAT_ELF;
        if (magic == PROGCACHE__FATBIN_MAGIC)
            return PROGCACHE__FORMAT_FATBIN;
        if (magic == PROGCACHE__NVVM_MAGIC)
            return PROGCACHE__FORMAT_NVVM;
        if (memcmp(data, PROGCACHE__BITCODE_MAGIC, 4) == 0 ||
            magic == PROGCACHE__BITCODE_WRAPPER_MAGIC)
            return PROGCACHE__FORMAT_BITCODE;
    }
    return looks_like_ptx(data, progcache__text_length(data, size)) ? PROGCACHE__FORMAT_PTX
                                                                   : PROGCACHE__FORMAT_NONE;
}

PROGCACHE_HOT
int progcache__cuda_elf(const unsigned char *data, size_t size)
{
    Elf64_Ehdr eh;
    if (size < sizeof eh)
        return 0;
    memcpy(&eh, data, sizeof eh);
    return eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB &&
           eh.e_machine == EM_CUDA;
}

PROGCACHE_HOT
progcache_kind progcache__kind_of(const unsigned char *data, size_t size)
{
    if (size == 0 || !data)
        return PROGCACHE_KIND_UNKNOWN;
    switch (progcache__format_of(data, size)) {
    case PROGCACHE__FORMAT_ELF:
        return progcache__cuda_elf(data, size) ? PROGCACHE_KIND_CUBIN : PROGCACHE_KIND_UNKNOWN;
    case PROGCACHE__FORMAT_FATBIN: return PROGCACHE_KIND_FATBIN;
    case PROGCACHE__FORMAT_NVVM:
    case PROGCACHE__FORMAT_BITCODE: return PROGCACHE_KIND_LTOIR;
    case PROGCACHE__FORMAT_PTX: return PROGCACHE_KIND_PTX;
    default: return PROGCACHE_KIND_UNKNOWN;
    }
}
