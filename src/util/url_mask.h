/* Internal: a URL with its password replaced by "***", for everything
 * progcache prints (messages, `progcache config`, `progcache remote`):
 * what it shows must be safe to paste into a bug report. */
#ifndef PROGCACHE_UTIL_URL_MASK_H
#define PROGCACHE_UTIL_URL_MASK_H

#include <stddef.h>

/* The password of a scheme://user:password@host userinfo (up to the last
 * '@' of the authority: a password may hold '@') and the value of a
 * password= parameter (unix: URLs) become "***". Written into out (size
 * bytes, cut to fit). */
void progcache__url_mask(char *out, size_t size, const char *url);

/* The same in a new string (progcache__free), large enough whatever the
 * password's length; NULL when out of memory (no message set). */
char *progcache__url_masked(const char *url);

#endif
