/* Internal: the lowered names record of an entry (names.c; docs/FORMAT.md,
 * "Lowered names"), and finding a name expression's kernel in an entry
 * that has none. */
#ifndef PROGCACHE_ARTIFACT_NAMES_H
#define PROGCACHE_ARTIFACT_NAMES_H

#include <stddef.h>

#include "progcache/common.h"

/* The record's bytes (replacing out's): for each name expression, sorted
 * by its tagged form and without repeats, the expression with its tag
 * ("s:" or "b:", as the key tags it) and a NUL, then its lowered name and
 * a NUL. lowered[i] is the lowered name of exprs[i]. */
int progcache__names_encode(progcache_buf *out, const char *const *exprs,
                            const char *const *lowered, size_t n, int bytes_tag);

/* The pair at *pos (start at 0): *expr gets the tagged expression,
 * *lowered the lowered name, both borrowed from rec; *pos moves past it.
 * 1 for a pair, 0 at the end, -1 when the record is not well formed
 * there (a string not ended inside it, no tag, an empty lowered name). */
int progcache__names_next(const unsigned char *rec, size_t len, size_t *pos, const char **expr,
                          const char **lowered);

/* The lowered name of expr (untagged) with the given tag, or NULL when the
 * record has none or is not well formed (nothing in a malformed record is
 * used). Borrowed from rec. */
const char *progcache__names_find(const unsigned char *rec, size_t len, const char *expr,
                                  int bytes_tag);

/* For an entry without the record: the kernel of expr, from the kernels
 * (entry functions) of the artifact alone, only when that cannot be
 * wrong:
 *  - expr is a plain identifier, an entry of that exact name exists (an
 *    extern "C" kernel), and no other entry could be a C++ function of
 *    that name; or
 *  - it is the program's only name expression, the artifact has exactly
 *    one kernel, and that kernel's mangled name is a function whose
 *    qualified name is expr's (ns::f<...> is _ZN2ns1fI...).
 * kernels holds num_kernels NUL-terminated names one after another
 * (progcache_artifact_info.kernels). Returns the kernel's name (borrowed
 * from kernels) or NULL. */
const char *progcache__names_from_kernels(const char *expr, size_t num_exprs,
                                          const progcache_buf *kernels, size_t num_kernels);

#endif
