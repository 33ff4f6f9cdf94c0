/* verify's word on the entries without a seal, and `verify --seal`
 * (issue 35). Every entry progcache stores is sealed (file_seal.c); one
 * without a seal is cuda.core's, another program's, or a copy that lost
 * its extended attributes on the way (`cp -r`, rsync without -X, a backup
 * tool): its bytes are then checked by structure on every hit, and the
 * records kept with it (lowered names) are gone. verify names each one;
 * with PROGCACHE_VERIFY_SEAL it seals those it may vouch for. */
#include <fcntl.h>

#include "dir/dir_reseal.h"
#include "progcache/entries.h"
#include "store/file/file_stats.h"
#include "store/file/file_store.h"

void progcache__file_verify_unsealed(file_store *fs, file_walk_item *item, unsigned int flags)
{
    progcache_entry *e = item->entry;
    if (!e->data || e->error || e->removed)
        return;
    e->unsealed = PROGCACHE_UNSEALED;
    if (!(flags & PROGCACHE_VERIFY_SEAL) || (fs->flags & PROGCACHE_FILE_READONLY))
        return;
    /* Only the owner can set an entry's xattr or mode; and another user's
     * entry is not this user's to vouch for (docs/SECURITY.md). */
    if (item->st->st_uid != fs->euid) {
        e->unsealed = PROGCACHE_UNSEALED_NOT_OWN;
        return;
    }
    /* A seal says "the bytes put under this key": only bytes the check has
     * just found to be a whole artifact of their kind are vouched for. */
    const progcache_artifact_info *a = e->artifact;
    if (!a || a->kind == PROGCACHE_KIND_UNKNOWN || !a->valid) {
        e->unsealed = PROGCACHE_UNSEALED_UNCHECKED;
        return;
    }
    /* Through the file the bytes were read from: a put that replaced the
     * entry meanwhile renamed a new file (sealed by its writer) over the
     * name, and this seal goes to the old one. The seal carries no records
     * (they were lost with the attributes: a hit learns the names again).
     * Then read back, since the xattr is best effort in file_seal.c. */
    int whole = 0;
    if (progcache__file_seal(fs, item->fd, e->name, e->data, (size_t)e->size, NULL) == 0 &&
        progcache__file_seal_check(fs, item->fd, e->name, e->data, (size_t)e->size, NULL, &whole,
                                   NULL) == FILE_SEAL_MATCH) {
        e->unsealed = PROGCACHE_UNSEALED_SEALED;
        progcache__stats_add(fs->stats, PROGCACHE__ENTRIES_RESEALED, 1);
    } else {
        e->unsealed = PROGCACHE_UNSEALED_FAILED;
    }
}
