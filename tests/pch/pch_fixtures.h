/* Fixtures of the PCH tier's tests (pch_fixtures.c). The header is
 * <work>/hdr/mylib.h, on the include path after <work>/hdr0 (searched
 * first, empty); the programs are "test_pch.cu"; PROGCACHE_PCH_MIN_MS is 0
 * so that every prefix is a candidate. */
#ifndef PROGCACHE_TESTS_PCH_FIXTURES_H
#define PROGCACHE_TESTS_PCH_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "progcache/cuda.h"
#include "progcache/stats.h"

extern char *work;          /* the test's folder: headers and caches */
extern char hdr[512];       /* <work>/hdr: the include path */
extern char hdr0[512];      /* <work>/hdr0: searched first, empty */
extern const char *helper;  /* the build's helper ($PROGCACHE_PCH_HELPER) */
extern char opt_hdr0[600], opt_hdr[600];
extern const char *extra_option; /* one more option, or NULL */

typedef struct compiled {
    unsigned char *bytes;
    size_t size;
    int status;
} compiled;

/* The messages a compile logged (note is the log callback). */
typedef struct logbook {
    char text[8192];
} logbook;

/* 0 (test SKIPPED, said) when there is no helper; else 1, the fixtures set. */
int pch_fixtures_setup(const char *test);
void pch_fixtures_teardown(void);

void write_text(const char *path, const char *text);
void write_script(const char *path, const char *text); /* mode 0700 */
/* mylib.h's scale factor. */
void write_header(int factor);
/* Variant v of the program (malloc'd): the prefix is shared. */
char *source_of(int v);
/* Compile source with options through cache (NO_LOAD), with flags;
 * digest names the headers' version. */
compiled compile_source(progcache *cache, const char *source, const char **options,
                        size_t num_options, const char *digest, unsigned int flags,
                        progcache_target target, progcache_log_fn log, void *ctx);
/* Compile variant v through cache (NO_LOAD), with flags; digest names the
 * header's version. */
compiled compile_v(progcache *cache, int v, unsigned int flags, const char *digest,
                   progcache_target target, progcache_log_fn log, void *ctx);
/* The same program compiled without the tier, into a cache of its own. */
compiled plain_v(int v, const char *digest, progcache_target target);
int same(const compiled *a, const compiled *b);
progcache_stats stats_of(progcache *cache);
progcache *open_cache(char **dir, const char *tag);
void close_cache(progcache *cache, char *dir);
void note(void *ctx, int level, const char *message);
/* The .pch files in the cache's PCH directory: their number, total size,
 * the path of the last (if path). */
int pch_files(const char *cache_dir, uint64_t *total, char *path, size_t len);
/* Variants first .. first + n - 1 compiled through cache (cubin, header
 * version "h3", messages into book), each the bytes of a compile without
 * the tier. */
void compile_same(progcache *cache, int first, int n, logbook *book);
/* A PCH test's main: the fixtures set up (exit 77 when they cannot be),
 * each test run in order, torn down, "<name>: ok". */
int pch_test_main(const char *name, void (*const *tests)(void), size_t n);
#define PCH_TEST_MAIN(name, ...)                                                  \
    int main(void)                                                                \
    {                                                                             \
        static void (*const tests[])(void) = {__VA_ARGS__};                       \
        return pch_test_main(name, tests, sizeof tests / sizeof tests[0]);        \
    }
/* A new cache (open_cache) with one PCH made by warm(base, "h3"): the
 * PCH file's path in pch (len bytes). */
progcache *open_warm(char **dir, const char *tag, int base, char *pch, size_t len);
/* Make a PCH: seen, made, used (three variants from base). */
void warm(progcache *cache, int base, const char *digest);
/* Three compiles with path as the helper: the same bytes as without the
 * tier, no PCH, fallbacks counted, said (once per handle). */
void without_helper(const char *path, const char *said);

#endif
