/* The fatbin check: a fat binary is a 16-byte header (magic, header size
 * at offset 6, body size at 8) and a body of entries, each with its own
 * header (size at 4, payload size at 8; kind at 0 and SM number at 28 when
 * the header is long enough) and payload. */
#include "artifact/fatbin.h"

#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "artifact/format.h"

#define FATBIN_HEADER_MIN 16
#define FATBIN_ENTRY_MIN 16
#define FATBIN_ENTRY_WITH_ARCH 32
#define FATBIN_ENTRY_PTX 1
#define FATBIN_ENTRY_ELF 2

/* The entries of the fatbin body [e, end); 1 when each lies inside it. */
static int check_entries(progcache__verdict *v, uint64_t e, uint64_t end)
{
    while (e < end) {
        if (end - e < FATBIN_ENTRY_MIN)
            return progcache__verdict_invalid(
                v, "a fatbin entry header at offset %llu is cut short", (unsigned long long)e);
        const unsigned char *q = v->data + e;
        uint64_t ehsize = progcache__le32(q + 4), payload = progcache__le64(q + 8);
        if (ehsize < FATBIN_ENTRY_MIN || !progcache__fits(e, ehsize, 1, end) ||
            !progcache__fits(e + ehsize, payload, 1, end))
            return progcache__verdict_invalid(v, "the fatbin entry at offset %llu ends past its "
                                              "fatbin", (unsigned long long)e);
        if (ehsize >= FATBIN_ENTRY_WITH_ARCH) {
            unsigned kind = progcache__le16(q), sm = progcache__le32(q + 28);
            if (kind == FATBIN_ENTRY_PTX && sm)
                progcache__verdict_arch(v, "compute_", sm);
            else if (kind == FATBIN_ENTRY_ELF && sm)
                progcache__verdict_arch(v, "sm_", sm);
        }
        e += ehsize + payload;
    }
    return 1;
}

int progcache__fatbin_check(progcache__verdict *v)
{
    uint64_t pos = 0;
    while (pos < v->size) {
        /* Fat binaries may be concatenated and padded with zeros. */
        size_t rest = v->size - (size_t)pos;
        const unsigned char *p = v->data + pos;
        if (p[0] == 0 && (rest == 1 || memcmp(p, p + 1, rest - 1) == 0))
            break;
        if (rest < FATBIN_HEADER_MIN || progcache__le32(p) != PROGCACHE__FATBIN_MAGIC)
            return progcache__verdict_invalid(v, "unexpected bytes at offset %llu of the fatbin",
                                              (unsigned long long)pos);
        uint64_t header = progcache__le16(p + 6), body = progcache__le64(p + 8);
        if (header < FATBIN_HEADER_MIN || !progcache__fits(pos + header, body, 1, v->size))
            return progcache__verdict_invalid(
                v, "the fatbin at offset %llu claims %llu bytes; the file ends before",
                (unsigned long long)pos, (unsigned long long)(header + body));
        if (!check_entries(v, pos + header, pos + header + body))
            return 0;
        pos += header + body;
    }
    return 1;
}
