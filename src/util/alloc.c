/* The one place the library calls malloc. */
#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local long fail_countdown;

void progcache__alloc_fail_after(long n) { fail_countdown = n; }

static int should_fail(void)
{
    if (fail_countdown <= 0)
        return 0;
    return --fail_countdown == 0;
}

void *progcache__malloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *progcache__calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *progcache__realloc(void *ptr, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void progcache__free(void *ptr) { free(ptr); }

char *progcache__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = progcache__malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}
