/* Internal: the extra digest of a program with headers, and what needs
 * one (headers_digest.c; docs/KEY.md, "The headers digest"). */
#ifndef PROGCACHE_KEY_HEADERS_DIGEST_H
#define PROGCACHE_KEY_HEADERS_DIGEST_H

#include <stddef.h>

#include "headers/include_resolve.h"
#include "progcache/key.h"

/* The recipe: the headers in memory of o (sorted by name), the header
 * files (path and SHA-256, in the order given), the toolkit identity
 * (NULL: the toolkit is not included) and o's extra_digest when given.
 * o is loaded and checked. */
int progcache__headers_digest(unsigned char out[32], const progcache_key_nvrtc_options *o,
                              const progcache__header_file *files, size_t num_files,
                              const unsigned char *toolkit_id);

/* For progcache_key_nvrtc, which reads no file: PROGCACHE_EUNSAFEKEY
 * (naming the include and where it is) when the source or a header in
 * memory it includes has an include that no header in memory answers. */
int progcache__key_check_includes(const progcache_key_nvrtc_options *o);

/* Whether the source, or a header in memory, might include something:
 * a cheap look for the words "include" and "embed" (every directive and
 * __has_include has one), before the scanner is run. */
int progcache__may_include(const progcache_key_nvrtc_options *o);

/* Whether the key of o (loaded, no extra_digest) takes the headers
 * digest: o has headers in memory, the scan found header files or the
 * toolkit, or o has an option or a program name for which cuda.core
 * wants an extra digest (include paths, pre-includes, a name with a
 * directory part). Otherwise the key is cuda.core's plain key. */
int progcache__needs_headers_digest(const progcache_key_nvrtc_options *o,
                                    const progcache__header_scan *scan);

/* The key of o (loaded, no extra_digest) for the header files in scan. */
int progcache__key_from_scan(unsigned char out[32], const progcache_key_nvrtc_options *o,
                             const progcache__header_scan *scan);

/* The key of o (loaded, no extra_digest) read from the files: the option
 * check for scanned headers, the scan (into scan, emptied first; left
 * empty when the program can read no file) and the key. What
 * progcache_key_nvrtc_files and compile-or-load's full look share. */
int progcache__key_scan(unsigned char out[32], const progcache_key_nvrtc_options *o,
                        progcache__header_scan *scan);

#endif
