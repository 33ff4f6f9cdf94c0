/*
 * progcache/common.h - versions, error codes, the last-error message and the
 * byte buffer every call that returns bytes fills.
 *
 * Conventions used by every progcache header:
 *  - Fallible calls return int: PROGCACHE_OK (0) or a negative PROGCACHE_E*
 *    code. After a failure, progcache_error_last() explains it in words a
 *    user can act on. A cache miss (PROGCACHE_ENOTFOUND) is not an error and
 *    leaves no message.
 *  - Outputs come first and are named out. What a call returns through out
 *    belongs to the caller and is released with the matching _free/_close,
 *    each of which accepts NULL.
 *  - The library never exits and never aborts on caller input; it prints only
 *    through its log (a callback, or PROGCACHE_LOG's writer: see below).
 */
#ifndef PROGCACHE_COMMON_H
#define PROGCACHE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__cplusplus)
/* PROGCACHE__INIT for C++ (below). A template, so outside extern "C". */
template <typename T> inline T progcache__init(unsigned int version)
{
    T value = T();
    value.version = version;
    return value;
}
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PROGCACHE_VERSION_MAJOR 0
#define PROGCACHE_VERSION_MINOR 1
#define PROGCACHE_VERSION_PATCH 0
#define PROGCACHE_VERSION_STRING "0.1.0"
/* major*10000 + minor*100 + patch, comparable with progcache_version_number(). */
#define PROGCACHE_VERSION_NUMBER                                               \
    (PROGCACHE_VERSION_MAJOR * 10000 + PROGCACHE_VERSION_MINOR * 100 +        \
     PROGCACHE_VERSION_PATCH)

#if defined(_WIN32)
#define PROGCACHE_API
#elif defined(__GNUC__)
#define PROGCACHE_API __attribute__((visibility("default")))
#else
#define PROGCACHE_API
#endif

/*
 * Return codes. Values are stable: never renumbered, only appended.
 */
enum {
    PROGCACHE_OK = 0,
    PROGCACHE_ENOTFOUND = -1, /* no entry for this key: a miss, not an error */
    PROGCACHE_EINVAL = -2,    /* a bad argument; the message names it */
    PROGCACHE_EUNSAFEKEY = -3, /* a key cannot be derived safely from these inputs */
    PROGCACHE_ECORRUPT = -4,  /* stored bytes failed a check */
    PROGCACHE_EIO = -5,       /* the file system refused (permissions, full disk, ...) */
    PROGCACHE_ENOMEM = -6,    /* out of memory */
    PROGCACHE_EREMOTE = -7,   /* a remote tier is unavailable */
    PROGCACHE_ETIMEOUT = -8,  /* a bounded wait ran out */
    PROGCACHE_ECOMPILE = -9,  /* NVRTC rejected the program; the message holds its log */
    PROGCACHE_ECUDA = -10,    /* the CUDA driver failed a call */
    PROGCACHE_ENOCUDA = -11   /* no CUDA driver, no CUDA device, or no NVRTC on this machine */
};

/*
 * progcache_version_number() : the PROGCACHE_VERSION_NUMBER the library was
 * built with (compare with the macro to detect a header/library mismatch).
 */
PROGCACHE_API int progcache_version_number(void);

/* progcache_version_string() : "MAJOR.MINOR.PATCH"; a static string. */
PROGCACHE_API const char *progcache_version_string(void);

/*
 * progcache_error_last() : the message for the most recent failed call on
 * this thread. Read it right after a call returned a negative code other than
 * PROGCACHE_ENOTFOUND; later calls may replace it. The text is owned by the
 * library and stays valid until the next progcache call on this thread.
 * Returns "" when no error has been recorded. Thread-safe (thread-local).
 */
PROGCACHE_API const char *progcache_error_last(void);

/* progcache_error_code() : the code of that most recent failure (0 if none). */
PROGCACHE_API int progcache_error_code(void);

/* progcache_error_clear() : forget the last error of this thread. */
PROGCACHE_API void progcache_error_clear(void);

/*
 * progcache_strerror() : a short constant name for a return code, such as
 * "not found" or "I/O error". Never NULL.
 */
PROGCACHE_API const char *progcache_strerror(int code);

