/* Internal: who a cache directory belongs to, and the modes of what the
 * file store makes in it (docs/SECURITY.md, docs/SHARED.md). One struct,
 * filled at open, that every file of store/file/ and the statistics file
 * ask: a private cache's directories are 0700 and its files 0600, a group
 * cache's directories 02770, its entries 0640 and its state 0660, whatever
 * the process's umask (the modes are set with fchmod after each create). */
#ifndef PROGCACHE_STORE_FILE_PERM_H
#define PROGCACHE_STORE_FILE_PERM_H

#include <sys/stat.h>
#include <sys/types.h>

typedef struct file_perm {
    uid_t euid;
    uid_t owner; /* the cache directory's owner: euid, or another user's
                  * (then nothing is written, and its settings file is
                  * that user's to decide) */
    int group;  /* 1: a group-shared cache (PROGCACHE_FILE_SHARED_GROUP or
                 * PROGCACHE_SHARED_GROUP) */
    gid_t team; /* its group; (gid_t)-1 for a private cache */
    int keep;   /* 1: change no mode (a team's directory opened as a
                 * private cache: tightening it would lock the team out) */
} file_perm;

/* The modes of what the store makes. */
static inline mode_t progcache__perm_dir_mode(const file_perm *p)
{
    return p->group ? 02770 : 0700;
}
static inline mode_t progcache__perm_entry_mode(const file_perm *p)
{
    return p->group ? 0640 : 0600;
}
static inline mode_t progcache__perm_state_mode(const file_perm *p)
{
    return p->group ? 0660 : 0600;
}
/* The group a new directory is given ((gid_t)-1: the default). */
static inline gid_t progcache__perm_new_gid(const file_perm *p)
{
    return p->group ? p->team : (gid_t)-1;
}

/* Whether nobody but a file's owner can write it (issue 29): no write bit
 * for others, and none for the group unless group is set and the file is
 * of the team's group (the group's file in a group-trusting open). A file
 * of this user's that the group may write (progcache/lock, state, stats in
 * a team's cache) is any member's to fill and rename: what decides what is
 * loaded (entries, their sidecar seals, NVRTC records, the settings) is
 * never trusted as this user's on that mode. */
static inline int progcache__perm_sole_writer(const file_perm *p, const struct stat *st,
                                              int group)
{
    if (st->st_mode & S_IWOTH)
        return 0;
    return !(st->st_mode & S_IWGRP) || (group && p->group && st->st_gid == p->team);
}

/* Whether a settings or state file of progcache/ (config, state, stats,
 * lock, flight) may be used: nobody but its owner can write it, and its
 * owner is this user, root or the cache directory's owner, or, in a group
 * cache, it is of the team's group. Otherwise 0 with why (len bytes) saying whose it is. */
int progcache__perm_file_ok(const file_perm *p, const struct stat *st, char *why, size_t len);

/* A file or directory of ours, held open as fd, with st its fstat: set
 * its permission bits to want when they differ (a private cache's found
 * 0777 is tightened, a group cache's 0755 opened to the group); st's mode
 * is updated. 1 when it was changed, 0 when already right, not ours or
 * p->keep (left alone), -1 when the chmod failed. */
int progcache__perm_fix(const file_perm *p, int fd, struct stat *st, mode_t want);

#endif
