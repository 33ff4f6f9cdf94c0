/* Configuration from the environment. This file is the only place the
 * library calls getenv (docs/CONFIG.md lists every variable). */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "error.h"
#include "progcache/cache.h"

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
