/* Internal: the headers of LTO-IR (ltoir.c). */
#ifndef PROGCACHE_ARTIFACT_LTOIR_H
#define PROGCACHE_ARTIFACT_LTOIR_H

#include "artifact/verdict.h"

/* Check an NVVM container's header (v's bytes start with its magic) and
 * read its architecture. Returns 1 when whole, 0 (with the reason). */
int progcache__nvvm_check(progcache__verdict *v);

/* Check LLVM bitcode, raw or in its wrapper (v's bytes start with either
 * magic): the wrapper must point inside the file at bitcode, raw bitcode
 * must be whole 32-bit words. Returns 1 when whole, 0 (with the reason). */
int progcache__bitcode_check(progcache__verdict *v);

#endif
