/* Internal: growing progcache_buf. */
#ifndef PROGCACHE_UTIL_BUF_H
#define PROGCACHE_UTIL_BUF_H

#include "progcache/common.h"

/* Make room for size bytes plus the trailing NUL; keeps the contents.
 * Returns PROGCACHE_OK or PROGCACHE_ENOMEM (with a message). */
int progcache__buf_reserve(progcache_buf *buf, size_t size);

/* Set buf->size and write the trailing NUL (capacity must allow it). */
void progcache__buf_set_size(progcache_buf *buf, size_t size);

/* Append bytes; PROGCACHE_OK or PROGCACHE_ENOMEM. */
int progcache__buf_append(progcache_buf *buf, const void *data, size_t size);

#endif
