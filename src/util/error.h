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

/* progcache__error with a va_list. */
int progcache__error_v(int code, const char *fmt, va_list ap) PROGCACHE_COLD;

/* Like progcache__error, appending ": <strerror(errnum)>" to the message. */
int progcache__error_errno(int code, int errnum, const char *fmt, ...) PROGCACHE_PRINTF(3, 4)
    PROGCACHE_COLD;

/* Map an errno from a failed file operation to a progcache code:
 * ENOMEM -> PROGCACHE_ENOMEM, everything else -> PROGCACHE_EIO. */
int progcache__code_from_errno(int errnum);

/* Append formatted text to the current message (code unchanged). */
void progcache__error_append(const char *fmt, ...) PROGCACHE_PRINTF(1, 2) PROGCACHE_COLD;

/* Prefix the current message with the formatted text and ": " (for adding
 * context on the way up; the text must not end in ": " itself, and no
 * argument may point into the current message, which moves). */
void progcache__error_prefix(const char *fmt, ...) PROGCACHE_PRINTF(1, 2) PROGCACHE_COLD;

/* The thread's error, kept whole across calls that may replace it (a
 * message can name two long paths: copying it into a small local array
 * would cut it). Every save is followed by exactly one restore (which
 * sets the error back and frees the copy) or discard. */
typedef struct progcache__error_saved {
    int code;
    char *message; /* NULL when out of memory: then cut holds its start */
    char cut[256];
} progcache__error_saved;
void progcache__error_save(progcache__error_saved *out) PROGCACHE_COLD;
void progcache__error_restore(progcache__error_saved *saved) PROGCACHE_COLD;
/* Free a saved error without restoring it. */
void progcache__error_discard(progcache__error_saved *saved) PROGCACHE_COLD;

/* Format a message and pass it to a log callback, or, when log is NULL, to
 * the library's own writer (log.c, PROGCACHE_LOG): the one body behind the
 * stores', the cache's and compile-or-load's log helpers. */
void progcache__logv(progcache_log_fn log, void *ctx, int level, const char *fmt, va_list ap)
    PROGCACHE_COLD;
void progcache__log(progcache_log_fn log, void *ctx, int level, const char *fmt, ...)
    PROGCACHE_PRINTF(4, 5) PROGCACHE_COLD;

/* log.c: the writer used when no callback was given (PROGCACHE_LOG). Its
 * settings are read once per process. progcache__log_wanted: whether a
 * message at level would go anywhere (a callback takes every level), so
 * that a caller can skip building it; _trace: PROGCACHE_LOG=debug (every
 * lookup is traced); _default: write message,
 * once per process per cause (its format string) at the default level. */
int progcache__log_wanted(progcache_log_fn log, int level);
int progcache__log_trace(void);
void progcache__log_default(int level, const char *cause, const char *message) PROGCACHE_COLD;
/* A message the program asked for by a variable of its own
 * (PROGCACHE_EXPLAIN): to the callback at info level; without one, to the
 * default writer each time, unless PROGCACHE_LOG is off or error. */
void progcache__log_asked(progcache_log_fn log, void *ctx, const char *message) PROGCACHE_COLD;

#endif
