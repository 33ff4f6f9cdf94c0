/* Internal: compile-or-load's check of cached bytes before they go to the
 * driver (expect.c). */
#ifndef PROGCACHE_ARTIFACT_EXPECT_H
#define PROGCACHE_ARTIFACT_EXPECT_H

#include <stddef.h>

#include "progcache/key.h"

/* 0 when data looks like a whole artifact of target; -1 otherwise, with
 * the reason in why (NUL-terminated, cut to why_len). Cheap: reads the
 * headers only. With sealed (the store matched the bytes against the seal
 * it stored with them, and the writer found them to be a whole artifact)
 * only the kind is checked. */
int progcache__artifact_check(const unsigned char *data, size_t size, progcache_target target,
                              int sealed, char *why, size_t why_len);

#endif
