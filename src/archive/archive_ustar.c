/* The ustar format both directions of the archives share (archive.h;
 * docs/FORMAT.md, "Archives"): what a member name is to import, and the
 * header blocks import parses and export makes. */
#include "archive/archive.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "dir/dir.h"

/* ---- names ------------------------------------------------------------------- */

tar_name_kind progcache__tar_name(const char *name, char rel[80], int *shard)
{
    if (name[0] == '.' && name[1] == '/')
        name += 2;
    if (!strcmp(name, PROGCACHE__NVRTC_MEMBER))
        return TAR_NAME_NVRTC;
    if (strncmp(name, "entries", 7) != 0)
        return TAR_NAME_BAD;
    const char *p = name + 7;
    if (*p == '\0' || (p[0] == '/' && p[1] == '\0'))
        return TAR_NAME_DIR;
    if (*p != '/' || !progcache__is_hex(p + 1, 2))
        return TAR_NAME_BAD;
    const char *shard_hex = p + 1;
    p += 3;
    if (*p == '\0' || (p[0] == '/' && p[1] == '\0'))
        return TAR_NAME_DIR;
    if (*p != '/' || strlen(p + 1) != 62 || !progcache__is_hex(p + 1, 62))
        return TAR_NAME_BAD;
    snprintf(rel, 80, "entries/%.2s/%s", shard_hex, p + 1);
    char digits[3] = {shard_hex[0], shard_hex[1], 0};
    *shard = (int)strtol(digits, NULL, 16);
    return TAR_NAME_ENTRY;
}

/* ---- header blocks --------------------------------------------------------- */

/* A numeric field: octal digits (leading blanks, ended by blank or NUL) or,
 * for values too large for octal, GNU's base-256 (high bit of the first
 * byte set). 0, or -1 for anything else. */
static int parse_number(uint64_t *out, const unsigned char *field, size_t len)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        if (field[0] != 0x80)
            return -1; /* negative, or too large for us */
        for (size_t i = 1; i < len; i++) {
            if (v >> 56)
                return -1;
            v = v << 8 | field[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < len && field[i] == ' ')
        i++;
    size_t digits = 0;
    for (; i < len && field[i] >= '0' && field[i] <= '7'; i++, digits++) {
        if (v >> 60)
            return -1;
        v = v << 3 | (uint64_t)(field[i] - '0');
    }
    for (; i < len; i++)
        if (field[i] != ' ' && field[i] != '\0')
            return -1;
    if (!digits)
        return -1;
    *out = v;
    return 0;
}

static void copy_field(char *out, const unsigned char *field, size_t len)
{
    size_t n = 0;
    while (n < len && field[n])
        n++;
    memcpy(out, field, n);
    out[n] = '\0';
}

int progcache__tar_parse(tar_header *out, const unsigned char block[TAR_BLOCK], char *why,
                         size_t why_len)
{
    size_t zero = 0;
    while (zero < TAR_BLOCK && block[zero] == 0)
        zero++;
    if (zero == TAR_BLOCK)
        return 0;
    uint64_t want, sum = 0;
    int64_t ssum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++) {
        unsigned char c = (i >= 148 && i < 156) ? ' ' : block[i];
        sum += c;
        ssum += (signed char)c;
    }
    if (parse_number(&want, block + 148, 8) != 0 || (want != sum && (int64_t)want != ssum)) {
        snprintf(why, why_len, "not a tar header (bad checksum)");
        return -1;
    }
    if (memcmp(block + 257, "ustar", 5) != 0 || (block[262] != '\0' && block[262] != ' ')) {
        snprintf(why, why_len, "not a ustar header (an old-style tar archive?)");
        return -1;
    }
    memset(out, 0, sizeof *out);
    char name[101], prefix[156];
    copy_field(name, block, 100);
    copy_field(prefix, block + 345, 155);
    /* Only POSIX ustar ("ustar\0") has a prefix field; old GNU headers
     * keep other data there. */
    if (block[262] == '\0' && prefix[0])
        snprintf(out->name, sizeof out->name, "%s/%s", prefix, name);
    else
        snprintf(out->name, sizeof out->name, "%s", name);
    out->type = block[156] ? (char)block[156] : '0';
    if (parse_number(&out->size, block + 124, 12) != 0) {
        snprintf(why, why_len, "member \"%s\" has a malformed size field", out->name);
        return -1;
    }
    uint64_t mtime = 0;
    (void)parse_number(&mtime, block + 136, 12); /* informative only */
    out->mtime = mtime < ((uint64_t)1 << 34) ? (int64_t)mtime : 0;
    return 1;
}

int progcache__tar_make(unsigned char block[TAR_BLOCK], const char *name, uint64_t size,
                        int64_t mtime)
{
    if (size >= (uint64_t)1 << 33 || strlen(name) >= 100)
        return -1;
    memset(block, 0, TAR_BLOCK);
    memcpy(block, name, strlen(name));
    memcpy(block + 100, "0000644", 8);
    memcpy(block + 108, "0000000", 8);
    memcpy(block + 116, "0000000", 8);
    char num[16];
    snprintf(num, sizeof num, "%011llo", (unsigned long long)size);
    memcpy(block + 124, num, 12);
    snprintf(num, sizeof num, "%011llo",
             (unsigned long long)(mtime > 0 && mtime < ((int64_t)1 << 33) ? mtime : 0));
    memcpy(block + 136, num, 12);
    block[156] = '0';
    memcpy(block + 257, "ustar", 6); /* with its NUL */
    memcpy(block + 263, "00", 2);
    memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += block[i];
    snprintf(num, sizeof num, "%06o", sum);
    memcpy(block + 148, num, 7); /* six digits, NUL; the space stays */
    return 0;
}
