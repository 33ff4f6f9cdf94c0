/* Internal: explained misses (explain.c; docs/OPERATIONS.md, "Explained
 * misses"): compile-or-load records the inputs of each key it stores in
 * the cache directory's explain index, and on a MISS, when asked
 * (PROGCACHE_EXPLAIN=1), names the nearest stored entries of the same
 * program and which inputs differ. */
#ifndef PROGCACHE_PROGRAM_EXPLAIN_H
#define PROGCACHE_PROGRAM_EXPLAIN_H

#include "buf.h"
#include "program/program_key.h"
#include "progcache/cache.h"
#include "progcache/key.h"

/* After key was stored: record o's inputs in the index (by program name
 * and source, and by program name). Best effort: a failure is said at
 * info level through log and costs only a later explanation. */
void progcache__explain_note(progcache *cache, const progcache_key_nvrtc_options *o,
                             const progcache__program_key *pk, const unsigned char key[32],
                             progcache_log_fn log, void *log_ctx);

/* On a MISS of key: when PROGCACHE_EXPLAIN is on, the explanation through
 * log (progcache__log_asked), or, when NULL, the cache's log callback, or
 * the library's writer. Costs one setting read when it is off. */
void progcache__explain_miss(progcache *cache, const progcache_key_nvrtc_options *o,
                             const progcache__program_key *pk, const unsigned char key[32],
                             progcache_log_fn log, void *log_ctx);

/* The explanation of a miss of key (whose inputs are o and pk) as text
 * into out (replaced): one line naming the program, then one line per
 * nearest stored entry (at most 3) with the inputs that differ, or one
 * line saying that nothing similar is recorded. Counted (explain_made).
 * PROGCACHE_OK or PROGCACHE_ENOMEM. */
int progcache__explain_text(progcache_buf *out, progcache *cache,
                            const progcache_key_nvrtc_options *o,
                            const progcache__program_key *pk, const unsigned char key[32]);

#endif
