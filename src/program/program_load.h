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

/* Unload what out holds (NULL-safe api: nothing to unload without one). */
void progcache__program_unload(const progcache_cuda_api *api, progcache_program_result *out);

#endif
