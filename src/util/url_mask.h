/* Internal: a URL with its secrets replaced by "***", for everything
 * progcache prints (messages, `progcache config`, `progcache remote`):
 * what it shows must be safe to paste into a bug report. Messages about a
 * URL are built from this form only, never from the URL itself (the
 * public progcache_url_mask is the same, for the tools). */
#ifndef PROGCACHE_UTIL_URL_MASK_H
#define PROGCACHE_UTIL_URL_MASK_H

#include <stddef.h>

/* The password of a scheme://user:password@host userinfo (up to the last
 * '@': a password may hold '@', '/', '?' or '#'; all of the userinfo when
 * it has no ':'), and in a unix: URL the value of every query item but
 * db= and user= (password=, twice or misspelt, and anything unknown)
 * become "***". Written into out (size bytes, cut to fit). */
void progcache__url_mask(char *out, size_t size, const char *url);

/* The same in a new string (progcache__free), large enough whatever the
 * URL; NULL when out of memory (no message set). */
char *progcache__url_masked(const char *url);

#endif
