/* Internal: checking artifact bytes of any format (inspect.c).
 *
 * Used by the admin functions (ls, verify, import), by the file store's
 * integrity check of an unsealed entry and by its seal (the "whole" flag),
 * and by compile-or-load's check of unsealed hits (expect.c): with
 * want_names 0 a check allocates nothing and reads only headers and tables
 * (for PTX, the text once). Every read is bounds-checked against size. */
#ifndef PROGCACHE_ARTIFACT_INSPECT_H
#define PROGCACHE_ARTIFACT_INSPECT_H

#include <stddef.h>

#include "progcache/artifact.h"

/* Fill out's kind, valid, reason and arch (out->version must be set); with
 * want_names also its kernel names (replacing what it held). Returns
 * PROGCACHE_OK, or PROGCACHE_ENOMEM (only with want_names). */
int progcache__validate(progcache_artifact_info *out, const unsigned char *data, size_t size,
                        int want_names);

#endif
