/* Fuzz target: the tar reader behind `progcache import` (header blocks,
 * pax records, member names), which reads archives from anywhere. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "archive/archive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    unsigned char block[TAR_BLOCK];
    memset(block, 0, sizeof block);
    memcpy(block, data, size < TAR_BLOCK ? size : TAR_BLOCK);
    tar_header h;
    if (progcache__tar_parse(&h, block, why, sizeof why) == 1) {
        char rel[80];
        int shard;
        (void)progcache__tar_name(h.name, rel, &shard);
    }
    if (size > TAR_BLOCK) {
        tar_header next;
        memset(&next, 0, sizeof next);
        int has_path = 0, has_size = 0;
        (void)progcache__tar_pax(&next, &has_path, &has_size, (const char *)data + TAR_BLOCK,
                                 size - TAR_BLOCK, why, sizeof why);
    }
    return 0;
}
