/* Internal to src/dir/: verify's word on the entries without a seal
 * (dir_reseal.c), for dir_admin.c's verify. */
#ifndef PROGCACHE_DIR_RESEAL_H
#define PROGCACHE_DIR_RESEAL_H

#include "store/file/file_walk.h"

/* item's entry, read and found good, has no seal: set entry->unsealed, and
 * with PROGCACHE_VERIFY_SEAL in flags seal it when it is this user's own
 * and a whole artifact of a known kind. */
void progcache__file_verify_unsealed(file_store *fs, file_walk_item *item, unsigned int flags);

#endif
