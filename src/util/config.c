/* Configuration from the environment. This file is the only place the
 * library calls getenv (docs/CONFIG.md lists every variable). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "error.h"
#include "fs.h"
#include "progcache/cache.h"
#include "progcache/remote.h"

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
 * a file can be made readable by its owner alone. */
static int read_secret(progcache_buf *out, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return progcache__error_errno(PROGCACHE_EIO, errno,
                                      "cannot read PROGCACHE_REMOTE_SECRET_FILE %s", path);
    struct stat st;
    int rc = PROGCACHE_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) {
        rc = progcache__error(PROGCACHE_EIO,
                              "PROGCACHE_REMOTE_SECRET_FILE %s is not a regular file of at most "
                              "4096 bytes",
                              path);
        goto done;
    }
    if ((rc = progcache__buf_reserve(out, (size_t)st.st_size)))
        goto done;
    ssize_t n = progcache__fs_read_full(fd, out->data, (size_t)st.st_size);
    if (n < 0) {
        rc = progcache__error_errno(PROGCACHE_EIO, errno,
                                    "cannot read PROGCACHE_REMOTE_SECRET_FILE %s", path);
        goto done;
    }
    if (n > 0 && out->data[n - 1] == '\n')
        n--;
    progcache__buf_set_size(out, (size_t)n);
done:
    close(fd);
    return rc;
}

int progcache_default_remote(progcache_buf *url, progcache_buf *secret)
{
    if (!url || !secret)
        return progcache__error(PROGCACHE_EINVAL, "progcache_default_remote: NULL argument");
    const char *remote = getenv("PROGCACHE_REMOTE");
    if (!remote || !*remote)
        return PROGCACHE_ENOTFOUND;
    int rc = join(url, remote, "");
    if (rc)
        return rc;
    secret->size = 0;
    const char *file = getenv("PROGCACHE_REMOTE_SECRET_FILE");
    return file && *file ? read_secret(secret, file) : PROGCACHE_OK;
}
