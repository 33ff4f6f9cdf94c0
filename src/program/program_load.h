/* Internal: loading compile-or-load's artifact with the driver
 * (program_load.c). */
#ifndef PROGCACHE_CUDA_PROGRAM_LOAD_H
#define PROGCACHE_CUDA_PROGRAM_LOAD_H

#include "progcache/cuda.h"

/* Load out->artifact (library API, or the module API with
 * PROGCACHE_PROGRAM_MODULE_API), fetch program->kernel and, for a result
 * of version 3, the kernel of each name expression. On failure nothing
 * stays loaded, and *refused says whether the driver rejected the bytes
 * themselves (a reason to heal the entry, not a problem of the caller). */
int progcache__program_load(progcache_program_result *out, const progcache_program *program,
                            int *refused);

/* With PROGCACHE_PROGRAM_NO_LOAD nothing is loaded, so nothing asked the
 * driver for program->kernel: the artifact's own kernels (CUBIN symbols,
 * PTX .entry) are read instead, and a kernel that is not among them fails
 * the call (PROGCACHE_EINVAL) naming it and those there are. An LTO-IR, a
 * fatbin, or no kernel: PROGCACHE_OK. */
int progcache__program_check_kernel(const progcache_program_result *out,
                                    const progcache_program *program);

/* Unload what out holds (NULL-safe api: nothing to unload without one). */
void progcache__program_unload(const progcache_cuda_api *api, progcache_program_result *out);

#endif
