/* progcache_entry_meta: what travels with an entry besides its bytes. The
 * records are a flat, self-delimiting byte string (tag, length, bytes, all
 * lengths bounded), so every store can keep them as one opaque value next
 * to the entry and cover them with the entry's integrity record. */
#include <string.h>

#include "buf.h"
#include "bytes.h"
#include "error.h"
#include "progcache/store.h"

#define RECORD_HEADER 8

int progcache_entry_meta_add(progcache_entry_meta *meta, uint32_t tag, const void *data,
                             size_t len)
{
    if (!meta || (!data && len))
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_entry_meta_add: meta is NULL, or data is NULL "
                                "with len %zu",
                                len);
    size_t used = meta->records.size;
    if (len > PROGCACHE_RECORDS_MAX || used + RECORD_HEADER + len > PROGCACHE_RECORDS_MAX)
        return progcache__error(PROGCACHE_EINVAL,
                                "progcache_entry_meta_add: a record of %zu bytes would take "
                                "the entry's records past %zu bytes",
                                len, PROGCACHE_RECORDS_MAX);
    int rc = progcache__buf_reserve(&meta->records, used + RECORD_HEADER + len);
    if (rc)
        return rc;
    progcache__put_le32(meta->records.data + used, tag);
    progcache__put_le32(meta->records.data + used + 4, (uint32_t)len);
    if (len)
        memcpy(meta->records.data + used + RECORD_HEADER, data, len);
    progcache__buf_set_size(&meta->records, used + RECORD_HEADER + len);
    return PROGCACHE_OK;
}

int progcache_entry_meta_find(const unsigned char **data, size_t *len,
                              const progcache_entry_meta *meta, uint32_t tag)
{
    if (!data || !len || !meta)
        return progcache__error(PROGCACHE_EINVAL, "progcache_entry_meta_find: NULL argument");
    const unsigned char *p = meta->records.data;
    size_t left = meta->records.size;
    while (left >= RECORD_HEADER) {
        uint32_t t = progcache__le32(p), n = progcache__le32(p + 4);
        if (n > left - RECORD_HEADER)
            break; /* not well formed: nothing in it is trusted */
        if (t == tag) {
            *data = p + RECORD_HEADER;
            *len = n;
            return PROGCACHE_OK;
        }
        p += RECORD_HEADER + n;
        left -= RECORD_HEADER + n;
    }
    return PROGCACHE_ENOTFOUND;
}

void progcache_entry_meta_clear(progcache_entry_meta *meta)
{
    if (!meta)
        return;
    meta->kind = PROGCACHE_KIND_UNKNOWN;
    meta->seal = PROGCACHE_SEAL_NONE;
    meta->records.size = 0;
    if (meta->records.data)
        meta->records.data[0] = '\0';
}

void progcache_entry_meta_release(progcache_entry_meta *meta)
{
    if (!meta)
        return;
    progcache_buf_free(&meta->records);
    unsigned int version = meta->version;
    memset(meta, 0, sizeof *meta);
    meta->version = version ? version : PROGCACHE_ENTRY_META_VERSION;
}
