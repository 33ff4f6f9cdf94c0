/* The LTO-IR checks. nvrtcGetLTOIR returns an NVVM container (magic
 * 0x7F4E43ED, not LLVM's 'BC' 0xC0DE nor the 0x0B17C0DE bitcode wrapper,
 * which are accepted too). The container's payload is opaque; its header
 * holds the target as SM*10 (900 for sm_90) in the u16 at offset 26, as
 * NVRTC 13.0 writes it. */
#include "artifact/ltoir.h"

#include <string.h>

#include "bytes.h"
#include "artifact/format.h"

#define NVVM_HEADER_SIZE 40
#define BITCODE_WRAPPER_SIZE 20

int progcache__nvvm_check(progcache__verdict *v)
{
    if (v->size < NVVM_HEADER_SIZE)
        return progcache__verdict_invalid(v, "the NVVM IR header is cut short (%zu of %d bytes)",
                                          v->size, NVVM_HEADER_SIZE);
    unsigned arch = progcache__le16(v->data + 26);
    if (progcache__le16(v->data + 24) == 1 && arch % 10 == 0 && arch >= 100 && arch < 10000)
        progcache__verdict_arch(v, "sm_", arch / 10);
    return 1;
}

int progcache__bitcode_check(progcache__verdict *v)
{
    if (progcache__le32(v->data) == PROGCACHE__BITCODE_WRAPPER_MAGIC) {
        if (v->size < BITCODE_WRAPPER_SIZE)
            return progcache__verdict_invalid(v, "the bitcode wrapper header is cut short");
        uint32_t offset = progcache__le32(v->data + 8), len = progcache__le32(v->data + 12);
        if (!progcache__fits(offset, len, 1, v->size) || len < 4 ||
            memcmp(v->data + offset, PROGCACHE__BITCODE_MAGIC, 4))
            return progcache__verdict_invalid(
                v, "the bitcode wrapper points outside the %zu-byte file", v->size);
        return 1;
    }
    /* LLVM bitcode is a stream of 32-bit words. */
    if (v->size % 4)
        return progcache__verdict_invalid(
            v, "LLVM bitcode of %zu bytes, not a whole number of 32-bit words", v->size);
    return 1;
}
