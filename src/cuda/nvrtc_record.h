/* Internal: the NVRTC version a key carries on compile-or-load's path,
 * from the cache's record when NVRTC is not loaded (nvrtc_record.c;
 * docs/KEY.md, "NVRTC version"). */
#ifndef PROGCACHE_CUDA_NVRTC_RECORD_H
#define PROGCACHE_CUDA_NVRTC_RECORD_H

#include "key/nvrtc_lib.h"
#include "progcache/cache.h"
#include "progcache/key.h"

/* The version of the NVRTC that would compile: the loaded one's, else
 * $PROGCACHE_NVRTC_VERSION, else the record of the file a load would open,
 * else NVRTC loaded and asked, else (no NVRTC here) the one version the
 * record names. *how says which ("loaded", "PROGCACHE_NVRTC_VERSION",
 * "record", PROGCACHE__NVRTC_LOADED_FOR_KEY, "record (no NVRTC here)"; a
 * static string). PROGCACHE_OK,
 * PROGCACHE_EINVAL (a bad setting), PROGCACHE_ENOCUDA (no NVRTC and no
 * usable record: the message says what to do). cache may be NULL. */
int progcache__nvrtc_key_version(int *major, int *minor, const char **how, progcache *cache);

/* The *how of progcache__nvrtc_key_version when it loaded NVRTC itself,
 * no record applying (compared by address): a hit that ends so is counted
 * (PROGCACHE_STAT_NVRTC_KEY_LOADS). */
extern const char PROGCACHE__NVRTC_LOADED_FOR_KEY[];

/* When NVRTC is loaded: add its line to the cache directory's records
 * when they lack it (once per process and directory). Failures are logged
 * (INFO), never returned. cache may be NULL. */
void progcache__nvrtc_record_loaded(progcache *cache);

/* The record of a library file other than the one this process loads
 * (`progcache exec`'s stand-in, docs/INTERCEPT.md): 1 and the version the
 * cache's records give file f, or 0 when they have no line for it as it
 * is now. */
int progcache__nvrtc_record_lookup(progcache *cache, const progcache__nvrtc_file *f, int *major,
                                   int *minor);
/* Add "f is NVRTC major.minor" (asked of that NVRTC) to the records when
 * they lack it. Failures are logged (INFO), never returned. */
void progcache__nvrtc_record_note(progcache *cache, const progcache__nvrtc_file *f, int major,
                                  int minor);

/* NVRTC loaded for a compile of o (a missing NVRTC is counted in cache,
 * which may be NULL), whose key carries o's NVRTC version
 * (set from how, or by the caller when how is NULL): PROGCACHE_OK, or
 * PROGCACHE_ENOCUDA when there is no NVRTC (a miss on a driver-only
 * node: the message says so), PROGCACHE_ECOMPILE when the key's version
 * came from a setting or record and the NVRTC loaded is another (the
 * message names the setting, or the record, which is then forgotten,
 * counted as records_untrusted and mended at the end of the call). */
int progcache__nvrtc_for_compile(progcache *cache, const progcache_key_nvrtc_options *o,
                                 const char *how);

#endif
