/* Internal: little-endian fields (artifact headers, records, envelopes),
 * and the one bounds check every table and section of a file goes through.
 *
 * Header-only: format recognition on the hit path (artifact/format.c) reads
 * a magic number with these, and a call per field would cost more than the
 * read. The readers do not check bounds themselves: the caller has already
 * compared the offset with the size, or used progcache__fits(). */
#ifndef PROGCACHE_UTIL_BYTES_H
#define PROGCACHE_UTIL_BYTES_H

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

static inline void progcache__put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void progcache__put_le64(unsigned char *p, uint64_t v)
{
    progcache__put_le32(p, (uint32_t)v);
    progcache__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
