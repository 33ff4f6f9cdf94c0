/* Internal: the structure of PTX text (ptx.c). */
#ifndef PROGCACHE_ARTIFACT_PTX_H
#define PROGCACHE_ARTIFACT_PTX_H

#include "artifact/verdict.h"

/* Check that v's bytes (PTX by progcache__format_of) are whole PTX text:
 * no NUL (but a final one) or control bytes, comments and strings closed,
 * braces balanced, a .target directive. Fills the architecture (.target)
 * and, when wanted, the kernel names (.entry). Returns 1 when whole, 0
 * (with the reason) when not. */
int progcache__ptx_check(progcache__verdict *v);

#endif
