/* Internal: opening a file that is trusted by its path (the PCH helper it
 * runs, the remote tier's secret file), so that what is checked is what is
 * used (docs/SECURITY.md, "Paths that are trusted").
 *
 * A check by path (stat, then open or exec by the same name) leaves a
 * window: whoever can write a directory on the path can swap a link or a
 * file between the two. So the path is walked from / with openat, one
 * component at a time, each opened without following links (O_PATH |
 * O_NOFOLLOW) and checked on its descriptor:
 *   - every directory passed is owned by root or this user and writable by
 *     nobody else, or is sticky (as /tmp) and then what is found in it is
 *     owned by root or this user (nobody else can rename it away);
 *   - a symbolic link is followed only from such a directory (whoever
 *     could change the link could change a file there), at most 40; with
 *     PROGCACHE__TRUSTED_NO_LINK, never at the last component;
 *   - ".." goes to the real parent, which is checked too.
 * The caller checks the file itself on the descriptor returned and uses
 * that descriptor: it reads from it, or runs it (/proc/self/fd/N). */
#ifndef PROGCACHE_UTIL_TRUSTED_PATH_H
#define PROGCACHE_UTIL_TRUSTED_PATH_H

#include <stddef.h>
#include <sys/stat.h>

/* Refuse a symbolic link at the last component. */
#define PROGCACHE__TRUSTED_NO_LINK 0x1u
/* Open a regular file for reading (O_RDONLY | O_NONBLOCK); without it, or
 * for anything but a regular file (never opened: a FIFO cannot block, a
 * device is never read), the descriptor is O_PATH. */
#define PROGCACHE__TRUSTED_READ 0x2u

/* Open path (absolute, or relative to the working directory) as above.
 * 0 with *fd (O_CLOEXEC) and *st (its fstat); -1 with errno set and why
 * saying which component and why ("the directory /srv/x is writable by
 * other users (mode 0777)", "/srv/x/helper is a symbolic link",
 * "/srv/x: No such file or directory"). */
int progcache__trusted_open(int *fd, struct stat *st, const char *path, unsigned int flags,
                            char *why, size_t why_len);

#endif
