/* Internal: a bounded queue of puts written by one background thread, so a
 * slow store (a remote one) costs the caller a memcpy, not a round trip.
 *
 * Puts are written in the order queued, by one thread started on the first
 * push. The queue holds copies, bounded in bytes; a push that would exceed
 * the bound is refused and the caller decides (the Redis store drops it:
 * a cache may lose a write, it must not block or grow without bound).
 * Free drains: everything queued is written before it returns. */
#ifndef PROGCACHE_REMOTE_PUT_QUEUE_H
#define PROGCACHE_REMOTE_PUT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/artifact.h" /* progcache_kind */

typedef struct progcache__put_queue progcache__put_queue;

/* One put: the key, the value, and what is kept with it (its kind and its
 * records, progcache_entry_meta's). */
typedef struct progcache__put_item {
    const void *key;
    size_t key_len;
    const void *data;
    size_t size;
    progcache_kind kind;
    const void *records;
    size_t records_len;
} progcache__put_item;

/* Writes one queued put; runs on the queue's thread. The item's bytes are
 * the queue's, valid during the call. */
typedef void (*progcache__put_fn)(void *ctx, const progcache__put_item *item);

/* @return PROGCACHE_OK or PROGCACHE_ENOMEM (message set). */
int progcache__put_queue_new(progcache__put_queue **out, progcache__put_fn write, void *ctx,
                             uint64_t max_bytes);

/* Queue a copy of item (key, data and records).
 * @return PROGCACHE_OK when queued; PROGCACHE_ENOMEM when the queue is
 *         full or out of memory, PROGCACHE_EREMOTE when no thread can run
 *         it (could not start one, or this process is a fork() child of the
 *         one that created the queue): nothing was queued, message set. */
int progcache__put_queue_push(progcache__put_queue *q, const progcache__put_item *item);

/* Wait until everything queued before the call has been written. */
void progcache__put_queue_flush(progcache__put_queue *q);

/* Write what is queued, stop the thread, free. NULL-safe. */
void progcache__put_queue_free(progcache__put_queue *q);

#endif
