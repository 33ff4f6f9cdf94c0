#include "values.h"

#include <string.h>

size_t test_value_make(unsigned char *out, const test_values *v, uint32_t key, uint32_t version)
{
    uint32_t len = v->min_len + (key * v->key_mul + version * v->version_mul) % v->len_span;
    uint32_t hdr[4] = {v->magic, key, version, len};
    memcpy(out, hdr, sizeof hdr);
    uint32_t x = key * 2654435761u ^ version * v->seed_mul;
    for (uint32_t i = 16; i < len; i++) {
        x = x * 1103515245u + 12345u;
        out[i] = (unsigned char)(x >> 16);
    }
    return len;
}

int test_value_ok(const unsigned char *bytes, size_t size, const test_values *v, uint32_t key,
                  unsigned char *scratch)
{
    uint32_t hdr[4];
    if (size < 16)
        return 0;
    memcpy(hdr, bytes, sizeof hdr);
    if (hdr[0] != v->magic || hdr[1] != key || hdr[3] != size)
        return 0;
    return test_value_make(scratch, v, key, hdr[2]) == size && memcmp(scratch, bytes, size) == 0;
}
