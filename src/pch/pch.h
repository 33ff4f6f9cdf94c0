/* Internal: the PCH tier as compile-or-load sees it (docs/CUDA.md,
 * "Precompiled headers"; its parts are src/pch/pch_*.c). */
#ifndef PROGCACHE_CUDA_PCH_H
#define PROGCACHE_CUDA_PCH_H

#include "progcache/cuda.h"

/* Compile program->nvrtc as progcache_nvrtc_compile would (same artifact,
 * lowered names and result), with a precompiled header kept in cache's directory when
 * the program starts with a heavy #include block (the tier decides when;
 * PROGCACHE_PROGRAM_NO_PCH and PROGCACHE_PCH=0 turn it off). The tier's own
 * failures never fail the compile: they are counted (progcache_stats
 * pch_*) and told to program->log, and the compile runs without a PCH.
 * how says where the key's NVRTC version came from (nvrtc_record.h): NVRTC
 * is loaded and checked (progcache__nvrtc_for_compile) before any compile
 * in this process, and not at all for one the helper runs when the
 * version came from the record of the NVRTC the helper loads. */
int progcache__pch_compile(progcache_buf *out, progcache_buf *log, progcache_buf *lowered,
                           progcache *cache, const progcache_program *program,
                           const char *how);

#endif
