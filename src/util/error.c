/* The thread-local last error, read by progcache_error_last(). */
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

/* Large enough for two whole paths of PATH_MAX (4096) bytes and the words
 * around them, or an NVRTC log excerpt (nvrtc.c) and a path; a longer
 * message is cut. The library never allocates to report an error, so
 * reporting an out-of-memory failure cannot itself fail. */
#define ERROR_MAX 16384

static _Thread_local struct {
    int code;
    char message[ERROR_MAX];
} last_error;

int progcache_version_number(void) { return PROGCACHE_VERSION_NUMBER; }

const char *progcache_version_string(void) { return PROGCACHE_VERSION_STRING; }

const char *progcache_error_last(void) { return last_error.message; }

int progcache_error_code(void) { return last_error.code; }

void progcache_error_clear(void)
{
    last_error.code = 0;
    last_error.message[0] = '\0';
}

const char *progcache_strerror(int code)
{
    switch (code) {
    case PROGCACHE_OK: return "ok";
    case PROGCACHE_ENOTFOUND: return "not found";
    case PROGCACHE_EINVAL: return "invalid argument";
    case PROGCACHE_EUNSAFEKEY: return "key cannot be derived safely";
    case PROGCACHE_ECORRUPT: return "corrupt entry";
    case PROGCACHE_EIO: return "I/O error";
    case PROGCACHE_ENOMEM: return "out of memory";
    case PROGCACHE_EREMOTE: return "remote tier unavailable";
    case PROGCACHE_ETIMEOUT: return "timed out";
    case PROGCACHE_ECOMPILE: return "compile failed";
    case PROGCACHE_ECUDA: return "CUDA driver error";
    case PROGCACHE_ENOCUDA: return "no CUDA driver, device or NVRTC";
    default: return "unknown error";
    }
}

static void set_message(int code, const char *fmt, va_list ap)
{
    last_error.code = code;
    vsnprintf(last_error.message, sizeof last_error.message, fmt, ap);
}

int progcache__error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(code, fmt, ap);
    va_end(ap);
    return code;
}

int progcache__error_v(int code, const char *fmt, va_list ap)
{
    set_message(code, fmt, ap);
    return code;
}

int progcache__error_errno(int code, int errnum, const char *fmt, ...)
{
    /* strerror first: nothing below may change what errnum says. */
    const char *text = strerror(errnum);
    va_list ap;
    va_start(ap, fmt);
    set_message(code, fmt, ap);
    va_end(ap);
    progcache__error_append(": %s", text);
    return code;
}

void progcache__error_append(const char *fmt, ...)
{
    size_t len = strlen(last_error.message);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error.message + len, sizeof last_error.message - len, fmt, ap);
    va_end(ap);
}

int progcache__code_from_errno(int errnum)
{
    return errnum == ENOMEM ? PROGCACHE_ENOMEM : PROGCACHE_EIO;
}

/* Formatted in place, with no buffer of its own, so that a prefix that
 * names a path is never cut: the old message moves right to make room (its
 * tail is cut only when the whole would not fit ERROR_MAX). */
void progcache__error_prefix(const char *fmt, ...)
{
    char *m = last_error.message;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 3 >= sizeof last_error.message)
        return;
    size_t plen = (size_t)n + 2; /* the prefix and ": " */
    size_t old = strlen(m);
    if (plen + old >= sizeof last_error.message)
        old = sizeof last_error.message - 1 - plen;
    memmove(m + plen, m, old);
    m[plen + old] = '\0';
    va_start(ap, fmt);
    vsnprintf(m, (size_t)n + 1, fmt, ap); /* its NUL lands on m[n], in the gap */
    va_end(ap);
    m[n] = ':';
    m[n + 1] = ' ';
}

void progcache__error_save(progcache__error_saved *out)
{
    out->code = last_error.code;
    out->message = progcache__strdup(last_error.message);
    if (!out->message) {
        size_t n = strnlen(last_error.message, sizeof out->cut - 1);
        memcpy(out->cut, last_error.message, n);
        out->cut[n] = '\0';
    }
}

void progcache__error_restore(progcache__error_saved *saved)
{
    last_error.code = saved->code;
    snprintf(last_error.message, sizeof last_error.message, "%s",
             saved->message ? saved->message : saved->cut);
    progcache__free(saved->message);
    saved->message = NULL;
}

void progcache__error_discard(progcache__error_saved *saved)
{
    progcache__free(saved->message);
    saved->message = NULL;
}

/* A log line of any length: formatted on the stack when it fits (most
 * do), else in memory of its own, so a message naming a long path reaches
 * the callback whole. Only when that memory cannot be had is it cut. */
void progcache__logv(progcache_log_fn log, void *ctx, int level, const char *fmt, va_list ap)
{
    if (!progcache__log_wanted(log, level))
        return;
    char message[1536];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(message, sizeof message, fmt, ap);
    char *whole = n >= (int)sizeof message ? progcache__malloc((size_t)n + 1) : NULL;
    if (whole)
        vsnprintf(whole, (size_t)n + 1, fmt, again);
    va_end(again);
    if (log)
        log(ctx, level, whole ? whole : message);
    else
        progcache__log_default(level, fmt, whole ? whole : message);
    progcache__free(whole);
}

void progcache__log(progcache_log_fn log, void *ctx, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(log, ctx, level, fmt, ap);
    va_end(ap);
}
