/* What every remote tier's get and put share (rules in remote_tier.h). */
#include "remote/remote_tier.h"

#include <string.h>

#include "error.h"

int progcache__remote_put_begin(progcache__put_item *item, const progcache__remote_put *put,
                                progcache__remote_health *h, const progcache__remote_voice *v,
                                progcache__put_queue *q, uint64_t max_size)
{
    *item = (progcache__put_item){put->key, put->key_len, put->data, put->size,
                                  PROGCACHE_KIND_UNKNOWN, NULL, 0};
    if (put->meta) {
        item->kind = put->meta->kind;
        item->records = put->meta->records.data;
        item->records_len = put->meta->records.size;
    }
    /* Refused before they are copied into the queue; readers would refuse
     * them anyway. */
    if (put->size > max_size) {
        progcache__remote_not_stored(h, v, PROGCACHE__CAUSE_TOO_LARGE,
                                     "a value of %zu bytes is more than max_artifact_size (%llu "
                                     "bytes)",
                                     put->size, (unsigned long long)max_size);
        return 0;
    }
    if (item->records_len > PROGCACHE_RECORDS_MAX) {
        progcache__remote_not_stored(h, v, PROGCACHE__CAUSE_TOO_LARGE,
                                     "the entry's records are %zu bytes, more than "
                                     "PROGCACHE_RECORDS_MAX (%zu)",
                                     item->records_len, (size_t)PROGCACHE_RECORDS_MAX);
        return 0;
    }
    if (!q)
        return 1;
    if (progcache__remote_is_off(h, progcache__remote_now_ms()))
        return 0;
    progcache__error_saved saved;
    progcache__error_save(&saved);
    int rc = progcache__put_queue_push(q, item);
    if (rc == PROGCACHE_ENOMEM) {
        progcache__remote_count(h, PROGCACHE__RC_DROPPED);
        progcache__remote_tell(h, v, PROGCACHE__CAUSE_DROPPED, "background write dropped: %s",
                               progcache_error_last());
    }
    progcache__error_restore(&saved);
    return rc == PROGCACHE_EREMOTE; /* no queue thread: write here */
}

int progcache__remote_deliver(progcache_buf *out, progcache_entry_meta *meta,
                              const progcache__envelope *e)
{
    if (meta) {
        int rc = progcache__buf_reserve(&meta->records, e->records_len);
        if (rc)
            return rc;
        if (e->records_len)
            memcpy(meta->records.data, e->records, e->records_len);
        progcache__buf_set_size(&meta->records, e->records_len);
        meta->kind = e->kind;
        /* Format 1 bound nothing to the key without a secret, and carried
         * no kind or records: only format 2 says "these bytes, for this
         * key". */
        meta->seal = e->version >= 2 ? PROGCACHE_SEAL_MATCHED : PROGCACHE_SEAL_NONE;
    }
    if (e->size)
        memmove(out->data, e->payload, e->size);
    progcache__buf_set_size(out, e->size);
    return PROGCACHE_OK;
}
