/* Internal: walking the entries of a cache directory (store_file_admin.c),
 * shared by the admin functions and the archive code (src/archive/). */
#ifndef PROGCACHE_STORE_FILE_ADMIN_H
#define PROGCACHE_STORE_FILE_ADMIN_H

#include <sys/stat.h>

#include "progcache/admin.h"
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

/* verify (file_reseal.c): item's entry, read and found good, has no seal:
 * set entry->unsealed, and with PROGCACHE_VERIFY_SEAL in flags seal it
 * when it is this user's own and a whole artifact of a known kind. */
void progcache__file_verify_unsealed(file_store *fs, file_walk_item *item, unsigned int flags);

/* Visit every entry in name order; flags are PROGCACHE_ENTRIES_*. Returns
 * PROGCACHE_OK, the callback's non-zero value, or PROGCACHE_ENOMEM. */
int progcache__file_walk(file_store *fs, unsigned int flags, file_walk_fn fn, void *ctx);

/* The file store behind store, or PROGCACHE_EINVAL naming the function. */
int progcache__admin_file(const progcache_file *file, const char *fn);

#endif
