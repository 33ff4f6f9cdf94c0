/* Internal: reading one value within the bound of the value plus a small
 * constant (redis_get.c), for a get and for a listing (redis_list.c). */
#ifndef PROGCACHE_STORE_REDIS_GET_H
#define PROGCACHE_STORE_REDIS_GET_H

#include "store/redis/redis_store.h"

/* One read of one value. The caller sets s, name, name_len, id, hmac and
 * listing; the read fills the rest. */
typedef struct progcache__redis_reading {
    progcache__redis_store *s;
    const char *name; /* the Redis name, for the commands and the messages */
    size_t name_len;
    progcache__envelope_id id;         /* the key the value must be for */
    const progcache__envelope_key *hmac; /* the tag to check, or NULL */
    /* 0, a get: a value not read is counted and told, a miss. 1, a
     * listing: nothing counted or told, why says it. */
    int listing;
    char why[512];
    progcache__redis_clock clock; /* one deadline for all the parts */
    unsigned int parts;           /* GETRANGEs the value took */
} progcache__redis_reading;

/* The most a read holds of a value: the largest payload, its envelope and
 * the largest records (docs/REMOTE.md, "Limits"). */
size_t progcache__redis_read_limit(const progcache__redis_store *s);

/* The bytes each GETRANGE asks for. */
size_t progcache__redis_part_size(void);

/*
 * Read and open the value g names into out (the whole envelope, allocated
 * once, after its length was checked against the bound). On PROGCACHE_OK,
 * e says what it holds, its pointers into out->data (out->size is 0: the
 * caller delivers). PROGCACHE_ENOTFOUND: not there, or not one to read
 * (for a get counted and told, the caller's last error left as it was;
 * for a listing g->why says why, empty when it is not there).
 * PROGCACHE_ENOMEM; for a listing PROGCACHE_EREMOTE when a command failed
 * (the message says how).
 */
int progcache__redis_read(progcache_buf *out, progcache__envelope *e,
                          progcache__redis_reading *g);

#endif
