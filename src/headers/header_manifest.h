/* Internal: the header manifest (header_manifest.c; docs/FORMAT.md,
 * "Header manifests"; docs/KEY.md, "The manifest"): what a compile read,
 * kept in the cache so that the next lookup stats the headers instead of
 * reading them. */
#ifndef PROGCACHE_KEY_HEADER_MANIFEST_H
#define PROGCACHE_KEY_HEADER_MANIFEST_H

#include <stddef.h>

#include "headers/include_resolve.h"
#include "progcache/common.h"
#include "progcache/key.h"

/* The first 8 bytes of every manifest (artifact/manifest_kind.c knows
 * them too, to list manifests as such). */
#define PROGCACHE__MANIFEST_MAGIC "\x89PCMANI\n"
#define PROGCACHE__MANIFEST_VERSION 1

/* The manifest's bytes for scan (replacing out's). */
int progcache__manifest_encode(progcache_buf *out, const progcache__header_scan *scan);

/* Parse a manifest into out (emptied first). Every length is checked
 * against size. PROGCACHE_OK or PROGCACHE_ECORRUPT (with a message). */
int progcache__manifest_decode(progcache__header_scan *out, const unsigned char *data,
                               size_t size);

/* What progcache__manifest_check found. */
typedef enum progcache__manifest_state {
    PROGCACHE__MANIFEST_VALID = 0,     /* every header as recorded */
    PROGCACHE__MANIFEST_REFRESHED = 1, /* same bytes, newer stats: rewrite it */
    PROGCACHE__MANIFEST_STALE = 2      /* something changed: scan again */
} progcache__manifest_state;

/* Check scan (a decoded manifest) against the files: a stat per header and
 * per watched directory, the toolkit's identity when it is included. A
 * header whose stat differs, or that was too new to trust its stat, is
 * read and hashed again: the same bytes update its stat in scan
 * (REFRESHED), other bytes make the manifest STALE, as does a watched
 * directory that changed or a different toolkit. *state gets the verdict.
 * PROGCACHE_OK, or an error reading a header (then STALE). */
int progcache__manifest_check(progcache__header_scan *scan, progcache__manifest_state *state);

/* The cache key under which the manifest of o is kept: SHA-256 over the
 * key of o without header files (source, options, names, headers in
 * memory) and the working directory, which relative include paths and
 * "quoted" names are resolved from. o is loaded, without extra_digest. */
int progcache__manifest_key(unsigned char out[32], const progcache_key_nvrtc_options *o);

#endif
