/* progcache_buf: caller-held struct, library-held memory. */
#include "buf.h"

#include <string.h>

#include "alloc.h"
#include "error.h"

void progcache_buf_free(progcache_buf *buf)
{
    if (!buf)
        return;
    progcache__free(buf->data);
    buf->data = NULL;
    buf->size = 0;
    buf->capacity = 0;
}

PROGCACHE_HOT
int progcache__buf_reserve(progcache_buf *buf, size_t size)
{
    if (size >= SIZE_MAX / 2)
        return progcache__error(PROGCACHE_ENOMEM, "buffer of %zu bytes is too large", size);
    if (buf->data && buf->capacity > size)
        return PROGCACHE_OK;
    /* Grow by half again so repeated appends stay linear. */
    size_t want = size + 1;
    if (buf->capacity && want < buf->capacity + buf->capacity / 2)
        want = buf->capacity + buf->capacity / 2;
    unsigned char *p = progcache__realloc(buf->data, want);
    if (!p)
        return progcache__error(PROGCACHE_ENOMEM, "out of memory allocating %zu bytes", want);
    buf->data = p;
    buf->capacity = want;
    return PROGCACHE_OK;
}

PROGCACHE_HOT
void progcache__buf_set_size(progcache_buf *buf, size_t size)
{
    buf->size = size;
    buf->data[size] = '\0';
}

int progcache_buf_set(progcache_buf *buf, const void *data, size_t size)
{
    if (!buf)
        return progcache__error(PROGCACHE_EINVAL, "progcache_buf_set: buf is NULL");
    if (!data && size)
        return progcache__error(PROGCACHE_EINVAL, "progcache_buf_set: data is NULL");
    int rc = progcache__buf_reserve(buf, size);
    if (rc)
        return rc;
    if (size)
        memmove(buf->data, data, size);
    progcache__buf_set_size(buf, size);
    return PROGCACHE_OK;
}

int progcache__buf_append(progcache_buf *buf, const void *data, size_t size)
{
    size_t old = buf->data ? buf->size : 0;
    if (size > SIZE_MAX / 2 - old)
        return progcache__error(PROGCACHE_ENOMEM, "buffer too large");
    int rc = progcache__buf_reserve(buf, old + size);
    if (rc)
        return rc;
    if (size)
        memcpy(buf->data + old, data, size);
    progcache__buf_set_size(buf, old + size);
    return PROGCACHE_OK;
}
