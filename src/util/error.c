/* The thread-local last error, read by progcache_error_last(). */
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Large enough for an NVRTC log excerpt plus a path; a longer message is
 * cut (the library never allocates to report an error, so reporting an
 * out-of-memory failure cannot itself fail). */
#define ERROR_MAX 8192

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
    case PROGCACHE_ENOCUDA: return "no CUDA driver or device";
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

int progcache__error_errno(int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(code, fmt, ap);
    va_end(ap);
    size_t len = strlen(last_error.message);
    snprintf(last_error.message + len, sizeof last_error.message - len, ": %s",
             strerror(errnum));
    return code;
}

int progcache__code_from_errno(int errnum)
{
    return errnum == ENOMEM ? PROGCACHE_ENOMEM : PROGCACHE_EIO;
}

void progcache__error_prefix(const char *fmt, ...)
{
    char prefix[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t plen = strlen(prefix);
    memcpy(prefix + plen, ": ", 3);
    plen += 2;
    /* Shift the old message right, cutting its tail if it no longer fits. */
    size_t old = strlen(last_error.message);
    if (plen + old >= sizeof last_error.message)
        old = sizeof last_error.message - 1 - plen;
    memmove(last_error.message + plen, last_error.message, old);
    memcpy(last_error.message, prefix, plen);
    last_error.message[plen + old] = '\0';
}

void progcache__logv(progcache_log_fn log, void *ctx, int level, const char *fmt, va_list ap)
{
    if (!log)
        return;
    char message[1536];
    vsnprintf(message, sizeof message, fmt, ap);
    log(ctx, level, message);
}

void progcache__log(progcache_log_fn log, void *ctx, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    progcache__logv(log, ctx, level, fmt, ap);
    va_end(ap);
}
