/* pax extended headers in archives (archive.h): reading the records of
 * one (path, size, and an entry's records as the extended attribute GNU
 * tar --xattrs writes), for import. */
#include "archive/archive.h"

#include <stdio.h>
#include <string.h>

int progcache__tar_pax(tar_header *next, int *has_path, int *has_size, const char *data, size_t len,
                       char *why, size_t why_len)
{
    size_t pos = 0;
    while (pos < len) {
        /* "<length> <key>=<value>\n", length counting the whole record. */
        size_t rec = 0, i = pos;
        while (i < len && data[i] >= '0' && data[i] <= '9' && rec < PAX_MAX)
            rec = rec * 10 + (size_t)(data[i++] - '0');
        if (i == pos || i >= len || data[i] != ' ' || rec <= i - pos + 1 || rec > len - pos ||
            data[pos + rec - 1] != '\n') {
            snprintf(why, why_len, "malformed pax extended header record at byte %zu", pos);
            return -1;
        }
        const char *key = data + i + 1, *end = data + pos + rec - 1;
        const char *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq) {
            snprintf(why, why_len, "pax extended header record without '=' at byte %zu", pos);
            return -1;
        }
        size_t key_len = (size_t)(eq - key), value_len = (size_t)(end - eq - 1);
        if (key_len == 4 && !memcmp(key, "path", 4)) {
            if (value_len >= sizeof next->name || memchr(eq + 1, '\0', value_len)) {
                snprintf(why, why_len, "pax path of %zu bytes is not a cache entry name",
                         value_len);
                return -1;
            }
            memcpy(next->name, eq + 1, value_len);
            next->name[value_len] = '\0';
            *has_path = 1;
        } else if (key_len == sizeof PAX_RECORDS_KEY - 1 &&
                   !memcmp(key, PAX_RECORDS_KEY, key_len)) {
            next->records_at = (uint64_t)(eq + 1 - data);
            next->records_len = value_len;
        } else if (key_len == 4 && !memcmp(key, "size", 4)) {
            uint64_t v = 0;
            if (value_len == 0 || value_len > 19) {
                snprintf(why, why_len, "malformed pax size");
                return -1;
            }
            for (size_t k = 0; k < value_len; k++) {
                char c = eq[1 + k];
                if (c < '0' || c > '9') {
                    snprintf(why, why_len, "malformed pax size");
                    return -1;
                }
                v = v * 10 + (uint64_t)(c - '0');
            }
            next->size = v;
            *has_size = 1;
        }
        pos += rec;
    }
    return 0;
}
