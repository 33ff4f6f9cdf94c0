/* Internal: is a directory on a file system shared over a network? */
#ifndef PROGCACHE_UTIL_NETFS_H
#define PROGCACHE_UTIL_NETFS_H

/* 1 when the file system of fd is one whose clients may not see each
 * other's byte-range locks (statfs f_type: NFS, FUSE, Lustre, GPFS,
 * CIFS/SMB, 9p, CephFS, AFS, BeeGFS, ...), or when PROGCACHE_FLIGHT_LOCK
 * is "lease"; 0 for a local one, or when PROGCACHE_FLIGHT_LOCK is "range".
 * *name (optional) says which file system, or why, for messages. */
int progcache__netfs_kind(int fd, const char **name);
/* The value of PROGCACHE_FLIGHT_LOCK when it is none of lease, range,
 * auto (and not empty): the caller says it is ignored. Else NULL. */
const char *progcache__netfs_bad_setting(void);
/* The same from statfs alone, whatever PROGCACHE_FLIGHT_LOCK says. */
int progcache__netfs_type(int fd, const char **name);

#endif
