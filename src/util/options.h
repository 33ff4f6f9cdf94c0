/* Internal: the one rule for versioned structs (include/progcache/common.h,
 * "Versioned structs"). */
#ifndef PROGCACHE_UTIL_OPTIONS_H
#define PROGCACHE_UTIL_OPTIONS_H

#include <stddef.h>

/* Load a caller's versioned struct into dst, which the caller has set to
 * the defaults (its _init function). Every version from 1 to current is
 * accepted: sizes[v] is the struct's size in version v (sizes[0] is not
 * used), and only the first sizes[version] bytes of src are read, so a
 * caller built against an older header, whose struct is shorter, keeps the
 * defaults for the fields it did not know. A version of 0 (never
 * initialised) or newer than current is refused with PROGCACHE_EINVAL and
 * a message naming the function fn and the struct's type name
 * ("progcache_file_options"). src NULL keeps the defaults. */
int progcache__options_load(void *dst, const void *src, const size_t *sizes,
                            unsigned int current, const char *fn, const char *name);

/* The version rule alone, for a struct the caller hands in to be filled
 * (a result: out) or checked in place: s's version must be 1 to current.
 * Else PROGCACHE_EINVAL with the one message every versioned struct gets,
 * naming the function fn, the argument what ("out", "meta") and the
 * struct's type name ("progcache_prune_result"; its _INIT macro is that
 * in capitals). */
int progcache__version_check(const void *s, unsigned int current, const char *fn,
                             const char *what, const char *name);
/* The same rule for a struct that has no _init() function (a vtable, its
 * ops): how says what to start from ("start from PROGCACHE_STORE_INIT"). */
int progcache__version_check_how(const void *s, unsigned int current, const char *fn,
                                 const char *what, const char *name, const char *how);

/* Set a versioned struct of size bytes to its defaults: zeros, and version
 * (its first member) set. The body of every _init() function. NULL-safe. */
void progcache__struct_init(void *p, size_t size, unsigned int version);

/* The version a struct says it is (its first member). */
#define PROGCACHE__VERSION_OF(p) (*(const unsigned int *)(const void *)(p))

#endif
