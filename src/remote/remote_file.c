/* A remote tier's trusted small files (rules in remote_file.h). */
#include "remote/remote_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "fs.h"
#include "trusted_path.h"

static _Thread_local unsigned long refused;

unsigned long progcache__remote_files_refused(void)
{
    return refused + progcache__config_secrets_refused();
}

static int refuse(const char *label, const char *path, const char *why, const char *fix)
{
    return progcache__error(PROGCACHE_EINVAL, "%s %s %s; %s", label, path, why, fix);
}

/* The checks on the descriptor: what the file is, whose, who may touch it. */
static int check(const struct stat *st, const char *path, const char *label, unsigned int flags)
{
    char why[160];
    if (!S_ISREG(st->st_mode))
        return refuse(label, path, "is not a regular file", "give a file");
    if (st->st_uid != geteuid() && st->st_uid != 0) {
        snprintf(why, sizeof why, "belongs to another user (uid %lu)",
                 (unsigned long)st->st_uid);
        return refuse(label, path, why,
                      "use a file of your own (another user could change what this program "
                      "trusts)");
    }
    mode_t open_to = (flags & PROGCACHE__REMOTE_FILE_PRIVATE)
                         ? (S_IRWXG | S_IRWXO) & ~(mode_t)(S_IXGRP | S_IXOTH)
                         : (S_IWGRP | S_IWOTH);
    if (st->st_mode & open_to) {
        snprintf(why, sizeof why, "can be %s by %s (mode %04o)",
                 (st->st_mode & open_to & (S_IRGRP | S_IROTH)) ? "read" : "written",
                 (st->st_mode & open_to & (S_IRWXO)) ? "every user" : "its group",
                 (unsigned)(st->st_mode & 07777));
        return refuse(label, path, why,
                      (flags & PROGCACHE__REMOTE_FILE_PRIVATE)
                          ? "it holds credentials: make it private (chmod 600 FILE)"
                          : "make it writable by its owner only (chmod go-w FILE)");
    }
    return PROGCACHE_OK;
}

int progcache__remote_file_read(progcache_buf *out, const char *path, const char *label,
                                size_t max, unsigned int flags)
{
    int fd;
    struct stat st;
    char why[600];
    out->size = 0;
    if (progcache__trusted_open(&fd, &st, path, PROGCACHE__TRUSTED_READ, why, sizeof why) != 0) {
        int err = errno;
        refused++; /* as every other file this read cannot use: below */
        if (err == EPERM)
            return refuse(label, path, "cannot be trusted", why);
        return progcache__error_errno(PROGCACHE_EINVAL, err, "%s %s cannot be opened (%s)",
                                      label, path, why);
    }
    int rc = check(&st, path, label, flags);
    /* One byte over the bound tells a file that is too long. */
    if (!rc && !(rc = progcache__buf_reserve(out, max + 1))) {
        ssize_t n = progcache__fs_read_full(fd, out->data, max + 1);
        if (n < 0)
            rc = progcache__error_errno(PROGCACHE_EINVAL, errno, "%s %s cannot be read", label,
                                        path);
        else if ((size_t)n > max)
            rc = progcache__error(PROGCACHE_EINVAL, "%s %s is larger than %zu bytes", label,
                                  path, max);
        else
            progcache__buf_set_size(out, (size_t)n);
    }
    close(fd);
    /* Every file named for a tier that cannot be used is counted, whatever
     * the cause (untrusted, missing, unreadable, not a regular file,
     * another user's, open to others, too large): each fails the open. */
    if (rc && rc != PROGCACHE_ENOMEM)
        refused++;
    if (rc && out->data) {
        memset(out->data, 0, out->capacity);
        out->size = 0;
    }
    return rc;
}
