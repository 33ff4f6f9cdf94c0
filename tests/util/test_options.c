/* The one rule for versioned structs (include/progcache/common.h): every
 * version from 1 to the current one is accepted, only the fields that
 * version had are read, and the rest keep their defaults; version 0 and
 * versions newer than the library are refused with a message. Older
 * structs are allocated at exactly their old size, so AddressSanitizer
 * catches any read past them. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "options.h"
#include "progcache/cuda.h"
#include "store/file/file_store.h"

typedef struct sample_v2 {
    unsigned int version;
    int a;       /* version 1 */
    long b;      /* version 2: default 7 */
} sample_v2;

static void test_rule(void)
{
    static const size_t sizes[] = {0, offsetof(sample_v2, b), sizeof(sample_v2)};
    sample_v2 out = {2, 0, 7};
    /* A version-1 caller's struct: shorter, and nothing beyond it is read. */
    unsigned char *v1 = malloc(offsetof(sample_v2, b));
    CHECK(v1);
    sample_v2 head = {1, 42, 0};
    memcpy(v1, &head, offsetof(sample_v2, b));
    CHECK_OK(progcache__options_load(&out, v1, sizes, 2, "test", "sample"));
    CHECK(out.a == 42 && out.b == 7);
    free(v1);
    sample_v2 v2 = {2, 1, 9};
    CHECK_OK(progcache__options_load(&out, &v2, sizes, 2, "test", "sample"));
    CHECK(out.a == 1 && out.b == 9);
    sample_v2 zero = {0, 1, 2}, future = {3, 1, 2};
    CHECK_RC(PROGCACHE_EINVAL, progcache__options_load(&out, &zero, sizes, 2, "test", "sample"));
    CHECK(strstr(progcache_error_last(), "version 0") && strstr(progcache_error_last(), "SAMPLE_INIT"));
    CHECK_RC(PROGCACHE_EINVAL, progcache__options_load(&out, &future, sizes, 2, "test", "sample"));
    CHECK(strstr(progcache_error_last(), "newer than this library"));
    /* NULL: the defaults. */
    CHECK_OK(progcache__options_load(&out, NULL, sizes, 2, "test", "sample"));
}

/* Version 1 of progcache_file_options and progcache_options (before
 * max_artifact_size): a program built against those headers keeps
 * working, with the default bound. */
static void test_public_structs(void)
{
    char *dir = test_mkdtemp("options");
    size_t v1_size = offsetof(progcache_file_options, max_artifact_size);
    progcache_file_options *fo = malloc(v1_size);
    CHECK(fo);
    progcache_file_options full = PROGCACHE_FILE_OPTIONS_INIT;
    full.version = 1;
    full.max_size = 1 << 20;
    memcpy(fo, &full, v1_size);
    progcache_store *store = NULL;
    CHECK_OK(progcache_store_file_new(&store, dir, fo));
    file_store *fs = progcache_store_as_file(store);
    CHECK(fs && fs->max_size == 1 << 20);
    CHECK(fs->max_artifact_size == PROGCACHE_MAX_ARTIFACT_SIZE_DEFAULT);
    progcache_store_free(store);
    free(fo);

    v1_size = offsetof(progcache_options, max_artifact_size);
    progcache_options *co = malloc(v1_size);
    CHECK(co);
    progcache_options cfull = PROGCACHE_OPTIONS_INIT;
    cfull.version = 1;
    cfull.flags = PROGCACHE_NO_REMOTE;
    memcpy(co, &cfull, v1_size);
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, co));
    CHECK_OK(progcache_put(cache, "k", 1, "v", 1));
    progcache_close(cache);
    free(co);

    /* A program result of version 1 is accepted and written only as far as
     * version 1 goes (its own test is tests/program/test_cache_messages.c);
     * here, a program struct is accepted at every known version and
     * refused at 0. */
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.version = 0;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&r, NULL, &p));
    CHECK(strstr(progcache_error_last(), "PROGCACHE_PROGRAM_INIT"));
    progcache_program_result_release(&r);
    test_rmdtemp(dir);
}

int main(void)
{
    test_rule();
    test_public_structs();
    printf("test_options: ok\n");
    return 0;
}
