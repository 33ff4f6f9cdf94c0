/* Internal: the verdict a format checker builds (verdict.c): the bytes
 * under check and the progcache_artifact_info that collects why they are
 * not valid, their architecture and their kernel names.
 *
 * Shared by the checkers of every format (cubin.c, ptx.c, ltoir.c,
 * fatbin.c) and filled in by progcache__validate (inspect.c). Names are
 * collected only with want_names: without, nothing here allocates. */
#ifndef PROGCACHE_ARTIFACT_VERDICT_H
#define PROGCACHE_ARTIFACT_VERDICT_H

#include <stddef.h>

#include "error.h" /* PROGCACHE_PRINTF, PROGCACHE_COLD */
#include "progcache/artifact.h"

typedef struct progcache__verdict {
    const unsigned char *data;
    size_t size;
    progcache_artifact_info *out;
    int want_names;
    int failed; /* out of memory collecting names */
} progcache__verdict;

/* Record why the bytes are not valid (printf-style, cut to fit out->reason)
 * and clear out->valid. Returns 0, so a checker can `return` it. */
int progcache__verdict_invalid(progcache__verdict *v, const char *fmt, ...)
    PROGCACHE_PRINTF(2, 3) PROGCACHE_COLD;

/* Add a kernel name of len bytes (not NUL-terminated) when names are
 * wanted; on failure to allocate, set v->failed. */
void progcache__verdict_name(progcache__verdict *v, const char *name, size_t len);

/* Add prefix and value ("sm_" 90) to out->arch's comma-separated list,
 * unless it is there already or the list is full. */
void progcache__verdict_arch(progcache__verdict *v, const char *prefix, unsigned value);

#endif
