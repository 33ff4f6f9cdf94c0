/* Internal: reading the little-endian fields of artifact headers, and the
 * one bounds check every table and section goes through.
 *
 * Header-only: format recognition on the hit path (format.c) reads a magic
 * number with these, and a call per field would cost more than the read.
 * The readers do not check bounds themselves: the caller has already
 * compared the offset with the size, or used progcache__fits(). */
#ifndef PROGCACHE_ARTIFACT_BYTES_H
#define PROGCACHE_ARTIFACT_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* Whether count items of entsize bytes starting at offset lie inside size
 * bytes, without overflow for any inputs (they come from the file). */
static inline int progcache__fits(uint64_t offset, uint64_t count, uint64_t entsize, size_t size)
{
    if (offset > size)
        return 0;
    if (count == 0)
        return 1;
    return entsize != 0 && (size - offset) / entsize >= count;
}

static inline uint16_t progcache__le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t progcache__le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t progcache__le64(const unsigned char *p)
{
    return (uint64_t)progcache__le32(p) | (uint64_t)progcache__le32(p + 4) << 32;
}

#endif
