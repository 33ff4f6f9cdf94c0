/* Internal: the structure of a CUBIN, NVRTC's CUDA ELF file (cubin.c). */
#ifndef PROGCACHE_ARTIFACT_CUBIN_H
#define PROGCACHE_ARTIFACT_CUBIN_H

#include "artifact/verdict.h"

/* Check that v's bytes (which start with the ELF magic) are a whole CUDA
 * ELF file: header, program headers, section table, section name and
 * symbol string tables all inside the file. Fills the architecture and,
 * when wanted, the kernel names. A non-CUDA ELF file sets out->kind to
 * UNKNOWN. Returns 1 when whole, 0 (with the reason) when not. */
int progcache__cubin_check(progcache__verdict *v);

#endif
