/* Internal: the structure of a fat binary (fatbin.c). */
#ifndef PROGCACHE_ARTIFACT_FATBIN_H
#define PROGCACHE_ARTIFACT_FATBIN_H

#include "artifact/verdict.h"

/* Check that v's bytes (which start with the fatbin magic) are whole fat
 * binaries, one after another, perhaps padded with zeros: each header's
 * size and each entry inside it. Fills the architectures of the entries.
 * Returns 1 when whole, 0 (with the reason) when not. */
int progcache__fatbin_check(progcache__verdict *v);

#endif
