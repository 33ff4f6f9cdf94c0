/* Internal: what the PCH tier (src/pch/pch_*.c) needs of nvrtc.c beyond
 * progcache_nvrtc_compile: the options exactly as NVRTC gets them, and a
 * compile with PCH options in front and its PCH status after. */
#ifndef PROGCACHE_CUDA_NVRTC_H
#define PROGCACHE_CUDA_NVRTC_H

#include <stddef.h>

#include "progcache/cuda.h"

/* NVRTC's options for program, as progcache_nvrtc_compile passes them:
 * the program's, then "-dlto" for LTO-IR when none asks for it. An array
 * of borrowed strings (free it with progcache__free), *argc its length;
 * NULL when out of memory (message set). */
const char **progcache__nvrtc_argv(const progcache_key_nvrtc_options *program, size_t *argc);

/* PCH options for one in-process compile. */
typedef struct progcache__nvrtc_pch {
    const char *pre[2]; /* put before the program's options (NVRTC wants them first) */
    size_t num_pre;
    int no_output;      /* fetch no artifact: a PCH is all this compile is for */
    /* Out: nvrtcGetPCHCreateStatus after the compile (an nvrtcResult), and
     * the heap a creation needs when that is NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED. */
    int create_status;
    size_t heap_required;
} progcache__nvrtc_pch;

/* progcache_nvrtc_compile with pch's options; program is taken as loaded
 * (the caller's version already checked). */
int progcache__nvrtc_compile_pch(progcache_buf *out, progcache_buf *log, progcache_buf *lowered,
                                 const progcache_key_nvrtc_options *program,
                                 progcache__nvrtc_pch *pch);

#endif
