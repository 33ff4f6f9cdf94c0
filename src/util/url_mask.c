/* A URL with its password masked (url_mask.h). */
#include "url_mask.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

void progcache__url_mask(char *out, size_t size, const char *url)
{
    const char *skip = NULL, *skip_end = NULL;
    const char *scheme_end = strstr(url, "://");
    if (strncmp(url, "unix:", 5) != 0 && scheme_end) {
        const char *auth = scheme_end + 3;
        const char *auth_end = auth + strcspn(auth, "/?#");
        const char *at = NULL;
        for (const char *p = auth; p < auth_end; p++)
            if (*p == '@')
                at = p;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
            skip = colon + 1;
            skip_end = at;
        }
    } else if ((skip = strstr(url, "password=")) != NULL) {
        skip += strlen("password=");
        skip_end = skip + strcspn(skip, "&#");
    }
    if (!skip)
        snprintf(out, size, "%s", url);
    else
        snprintf(out, size, "%.*s***%s", (int)(skip - url), url, skip_end);
}

char *progcache__url_masked(const char *url)
{
    size_t size = strlen(url) + 4; /* "***" may replace a shorter password */
    char *out = progcache__malloc(size);
    if (out)
        progcache__url_mask(out, size, url);
    return out;
}
