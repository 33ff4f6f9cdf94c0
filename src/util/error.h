/* Internal: the thread-local last error. */
#ifndef PROGCACHE_UTIL_ERROR_H
#define PROGCACHE_UTIL_ERROR_H

#include <stdarg.h>

#include "progcache/common.h"

#if defined(__GNUC__)
#define PROGCACHE_PRINTF(a, b) __attribute__((format(printf, a, b)))
/* Error paths: the compiler treats branches into them as unlikely and
 * moves them out of line, so the code a cache hit runs stays dense (a
 * fresh process pays for every cold cache line and page of it). */
#define PROGCACHE_COLD __attribute__((cold))
/* The functions a cache hit runs (key aside): grouped together in the
 * library's text, so a fresh process faults in and caches fewer pages. */
#define PROGCACHE_HOT __attribute__((hot))
#else
#define PROGCACHE_PRINTF(a, b)
#define PROGCACHE_COLD
#define PROGCACHE_HOT
#endif

/* Record code and a formatted message for this thread; returns code so a
 * caller can write `return progcache__error(PROGCACHE_EINVAL, "...")`. */
int progcache__error(int code, const char *fmt, ...) PROGCACHE_PRINTF(2, 3) PROGCACHE_COLD;

/* Like progcache__error, appending ": <strerror(errnum)>" to the message. */
int progcache__error_errno(int code, int errnum, const char *fmt, ...) PROGCACHE_PRINTF(3, 4)
    PROGCACHE_COLD;

/* Map an errno from a failed file operation to a progcache code:
 * ENOMEM -> PROGCACHE_ENOMEM, everything else -> PROGCACHE_EIO. */
int progcache__code_from_errno(int errnum);

/* Prefix the current message with text (for adding context on the way up). */
void progcache__error_prefix(const char *fmt, ...) PROGCACHE_PRINTF(1, 2) PROGCACHE_COLD;

/* Format a message and pass it to a log callback (nothing when log is
 * NULL): the one body behind the stores', the cache's and compile-or-load's
 * log helpers. */
void progcache__logv(progcache_log_fn log, void *ctx, int level, const char *fmt, va_list ap)
    PROGCACHE_COLD;
void progcache__log(progcache_log_fn log, void *ctx, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(4, 5) PROGCACHE_COLD;

#endif