/*
 * progcache_buf : bytes handed back by the library.
 *
 * The struct is the caller's (usually on the stack, set to
 * PROGCACHE_BUF_INIT); the memory behind data is the library's and is
 * released with progcache_buf_free(). A buffer may be passed again to any
 * call that fills one: its memory is reused when large enough, so a loop of
 * cache hits into one buffer allocates nothing after the first.
 * data is NULL or holds size bytes followed by one NUL byte (not counted in
 * size), so text artifacts such as PTX can be used as C strings.
 */
typedef struct progcache_buf {
    unsigned char *data;
    size_t size;
    size_t capacity; /* bytes allocated behind data; managed by the library */
} progcache_buf;

#define PROGCACHE_BUF_INIT {NULL, 0, 0}

/* progcache_buf_free() : release buf's memory and reset it to empty. NULL-safe. */
PROGCACHE_API void progcache_buf_free(progcache_buf *buf);

/*
 * progcache_buf_set() : copy size bytes from data into buf (reusing its
 * memory when it is large enough).
 * @return PROGCACHE_OK, PROGCACHE_EINVAL (buf NULL, or data NULL with
 *         size > 0) or PROGCACHE_ENOMEM.
 */
PROGCACHE_API int progcache_buf_set(progcache_buf *buf, const void *data, size_t size);

/*
 * The largest artifact progcache reads or stores unless told otherwise
 * (max_artifact_size in the options of the cache, the file store and the
 * Redis store): 1 GiB. Every input (a cache entry, an archive member, a
 * remote value, a file given to the progcache command) is read with this
 * bound, so a mistaken or hostile input (/dev/zero, a huge file) fails
 * with a message instead of exhausting memory.
 */
#define PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT ((uint64_t)1 << 30)

/*
 * Versioned structs. Options and result structs start with
 * `unsigned int version`, set by their _INIT macro or _init() function;
 * new fields are only ever appended, and each addition bumps the version.
 * The library accepts every version from 1 up to the one it was built
 * with: it reads only the fields that version had, and fields an older
 * caller did not know keep their defaults. So a program built against an
 * older header keeps working with a newer library. A version of 0 (the
 * struct was never initialised) or one newer than the library knows is
 * refused with PROGCACHE_EINVAL.
 *
 * The _INIT macros set the version and zero the rest, without a warning in
 * the caller's code in C or C++ (-Wall -Wextra -pedantic: tests/headers):
 * C gets a designated initializer; C++ gets progcache__init<T>(), which
 * value-initializes the struct (every field zero) and sets its version
 * (C++ before C++20 has no designated initializers, and g++ warns under
 * -Wmissing-field-initializers about {version}, and even about C++20's
 * {.version = v}). PROGCACHE__INIT(T, v) is what each _INIT macro expands
 * to.
 */
#if defined(__cplusplus)
#define PROGCACHE__INIT(T, v) (::progcache__init<T>(v))
#else
#define PROGCACHE__INIT(T, v) {.version = (v)}
#endif
/* The earlier form, kept for macros written against it: in C++ it warns
 * under -Wmissing-field-initializers; use PROGCACHE__INIT. */
#if defined(__cplusplus)
#define PROGCACHE__OPTIONS_INIT(v) {v}
#else
#define PROGCACHE__OPTIONS_INIT(v) {.version = (v)}
#endif

/*
 * Logging. Where a caller wants to see what it
 * does (an eviction pass, a healed entry, a store that failed in the
 * background), it passes a callback in an options struct. Without one, the
 * library's own writer follows PROGCACHE_LOG (off|error|warn|info|debug,
 * optionally :FILE); unset, each warning that means "you are not getting
 * what you think" is written once per process and cause to stderr, prefixed
 * "progcache:" (docs/OPERATIONS.md).
 */
enum {
    PROGCACHE_LOG_DEBUG = 0,
    PROGCACHE_LOG_INFO = 1,
    PROGCACHE_LOG_WARN = 2,
    PROGCACHE_LOG_ERROR = 3 /* a failure no return code reports (a background put) */
};
typedef void (*progcache_log_fn)(void *ctx, int level, const char *message);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_COMMON_H */
