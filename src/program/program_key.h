/* Internal: compile-or-load's key for a program that reads headers
 * (program_key.c): the headers checked against a manifest kept in the
 * cache, a stat each, instead of read (docs/KEY.md, "The manifest"). */
#ifndef PROGCACHE_CUDA_PROGRAM_KEY_H
#define PROGCACHE_CUDA_PROGRAM_KEY_H

#include "headers/include_resolve.h"
#include "progcache/cache.h"
#include "progcache/key.h"

typedef struct progcache__program_key {
    /* The header files the key covers (empty when the program reads none). */
    progcache__header_scan scan;
    int reads;          /* the program may read headers: scan is its list */
    int have_manifest;  /* manifest_key is set */
    unsigned char manifest_key[32];
    int write_manifest; /* the cache's manifest is missing or out of date */
} progcache__program_key;

#define PROGCACHE__PROGRAM_KEY_INIT {PROGCACHE__HEADER_SCAN_INIT, 0, 0, {0}, 0}

/* The key of o (loaded and checked, as compile-or-load has it): the one
 * progcache_key_nvrtc_files derives. With a cache, a program that reads
 * headers looks for its manifest there first: when every header is as
 * recorded, their recorded digests give the key; otherwise (no manifest,
 * a header or watched directory changed, another toolkit) the headers are
 * scanned and read again, and pk->write_manifest is set. */
int progcache__program_key_derive(unsigned char out[32], progcache__program_key *pk,
                                  progcache *cache, const progcache_key_nvrtc_options *o);

/* After a compile: PROGCACHE_OK when every header and watched directory
 * is still as the key saw it; else PROGCACHE_EUNSAFEKEY naming what
 * changed (what NVRTC read may not be what the key covers: the artifact
 * must not be stored under it). */
int progcache__program_key_unchanged(const progcache__program_key *pk);

/* Store the manifest when it is missing or out of date. A failure does
 * not fail the call (the next lookup reads the headers again): it is
 * passed to log. */
void progcache__program_key_store(progcache__program_key *pk, progcache *cache,
                                  progcache_log_fn log, void *log_ctx);

void progcache__program_key_free(progcache__program_key *pk);

#endif
