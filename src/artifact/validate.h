/* Internal: recognising and checking artifact bytes (validate.c).
 *
 * Used by the admin functions (ls, verify, import) and, on the hit path,
 * by integrity checks before cached bytes are trusted: with want_names 0 a
 * check allocates nothing and reads only headers and tables (for PTX, the
 * text once). Every read is bounds-checked against size. */
#ifndef PROGCACHE_STORE_VALIDATE_H
#define PROGCACHE_STORE_VALIDATE_H

#include <stddef.h>

#include "progcache/admin.h"
#include "progcache/key.h"

/* Fill out's kind, valid, reason and arch (out->version must be set); with
 * want_names also its kernel names (replacing what it held). Returns
 * PROGCACHE_OK, or PROGCACHE_ENOMEM (only with want_names). */
int progcache__validate(progcache_artifact_info *out, const unsigned char *data, size_t size,
                        int want_names);

/* The kind the bytes announce (magic numbers; for a CUBIN, a 64-bit CUDA
 * ELF header; for PTX, a .version directive near the start), without
 * checking that they are a whole artifact. */
progcache_kind progcache__kind_of(const unsigned char *data, size_t size);

/* The kind NVRTC produces for a target. */
progcache_kind progcache__kind_of_target(progcache_target target);

#endif
