/* Internal: recognising an artifact's format from its first bytes
 * (format.c), the one place that knows the magic numbers.
 *
 * Recognition only: whether the bytes are a whole artifact is for the
 * format's checker (cubin.c, ptx.c, ltoir.c, fatbin.c). progcache__kind_of
 * is on the hit path (the file store asks it on every hit): it reads a
 * few bytes, and for text at most PROGCACHE__PTX_PROBE of them. */
#ifndef PROGCACHE_ARTIFACT_FORMAT_H
#define PROGCACHE_ARTIFACT_FORMAT_H

#include <stddef.h>

#include "progcache/artifact.h"
#include "progcache/key.h"

/* Magic numbers, as the little-endian u32 at offset 0 (progcache__le32). */
#define PROGCACHE__FATBIN_MAGIC 0xBA55ED50u
/* nvrtcGetLTOIR's NVVM container (not LLVM bitcode). */
#define PROGCACHE__NVVM_MAGIC 0x7F4E43EDu
/* LLVM's bitcode wrapper header, which points at the bitcode inside. */
#define PROGCACHE__BITCODE_WRAPPER_MAGIC 0x0B17C0DEu
/* Raw LLVM bitcode starts with these 4 bytes. */
#define PROGCACHE__BITCODE_MAGIC "BC\xc0\xde"
/* A PTX file says .version within this many bytes of its start. */
#define PROGCACHE__PTX_PROBE 4096

/* The format the bytes announce. An ELF file is FORMAT_ELF whatever its
 * machine: progcache__cuda_elf tells whether it is a CUBIN. */
typedef enum progcache__format {
    PROGCACHE__FORMAT_NONE,
    PROGCACHE__FORMAT_ELF,
    PROGCACHE__FORMAT_FATBIN,
    PROGCACHE__FORMAT_NVVM,
    PROGCACHE__FORMAT_BITCODE, /* raw bitcode or its wrapper */
    PROGCACHE__FORMAT_PTX
} progcache__format;

/* The format of size bytes at data (size > 0, data not NULL). */
progcache__format progcache__format_of(const unsigned char *data, size_t size);

/* Whether size bytes at data start with a CUBIN's ELF header: 64-bit,
 * little-endian, machine EM_CUDA (the ELF magic itself is not checked). */
int progcache__cuda_elf(const unsigned char *data, size_t size);

/* The length of PTX text in size bytes (size > 0): NVRTC's PTX ends in a
 * NUL that is not part of the text. */
static inline size_t progcache__text_length(const unsigned char *data, size_t size)
{
    return data[size - 1] == '\0' ? size - 1 : size;
}

/* The kind the bytes announce (magic numbers; for a CUBIN, a 64-bit CUDA
 * ELF header; for PTX, a .version directive near the start), without
 * checking that they are a whole artifact. NULL or empty: UNKNOWN. */
progcache_kind progcache__kind_of(const unsigned char *data, size_t size);

/* The kind NVRTC produces for a target. */
progcache_kind progcache__kind_of_target(progcache_target target);

#endif
