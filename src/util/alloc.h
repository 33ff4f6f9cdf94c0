/* Internal: the library's allocator. Every allocation goes through these so
 * tests can fail the Nth one (progcache__alloc_fail_after). */
#ifndef PROGCACHE_UTIL_ALLOC_H
#define PROGCACHE_UTIL_ALLOC_H

#include <stddef.h>

void *progcache__malloc(size_t size);
void *progcache__calloc(size_t count, size_t size); /* overflow-checked */
void *progcache__realloc(void *ptr, size_t size);
void progcache__free(void *ptr);
char *progcache__strdup(const char *s);

/* Test hook: make the nth allocation from now on this thread fail (1 = the
 * next one); 0 turns failures off. Thread-local, so tests running in
 * parallel threads do not disturb each other. */
void progcache__alloc_fail_after(long n);

#endif
