/* Structure checks of cached artifacts before they go to the driver: the
 * store's validators (src/store/validate.c), plus "is it the kind this
 * program's target produces". */
#include "artifact.h"

#include <stdio.h>

#include "store/validate.h"

int progcache__artifact_check(const unsigned char *data, size_t size, progcache_target target,
                              char *why, size_t why_len)
{
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    (void)progcache__validate(&info, data, size, 0); /* no names: cannot fail */
    progcache_kind want = progcache__kind_of_target(target);
    if (info.kind != want) {
        snprintf(why, why_len, "expected a %s, found %s (%zu bytes)", progcache_kind_name(want),
                 progcache_kind_name(info.kind), size);
        return -1;
    }
    if (!info.valid) {
        snprintf(why, why_len, "%s", info.reason);
        return -1;
    }
    return 0;
}
