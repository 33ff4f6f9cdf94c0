/* A URL with its secrets masked (url_mask.h). The mask follows the
 * grammar the Redis store parses (store/redis/redis_config.c) and, where
 * a URL does not parse, hides whatever could be a password: the userinfo
 * up to the last '@' after its first ':' (or all of it, without a ':'),
 * and the value of every query item of a unix: URL but db= and user=. */
#include "url_mask.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

#define MASK "***"

/* Room for the masked form of a url of len bytes: each query item may
 * grow by "***" (an empty value masked), and there are at most len + 1. */
static size_t masked_size(size_t len)
{
    return len + (len + 1) * (sizeof MASK - 1) + 1;
}

typedef struct out_text {
    char *at;
} out_text;

static void put(out_text *o, const char *s, size_t len)
{
    memcpy(o->at, s, len);
    o->at += len;
}

/* unix:PATH[?ITEM[&ITEM]...]: only db= and user= values are shown. */
static void mask_unix(out_text *o, const char *url)
{
    const char *s = url + strlen("unix:");
    size_t path_len = strcspn(s, "?#");
    put(o, url, (size_t)(s - url) + path_len);
    const char *q = s + path_len;
    if (*q == '#') { /* refused by the parser; whatever follows is hidden */
        put(o, "#" MASK, 1 + strlen(MASK));
        return;
    }
    if (*q != '?')
        return;
    put(o, "?", 1);
    q++;
    while (*q) {
        size_t item = strcspn(q, "&");
        const char *eq = memchr(q, '=', item);
        size_t name = eq ? (size_t)(eq - q) : 0;
        int shown = eq && ((name == 2 && !memcmp(q, "db", 2)) ||
                           (name == 4 && !memcmp(q, "user", 4)));
        if (shown)
            put(o, q, item);
        else if (eq)
            put(o, q, name + 1);
        if (!shown)
            put(o, MASK, strlen(MASK));
        q += item;
        if (*q == '&')
            put(o, q++, 1);
    }
}

/* [scheme://][USER:PASSWORD@]REST: the credentials end at the last '@' (a
 * password may hold '@', '/', '?' or '#'; redis:// URLs have no '@' after
 * them). */
static void mask_userinfo(out_text *o, const char *url)
{
    const char *scheme_end = strstr(url, "://");
    const char *from = scheme_end ? scheme_end + 3 : url;
    const char *at = strrchr(from, '@');
    if (!at) {
        put(o, url, strlen(url));
        return;
    }
    const char *colon = memchr(from, ':', (size_t)(at - from));
    put(o, url, (size_t)((colon ? colon + 1 : from) - url));
    put(o, MASK, strlen(MASK));
    put(o, at, strlen(at));
}

char *progcache__url_masked(const char *url)
{
    char *text = progcache__malloc(masked_size(strlen(url)));
    if (!text)
        return NULL;
    out_text o = {text};
    if (!strncmp(url, "unix:", 5))
        mask_unix(&o, url);
    else
        mask_userinfo(&o, url);
    *o.at = '\0';
    return text;
}

void progcache__url_mask(char *out, size_t size, const char *url)
{
    if (!size)
        return;
    char *text = progcache__url_masked(url);
    /* Out of memory: nothing of the url rather than a secret. */
    snprintf(out, size, "%s", text ? text : "(a URL, not shown: out of memory)");
    progcache__free(text);
}
