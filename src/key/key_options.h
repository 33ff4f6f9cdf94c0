/* Internal: which NVRTC option strings make a key unsafe, and loading a
 * caller's key options. */
#ifndef PROGCACHE_KEY_OPTIONS_H
#define PROGCACHE_KEY_OPTIONS_H

#include <stddef.h>

#include "progcache/key.h"

/* What an NVRTC option string means for the cache key. */
typedef enum progcache__option_kind {
    PROGCACHE__OPTION_PLAIN = 0,   /* fully described by its own bytes */
    PROGCACHE__OPTION_READS_FILES, /* reads files the key cannot see */
    PROGCACHE__OPTION_SIDE_EFFECT  /* writes a file a cache hit would not write */
} progcache__option_kind;

/* Classify one option string. When it is not PLAIN, *what (if what is
 * non-NULL) gets a short phrase naming the feature ("an include path"). */
progcache__option_kind progcache__option_classify(const char *option, const char **what);

/* Check options and program name the way cuda.core's make_program_cache_key
 * does for NVRTC: side-effect options are always refused; options that read
 * outside files, and a name with a directory part, are refused unless
 * have_digest. Every options[i] must be non-NULL; name may be NULL.
 * @return PROGCACHE_OK or PROGCACHE_EUNSAFEKEY (message names the option
 *         exactly as given and says what to do). */
int progcache__key_check_options(const char *const *options, size_t num_options,
                                 const char *name, int have_digest);

/* Whether option reads headers that the include scanner finds and covers
 * (-I, --include-path, --pre-include, -include). */
int progcache__option_reads_headers(const char *option);

/* The check for a key whose headers the include scanner covers
 * (progcache_key_nvrtc_files): side-effect options are refused, and so
 * are the options that read files the scanner cannot see (precompiled
 * headers); include paths, pre-includes and a program name with a
 * directory part are allowed. */
int progcache__key_check_options_scanned(const char *const *options, size_t num_options);

/* Load a caller's key options (any version up to the current one; fields
 * an older caller did not know keep their defaults) into dst. fn names the
 * caller in messages. PROGCACHE_OK or PROGCACHE_EINVAL. */
int progcache__key_options_load(progcache_key_nvrtc_options *dst,
                                const progcache_key_nvrtc_options *src, const char *fn);

/* Load a caller's key options (as progcache__key_options_load) and check
 * them: NULL strings, target, headers (named, distinct), NVRTC version.
 * PROGCACHE_OK or PROGCACHE_EINVAL naming fn. */
int progcache__key_load(progcache_key_nvrtc_options *dst, const progcache_key_nvrtc_options *src,
                        const char *fn);

/* cuda.core's key of loaded options o, with extra (extra_len bytes) as
 * its extra digest (NULL: none). No refusals: the caller checked. */
int progcache__key_derive(unsigned char out[PROGCACHE_KEY_SIZE],
                          const progcache_key_nvrtc_options *o, const unsigned char *extra,
                          size_t extra_len);

#endif
