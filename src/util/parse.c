/* The one parser of values: sizes, booleans and durations, for every
 * setting of the table (settings_table.c) and every variable read apart
 * (config.c), so that each is written one way everywhere
 * (docs/CONFIG.md). */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "progcache/settings.h"
#include "settings_table.h"

int progcache_parse_size(uint64_t *out, const char *text)
{
    if (!out || !text)
        return PROGCACHE_EINVAL;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t whole = 0, frac = 0, scale = 1;
    const char *digits = p;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return PROGCACHE_EINVAL;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    int have_digits = p > digits, have_frac = 0;
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (scale >= 1000000000) /* nine digits are below a byte of a pebibyte */
                return PROGCACHE_EINVAL;
            have_frac = 1;
            frac = frac * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
        if (!have_frac)
            return PROGCACHE_EINVAL;
    }
    if (!have_digits && !have_frac)
        return PROGCACHE_EINVAL;
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    case 'p': case 'P': shift = 50; break;
    default: break;
    }
    if (shift) {
        p++;
        if (*p == 'i')
            p++;
    }
    if (*p == 'B' || (*p == 'b' && !shift))
        p++;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p)
        return PROGCACHE_EINVAL;
    if (whole > (UINT64_MAX >> shift))
        return PROGCACHE_EINVAL;
    uint64_t value = whole << shift;
    if (have_frac) {
        /* frac / scale of a unit, exactly: unit = q * scale + r, so
         * frac * unit / scale = frac * q + frac * r / scale, and both
         * products stay far below 2^64 (frac, r < scale <= 10^9). A
         * fraction of a byte is refused. */
        uint64_t unit = (uint64_t)1 << shift, q = unit / scale, r = unit % scale;
        if (frac * r % scale)
            return PROGCACHE_EINVAL;
        uint64_t add = frac * q + frac * r / scale;
        if (value > UINT64_MAX - add)
            return PROGCACHE_EINVAL;
        value += add;
    }
    if (value == UINT64_MAX) /* PROGCACHE_SIZE_NONE */
        return PROGCACHE_EINVAL;
    *out = value;
    return PROGCACHE_OK;
}

/* ---- booleans and durations --------------------------------------------- */

int progcache__parse_bool(int *out, const char *text)
{
    if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on") ||
        !strcmp(text, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcasecmp(text, "false") || !strcasecmp(text, "no") || !strcasecmp(text, "off") ||
        !strcmp(text, "0")) {
        *out = 0;
        return 0;
    }
    return -1;
}

#define DURATION_MAX_MS (UINT64_C(24) * 3600 * 1000)

int progcache__parse_duration_ms(uint64_t *out, const char *text, uint64_t bare_unit_ms)
{
    uint64_t n = 0;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (uint64_t)(*p - '0');
        if (n > DURATION_MAX_MS)
            return -1;
    }
    uint64_t unit = 0;
    if (p != text) {
        if (!*p)
            unit = bare_unit_ms;
        else if (!strcmp(p, "ms"))
            unit = 1;
        else if (!strcmp(p, "s"))
            unit = 1000;
        else if (!strcmp(p, "m"))
            unit = 60000;
    }
    if (!unit || n * unit > DURATION_MAX_MS)
        return -1;
    *out = n * unit;
    return 0;
}

