/* Shared fixtures of the CUDA-layer tests: a small kernel, the path of a
 * cache entry, a store that fails on demand. */
#ifndef PROGCACHE_TEST_CUDA_FIXTURES_H
#define PROGCACHE_TEST_CUDA_FIXTURES_H

#include <stddef.h>

#include "check.h"
#include "progcache/cuda.h"

/* A kernel named "scale", and the options that compile it to sm_90. */
extern const char fixture_scale_source[];
extern const char *const fixture_options[2];

/* A program for fixture_scale_source (CUBIN, sm_90, c++17, kernel
 * "scale") with the given flags. */
progcache_program fixture_program(unsigned int flags);

/* Compile p through cache into r (a MISS on an empty cache) and return a
 * malloc'd copy of the artifact's bytes, its length in *size. */
unsigned char *fixture_compile_copy(progcache_program_result *r, progcache *cache,
                                    const progcache_program *p, size_t *size);

/* The fixture program's CUBIN (NO_LOAD), compiled once in a scratch cache
 * that is gone on return: malloc'd bytes, their length in *size. */
unsigned char *fixture_scale_cubin(size_t *size);

/* <root>/entries/<h[0:2]>/<h[2:]> for key, h = hex SHA-256 of the key:
 * cuda.core's FileStreamProgramCache layout. */
void fixture_entry_path(char *out, size_t len, const char *root, const unsigned char *key);

/* Overwrite (create) a file with bytes, in place (same inode). */
void fixture_write_file(const char *path, const void *data, size_t size);

/* Replace a file with a new one holding bytes (write beside, rename), as
 * another program such as cuda.core writes entries: the file carries none
 * of progcache's own metadata. */
void fixture_replace_file(const char *path, const void *data, size_t size);

/* A store whose get and put fail with PROGCACHE_EIO while *fail_get /
 * *fail_put are set (the ints are the caller's); otherwise it is a working
 * in-memory store. puts counts successful puts. */
typedef struct fixture_store_ctl {
    int fail_get;
    int fail_put;
    int puts;
} fixture_store_ctl;
progcache_store *fixture_flaky_store(fixture_store_ctl *ctl);

#endif
