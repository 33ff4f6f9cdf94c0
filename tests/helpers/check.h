/* Minimal test helpers: CHECK aborts the test with file:line and the
 * library's last error; tests exit 77 to report SKIPPED. */
#ifndef PROGCACHE_TEST_CHECK_H
#define PROGCACHE_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progcache/progcache.h"

#define TEST_SKIP_CODE 77

void test_fail(const char *file, int line, const char *expr, const char *detail);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            test_fail(__FILE__, __LINE__, #cond, NULL);                        \
    } while (0)

/* CHECK_RC(expected, call): call must return expected. */
#define CHECK_RC(expected, call)                                               \
    do {                                                                       \
        int check_rc_ = (call);                                                \
        if (check_rc_ != (expected)) {                                         \
            char check_d_[256];                                                \
            snprintf(check_d_, sizeof check_d_, "returned %d (%s), expected %d", \
                     check_rc_, progcache_strerror(check_rc_), (expected));    \
            test_fail(__FILE__, __LINE__, #call, check_d_);                    \
        }                                                                      \
    } while (0)

#define CHECK_OK(call) CHECK_RC(PROGCACHE_OK, call)

/* A fresh empty directory under $TMPDIR (or /tmp); the path is malloc'd.
 * test_rmtree removes a tree (best effort). */
char *test_mkdtemp(const char *tag);
void test_rmtree(const char *path);
/* The end of a test_mkdtemp directory: its tree removed, its path freed. */
void test_rmdtemp(char *path);

/* A cache opened with default options on a fresh directory
 * (test_mkdtemp(tag)), whose malloc'd path goes to *dir; test_cache_done
 * closes the cache, removes the directory and frees its path. */
progcache *test_cache_tmp(char **dir, const char *tag);
void test_cache_done(progcache *cache, char *dir);

/* base/ddd.../ddd.../cache in out (size >= 4096), about 4000 bytes, every
 * component short enough for a file system: the folders are made, cache
 * is not. Returns its length. */
size_t test_long_dir(char *out, size_t size, const char *base);

/* XOR the byte at offset at of the file at path with mask, in place. */
void test_flip_byte(const char *path, long at, unsigned char mask);

/* fn(path, ctx) for each name in dir that does not start with '.', path
 * being dir/name (fn NULL: only counted). Returns how many, or -1 when
 * dir cannot be opened. */
long test_each_name(const char *dir, void (*fn)(const char *path, void *ctx), void *ctx);

/* The names in dir that do not start with '.' (0 when dir cannot be
 * opened); recursive: the files in its folders instead of the folders. */
size_t test_count_names(const char *dir, int recursive);

/* The reference data folder ($PROGCACHE_REFERENCE_DIR), or NULL when it is
 * not there (tests then skip what needs it and say so). */
const char *test_reference_dir(void);

/* Read a whole file into a malloc'd buffer (NUL-terminated); NULL on error. */
char *test_read_file(const char *path, size_t *size);

/* Copy a directory tree (files and folders) from src to dst. 0 on success. */
int test_copytree(const char *src, const char *dst);

#endif
