/* Internal: structural checks of cached artifacts (artifact.c). */
#ifndef PROGCACHE_CUDA_ARTIFACT_H
#define PROGCACHE_CUDA_ARTIFACT_H

#include <stddef.h>

#include "progcache/key.h"

/* 0 when data looks like a whole artifact of target; -1 otherwise, with
 * the reason in why (NUL-terminated, cut to why_len). Cheap: reads the
 * headers only. */
int progcache__artifact_check(const unsigned char *data, size_t size, progcache_target target,
                              char *why, size_t why_len);

#endif
