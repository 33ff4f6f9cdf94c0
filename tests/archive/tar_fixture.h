/* What the archive tests that craft tar blocks by hand share. */
#ifndef PROGCACHE_TESTS_TAR_FIXTURE_H
#define PROGCACHE_TESTS_TAR_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "archive/archive.h"

/* The header checksum of a 512-byte tar block, computed and written in
 * (ustar: the field counted as spaces, six octal digits and a NUL). */
static inline void tar_fix_checksum(unsigned char *block)
{
    memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++)
        sum += block[i];
    char num[8];
    snprintf(num, sizeof num, "%06o", sum);
    memcpy(block + 148, num, 7);
}

#endif
