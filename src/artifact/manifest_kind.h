/* Internal: telling a cache entry's kind when it may be a header manifest
 * as well as an artifact (manifest_kind.c). */
#ifndef PROGCACHE_ARTIFACT_MANIFEST_KIND_H
#define PROGCACHE_ARTIFACT_MANIFEST_KIND_H

#include <stddef.h>

#include "progcache/artifact.h"

/* Whether data starts like a header manifest (its magic number). */
int progcache__is_manifest(const unsigned char *data, size_t size);

/* What a cache entry is: a header manifest (kind
 * PROGCACHE_KIND_MANIFEST; valid when its header is one this library
 * writes and its size field matches; no kernels) or whatever
 * progcache__validate finds. Returns as progcache__validate. */
int progcache__inspect_entry(progcache_artifact_info *out, const unsigned char *data, size_t size,
                             int want_names);

#endif
