/* Internal: the field framing every progcache digest uses (frame.c):
 * label bytes, payload length as 8 bytes big-endian, payload. The length
 * makes the encoding unambiguous: no two different field sequences hash
 * the same bytes (docs/KEY.md, "The recipe"). */
#ifndef PROGCACHE_KEY_FRAME_H
#define PROGCACHE_KEY_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "sha256.h"

/* The label and the length; the caller hashes len payload bytes next. */
int progcache__frame_begin(progcache__sha256 *h, const char *label, uint64_t len);
/* A whole field. */
int progcache__frame(progcache__sha256 *h, const char *label, const void *data, size_t len);
/* A field whose payload is a C string. */
int progcache__frame_str(progcache__sha256 *h, const char *label, const char *text);
/* A field whose payload is n in decimal ASCII. */
int progcache__frame_count(progcache__sha256 *h, const char *label, size_t n);

#endif
