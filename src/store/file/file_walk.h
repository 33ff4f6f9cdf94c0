/* Internal: walking the entries of a cache directory (file_walk.c): the
 * tier's foreach, and what the cache directory's room (src/dir/: listing,
 * verify, export) builds on. */
#ifndef PROGCACHE_STORE_FILE_WALK_H
#define PROGCACHE_STORE_FILE_WALK_H

#include <sys/stat.h>

#include "progcache/store.h"
#include "store/file/file_store.h"

/* What the walker hands to its callback besides the public entry: the
 * open file it read (fd, or -1 without PROGCACHE_ENTRIES_READ) and its
 * stat, for checks that need the inode (digest attribute, remove-if-same). */
typedef struct file_walk_item {
    progcache_entry *entry;
    int shard;
    const char *file_name; /* the 62 digits after the shard */
    int fd;
    const struct stat *st;
} file_walk_item;

typedef int (*file_walk_fn)(void *ctx, file_walk_item *item);

/* Visit every entry in name order; flags are PROGCACHE_ENTRIES_*. Returns
 * PROGCACHE_OK, the callback's non-zero value, or PROGCACHE_ENOMEM. */
int progcache__file_walk(file_store *fs, unsigned int flags, file_walk_fn fn, void *ctx);

/* Names the walks of this process stat'ed by name (fstatat) rather than
 * through the entry they opened (test hook: a walk stats an entry when it
 * visits it, not its whole shard before the first visit). */
uint64_t progcache__file_walk_names_statted(void);

/* progcache_file_foreach (progcache/entries.h) and the tier's foreach: fn
 * and flags checked, then the walk. */
int progcache__file_foreach(file_store *fs, unsigned int flags, progcache_entry_fn fn,
                            void *ctx);

/* progcache_file_read_entry (progcache/entries.h) on an open cache. */
int progcache__file_read_name(progcache_buf *out, file_store *fs, const char *name);

#endif
