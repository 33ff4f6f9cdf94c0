/* Fuzz target: the artifact validators (src/artifact/) on arbitrary
 * bytes, with kernel-name extraction on. They parse hostile input (a shared
 * cache directory, an imported archive) before the driver sees it. */
#include <stddef.h>
#include <stdint.h>

#include "artifact/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
    (void)progcache__validate(&info, data, size, 1);
    for (size_t i = 0; i < info.num_kernels; i++)
        (void)progcache_artifact_kernel(&info, i);
    progcache_artifact_info_release(&info);
    return 0;
}
