/* Internal: compile-or-load's name expressions (program_names.c): their
 * lowered names from the compile or from the entry, the record kept with
 * the entry, the result's arrays, the kernels. docs/CUDA.md, "Name
 * expressions". */
#ifndef PROGCACHE_CUDA_PROGRAM_NAMES_H
#define PROGCACHE_CUDA_PROGRAM_NAMES_H

#include "progcache/cuda.h"
#include "progcache/store.h"

/* The lowered names of o's name expressions from a cached entry, into
 * lowered (one NUL-terminated name per expression, in o's order): from
 * the entry's record, else from the artifact's own kernels where that
 * cannot be wrong (progcache__names_from_kernels). 1 when every
 * expression was found, 0 when the program must be compiled to learn
 * them, or an error (out of memory). */
int progcache__names_of_entry(progcache_buf *lowered, const progcache_key_nvrtc_options *o,
                              const progcache_entry_meta *meta, const progcache_buf *artifact);

/* Add the record of o's names (lowered as above) to meta. */
int progcache__names_add_record(progcache_entry_meta *meta, const progcache_key_nvrtc_options *o,
                                const progcache_buf *lowered);

/* Give a result of version 3 the names (lowered as above): num_names,
 * lowered_names, and kernels and functions all NULL. */
int progcache__names_to_result(progcache_program_result *out,
                               const progcache_key_nvrtc_options *o, const progcache_buf *lowered);

/* After the load: fetch each name's kernel (or function), NULL for a
 * name that is not a kernel. PROGCACHE_OK or PROGCACHE_ECUDA. */
int progcache__names_load(progcache_program_result *out, const progcache_cuda_api *api,
                          unsigned int flags);

/* Forget the kernels and functions (after an unload). */
void progcache__names_unloaded(progcache_program_result *out);

#endif
