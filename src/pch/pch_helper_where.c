/* Where the PCH helper is looked for (progcache__pch_helper_find, in
 * pch_helper.c, checks and uses what this names): besides
 * $PROGCACHE_PCH_HELPER, next to the library and where it was installed,
 * the helper of the build tree this library was built in, when this
 * library (or the program it is linked into) is itself still in that
 * build tree. So `build/bin/progcache warm` and the sample run from a
 * build directory get the tier as an install does; an installed copy
 * never looks into a build directory. Only where it is looked for is
 * decided here; whether it may be run (its owner and mode) is checked by
 * the caller, as for every other place. */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pch/pch_tier.h"

#ifndef PROGCACHE_BUILD_DIR
#define PROGCACHE_BUILD_DIR ""
#endif
#ifndef PROGCACHE_PCH_HELPER_BUILD
#define PROGCACHE_PCH_HELPER_BUILD ""
#endif

const char *progcache__pch_helper_in_build(void)
{
    Dl_info info;
    if (!PROGCACHE_BUILD_DIR[0] || !PROGCACHE_PCH_HELPER_BUILD[0] ||
        !dladdr((void *)progcache__pch_helper_in_build, &info) || !info.dli_fname)
        return NULL;
    char self[PATH_MAX], build[PATH_MAX];
    if (!realpath(info.dli_fname, self) || !realpath(PROGCACHE_BUILD_DIR, build))
        return NULL;
    size_t n = strlen(build);
    if (strncmp(self, build, n) != 0 || self[n] != '/')
        return NULL;
    return PROGCACHE_PCH_HELPER_BUILD;
}
