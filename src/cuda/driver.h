/* Internal: the CUDA driver, loaded at run time (driver.c). */
#ifndef PROGCACHE_CUDA_DRIVER_H
#define PROGCACHE_CUDA_DRIVER_H

#include "progcache/cuda.h"
#include "error.h"

/* Record "<what> failed: <NAME> (<text>)" for result and return
 * PROGCACHE_ECUDA. what is a printf format. */
int progcache__cuda_error(CUresult result, const char *fmt, ...) PROGCACHE_PRINTF(2, 3)
    PROGCACHE_COLD;

/* The table if progcache_cuda_load() has already succeeded in this process,
 * else NULL. Never loads anything (for release paths, which must not start
 * the driver just to find nothing to unload). */
const progcache_cuda_api *progcache__cuda_loaded(void);

/* Test hook: load the driver from path instead of "libcuda.so.1". Only
 * effective before the first progcache_cuda_load() of the process. */
void progcache__cuda_set_library_path(const char *path);

#endif
