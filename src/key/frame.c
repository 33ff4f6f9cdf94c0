/* The field framing of progcache's digests (frame.h). */
#include "key/frame.h"

#include <stdio.h>
#include <string.h>

int progcache__frame_begin(progcache__sha256 *h, const char *label, uint64_t len)
{
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(len >> (56 - 8 * i));
    int rc = progcache__sha256_update(h, label, strlen(label));
    return rc ? rc : progcache__sha256_update(h, be, sizeof be);
}

int progcache__frame(progcache__sha256 *h, const char *label, const void *data, size_t len)
{
    int rc = progcache__frame_begin(h, label, len);
    return rc || !len ? rc : progcache__sha256_update(h, data, len);
}

int progcache__frame_str(progcache__sha256 *h, const char *label, const char *text)
{
    return progcache__frame(h, label, text, strlen(text));
}

int progcache__frame_count(progcache__sha256 *h, const char *label, size_t n)
{
    char text[32];
    snprintf(text, sizeof text, "%zu", n);
    return progcache__frame_str(h, label, text);
}
