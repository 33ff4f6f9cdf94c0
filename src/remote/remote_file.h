/* Internal: a small file a remote tier trusts by its path (credentials, a
 * CA bundle), read whole through the descriptor it was checked on, so
 * what is checked is what is used (docs/SECURITY.md, "Paths that are
 * trusted"; rule 4). */
#ifndef PROGCACHE_REMOTE_FILE_H
#define PROGCACHE_REMOTE_FILE_H

#include <stddef.h>

#include "buf.h"

/* Credentials: owned by this user (or root), and neither readable nor
 * writable by group or others (ssh's rule for private keys). Without it
 * (a CA bundle, public), the file only must not be writable by group or
 * others, nor another user's: whoever could change it could make this
 * process trust a server of theirs. */
#define PROGCACHE__REMOTE_FILE_PRIVATE 0x1u

/*
 * Read path whole into out (at most max bytes; a longer file is refused,
 * never cut). The path is opened through directories only root or this
 * user can change (util/trusted_path.h), non-blocking, never following a
 * link that another user could change; it must be a regular file; then
 * the checks of flags on the same descriptor. label names it in messages
 * ("PROGCACHE_REMOTE_AUTH_FILE"): "<label> <path> <why>; <what to do>".
 * @return PROGCACHE_OK; PROGCACHE_EINVAL when refused, missing, unreadable
 *         or too large (progcache__remote_files_refused counts each),
 *         PROGCACHE_ENOMEM; message set, never the file's bytes.
 */
int progcache__remote_file_read(progcache_buf *out, const char *path, const char *label,
                                size_t max, unsigned int flags);

/* Files this thread could not use so far (on an untrusted path, missing
 * or unreadable, not a regular file, another user's, readable or writable
 * by others, larger than the bound), the shared secret file included
 * (util/config.c reads it by its own rules): the cache
 * reads it around opening its remote tiers and counts the difference in
 * the statistics (remote_files_refused), since an open that fails has no
 * tier to count in. */
unsigned long progcache__remote_files_refused(void);

#endif
