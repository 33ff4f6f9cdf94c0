/* Configuration from the environment. This file is the only place the
 * library calls getenv (docs/CONFIG.md lists every variable): the cache
 * directory, the remote tier, and the variables that override a cache
 * directory's settings (PROGCACHE_MAX_SIZE, ...). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "error.h"
#include "fs.h"
#include "progcache/cache.h"
#include "progcache/remote.h"
#include "settings.h"

static int join(progcache_buf *out, const char *a, const char *b)
{
    out->size = 0;
    if (out->data)
        out->data[0] = '\0';
    int rc = progcache__buf_append(out, a, strlen(a));
    if (!rc)
        rc = progcache__buf_append(out, b, strlen(b));
    return rc;
}

int progcache_default_dir(progcache_buf *out)
{
    if (!out)
        return progcache__error(PROGCACHE_EINVAL, "progcache_default_dir: out is NULL");
    const char *dir = getenv("PROGCACHE_DIR");
    if (dir && *dir)
        return join(out, dir, "");
    /* cuda.core's default (cuda.core.utils._cache_dir), so that C and
     * Python programs meet in one cache without configuration. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && *xdg)
        return join(out, xdg, "/cuda-python/program-cache");
    const char *home = getenv("HOME");
    if (home && *home)
        return join(out, home, "/.cache/cuda-python/program-cache");
    return progcache__error(PROGCACHE_EINVAL,
                            "no cache directory: set PROGCACHE_DIR (or XDG_CACHE_HOME or HOME), "
                            "or pass a directory");
}

/* The secret is read from a file, not taken from the environment itself:
 * a file can be made readable by its owner (or a group) alone.
 *
 * A secret file that was named but cannot be used is an error, never "no
 * secret": the remote tier would otherwise run unauthenticated while its
 * operator believes it is protected (docs/SECURITY.md). So every way the
 * file can fail is refused with the variable, the file and the reason:
 * missing or unreadable; not a regular file (opened non-blocking, so a
 * FIFO cannot hang the open, and never read, so /dev/zero cannot feed
 * bytes without bound); readable or writable by every user (anyone on the
 * machine could forge entries or change the secret; ssh refuses such
 * private keys too); empty or shorter than the HMAC needs; longer than
 * MAX_SECRET (read with that bound, whatever the file claims). */
#define MIN_SECRET PROGCACHE_REDIS_MIN_SECRET
#define MAX_SECRET 4096
#define VAR "PROGCACHE_REMOTE_SECRET_FILE"
#define HOW_TO_MAKE "(openssl rand 32 > FILE; chmod 600 FILE)"

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

static int check_secret_file(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return progcache__error_errno(PROGCACHE_EIO, errno, VAR " %s cannot be read", path);
    if (!S_ISREG(st.st_mode))
        return progcache__error(PROGCACHE_EINVAL,
                                VAR " %s is %s, not a regular file: give a file holding the "
                                "shared secret " HOW_TO_MAKE,
                                path, file_kind(st.st_mode));
    if (st.st_mode & (S_IROTH | S_IWOTH))
        return progcache__error(PROGCACHE_EINVAL,
                                VAR " %s can be %s by every user (mode %04o): anyone on this "
                                "machine could %s; make it private (chmod o-rwx FILE)",
                                path,
                                (st.st_mode & S_IROTH) ? "read" : "written",
                                (unsigned)(st.st_mode & 07777),
                                (st.st_mode & S_IROTH) ? "forge cache entries with it"
                                                       : "replace it");
    return PROGCACHE_OK;
}

static int read_secret(progcache_buf *out, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return progcache__error_errno(progcache__code_from_errno(errno), errno,
                                      VAR " %s cannot be opened", path);
    int rc = check_secret_file(fd, path);
    if (rc)
        goto done;
    /* One byte over the bound tells a file that is too long. */
    if ((rc = progcache__buf_reserve(out, MAX_SECRET + 1)))
        goto done;
    ssize_t n = progcache__fs_read_full(fd, out->data, MAX_SECRET + 1);
    if (n < 0) {
        rc = progcache__error_errno(progcache__code_from_errno(errno), errno,
                                    VAR " %s cannot be read", path);
        goto done;
    }
    if (n > MAX_SECRET) {
        rc = progcache__error(PROGCACHE_EINVAL,
                              VAR " %s is longer than %d bytes: a shared secret is %d to %d "
                              "bytes " HOW_TO_MAKE,
                              path, MAX_SECRET, MIN_SECRET, MAX_SECRET);
        goto done;
    }
    if (n > 0 && out->data[n - 1] == '\n')
        n--;
    if (n < MIN_SECRET) {
        char size[48] = "is empty";
        if (n > 0)
            snprintf(size, sizeof size, "holds only %zd byte%s", n, n == 1 ? "" : "s");
        rc = progcache__error(PROGCACHE_EINVAL,
                              VAR " %s %s: a shared secret must be at least %d bytes "
                              HOW_TO_MAKE,
                              path, size, MIN_SECRET);
        goto done;
    }
    progcache__buf_set_size(out, (size_t)n);
done:
    if (rc) {
        if (out->data)
            memset(out->data, 0, out->capacity);
        out->size = 0;
    }
    close(fd);
    return rc;
}

int progcache_default_remote(progcache_buf *url, progcache_buf *secret)
{
    if (!url || !secret)
        return progcache__error(PROGCACHE_EINVAL, "progcache_default_remote: NULL argument");
    /* PROGCACHE_REMOTE_SECRET_FILE alone is not read: with no remote tier
     * nothing is fetched from anywhere, so there is nothing to
     * authenticate (docs/CONFIG.md). */
    const char *remote = getenv("PROGCACHE_REMOTE");
    if (!remote || !*remote)
        return PROGCACHE_ENOTFOUND;
    int rc = join(url, remote, "");
    if (rc)
        return rc;
    secret->size = 0;
    const char *file = getenv(VAR);
    return file && *file ? read_secret(secret, file) : PROGCACHE_OK;
}

int progcache__settings_apply_env(progcache_settings *s)
{
    for (size_t i = 0; i < progcache_settings_count(s); i++) {
        const char *var = s->item[i].variable;
        const char *value = var ? getenv(var) : NULL;
        if (!value || !*value) /* empty counts as unset, as for every variable */
            continue;
        int rc = progcache__settings_assign(s, (int)i, value, PROGCACHE_SETTING_ENV, var);
        if (rc)
            return rc;
    }
    return PROGCACHE_OK;
}
