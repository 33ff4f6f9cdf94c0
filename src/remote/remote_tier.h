/* Internal: the parts of a remote tier's get and put that do not depend
 * on its server: the front of a put (checks, back-off, the queue) and the
 * hand-over of an opened envelope to the caller. A tier (store/redis,
 * store/http) keeps what talks to its server: reading and writing one
 * value. */
#ifndef PROGCACHE_REMOTE_TIER_H
#define PROGCACHE_REMOTE_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/store.h" /* progcache_entry_meta */

#include "buf.h"
#include "remote/envelope.h"
#include "remote/put_queue.h"
#include "remote/remote_health.h"

/* A put as the vtable's put_meta receives it. */
typedef struct progcache__remote_put {
    const void *key;
    size_t key_len;
    const void *data;
    size_t size;
    const progcache_entry_meta *meta; /* NULL: kind unknown, no records */
} progcache__remote_put;

/*
 * The front of a put: item filled from put; a value over max_size or
 * records over PROGCACHE_RECORDS_MAX refused (counted, told: never an
 * error, a put is a hint); nothing while the tier backs off; else queued
 * on q (a full queue: dropped, counted, told).
 * @return 1 when the caller must write item now, itself (no queue, or no
 *         queue thread: a fork() child); 0 when done.
 */
int progcache__remote_put_begin(progcache__put_item *item, const progcache__remote_put *put,
                                progcache__remote_health *h, const progcache__remote_voice *v,
                                progcache__put_queue *q, uint64_t max_size);

/* Hand what an opened envelope held to the caller: kind, records and seal
 * state into meta (when not NULL), then the payload moved to the front of
 * out, where the whole value was read. PROGCACHE_OK or PROGCACHE_ENOMEM. */
int progcache__remote_deliver(progcache_buf *out, progcache_entry_meta *meta,
                              const progcache__envelope *e);

#endif
