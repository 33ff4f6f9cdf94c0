/* Checks of cached artifacts before they go to the driver: "is it the kind
 * this program's target produces", and, unless the bytes are sealed (they
 * matched the seal stored with them, whose writer found a whole artifact),
 * the structure checks of their format (inspect.c). */
#include "artifact/expect.h"

#include <stdio.h>

#include "artifact/format.h"
#include "artifact/inspect.h"
#include "error.h" /* PROGCACHE_HOT */

PROGCACHE_HOT
int progcache__artifact_check(const unsigned char *data, size_t size, progcache_target target,
                              int sealed, char *why, size_t why_len)
{
    progcache_kind want = progcache__kind_of_target(target);
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    if (sealed)
        info.kind = progcache__kind_of(data, size);
    else
        (void)progcache__validate(&info, data, size, 0); /* no names: cannot fail */
    if (info.kind != want) {
        snprintf(why, why_len, "expected a %s, found %s (%zu bytes)", progcache_kind_name(want),
                 progcache_kind_name(info.kind), size);
        return -1;
    }
    if (!sealed && !info.valid) {
        snprintf(why, why_len, "%s", info.reason);
        return -1;
    }
    return 0;
}
