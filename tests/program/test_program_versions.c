/* progcache_program version 1: the struct a program built against the
 * older header passes, whose embedded progcache_key_nvrtc_options had no
 * headers, so every field after it sits elsewhere. compile_or_load must
 * read it in its own layout (compile_or_load.c, program_from_v1): a
 * struct of exactly the old size, in a block of exactly that size (ASan
 * catches a read past it), gives the same key, honours its flags and
 * calls its log callback with its context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_fixtures.h"

/* The version-1 layouts, field for field. */
typedef struct old_key_options {
    unsigned int version;
    const char *source;
    size_t source_len;
    progcache_target target;
    const char *const *options;
    size_t num_options;
    const char *name;
    const char *const *name_expressions;
    size_t num_name_expressions;
    int name_expressions_are_bytes;
    const unsigned char *extra_digest;
    size_t extra_digest_len;
    int nvrtc_major;
    int nvrtc_minor;
} old_key_options;

typedef struct old_program {
    unsigned int version;
    old_key_options nvrtc;
    const char *kernel;
    unsigned int flags;
    progcache_log_fn log;
    void *log_ctx;
    unsigned int wait_timeout_ms;
} old_program;

static int log_calls;
static void *log_seen;

static void on_log(void *ctx, int level, const char *message)
{
    (void)level;
    (void)message;
    log_calls++;
    log_seen = ctx;
}

int main(void)
{
    CHECK(sizeof(old_key_options) == offsetof(progcache_key_nvrtc_options, headers));
    CHECK(sizeof(old_program) < sizeof(progcache_program));

    char *dir = test_mkdtemp("program-versions");
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program now = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &now));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    unsigned char key[32];
    memcpy(key, r.key, 32);
    progcache_program_result_release(&r);

    old_program *old = malloc(sizeof *old);
    memset(old, 0, sizeof *old);
    old->version = 1;
    old->nvrtc.version = 1;
    old->nvrtc.source = now.nvrtc.source;
    old->nvrtc.target = now.nvrtc.target;
    old->nvrtc.options = now.nvrtc.options;
    old->nvrtc.num_options = now.nvrtc.num_options;
    old->kernel = "scale";
    old->flags = PROGCACHE_PROGRAM_NO_LOAD; /* read at its old place, or the load would fail */
    old->log = on_log;
    old->log_ctx = &log_calls;
    old->wait_timeout_ms = 1000;
    const progcache_program *as_program = (const progcache_program *)(const void *)old;

    CHECK_OK(progcache_compile_or_load(&r, cache, as_program));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !memcmp(r.key, key, 32));
    progcache_program_result_release(&r);

    /* The log callback and its context, read at their old places: a
     * damaged entry is healed, and the heal is logged. */
    char path[4096];
    fixture_entry_path(path, sizeof path, dir, key);
    fixture_replace_file(path, "not a cubin", 11);
    CHECK_OK(progcache_compile_or_load(&r, cache, as_program));
    CHECK(r.healed && r.status == PROGCACHE_STATUS_MISS);
    CHECK(log_calls > 0 && log_seen == &log_calls);
    progcache_program_result_release(&r);

    /* Its nvrtc member must be version 1 too. */
    old->nvrtc.version = 2;
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&r, cache, as_program));
    CHECK(strstr(progcache_error_last(), "version-1 progcache_program"));

    free(old);
    test_cache_done(cache, dir);
    printf("program versions: ok\n");
    return 0;
}
