/* PROGCACHE_PROGRAM_NO_LOAD loads nothing, so no driver call checks that
 * program->kernel is in the artifact: compile-or-load reads the artifact's
 * own kernels instead and fails naming the one that is missing (issue 35;
 * before, the call succeeded and cached a CUBIN or PTX without it). On a
 * miss and on a hit alike; a kernel that is there, or none, passes. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cuda_fixtures.h"

static int compile(progcache *cache, const char *kernel, progcache_target target,
                   progcache_status *status)
{
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    p.kernel = kernel;
    p.nvrtc.target = target;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    int rc = progcache_compile_or_load(&r, cache, &p);
    *status = r.status;
    progcache_program_result_release(&r);
    return rc;
}

int main(void)
{
    char *dir = NULL;
    progcache *cache = test_cache_tmp(&dir, "noload");
    progcache_target targets[] = {PROGCACHE_TARGET_CUBIN, PROGCACHE_TARGET_PTX};
    for (size_t i = 0; i < 2; i++) {
        progcache_status st;
        /* a miss, then a hit: the wrong name fails both times */
        for (int pass = 0; pass < 2; pass++) {
            CHECK_RC(PROGCACHE_EINVAL, compile(cache, "scale_typo", targets[i], &st));
            const char *msg = progcache_error_last();
            CHECK(strstr(msg, "kernel 'scale_typo' is not in the ") &&
                  strstr(msg, "(its kernels: scale)"));
        }
        CHECK_OK(compile(cache, "scale", targets[i], &st));
        CHECK(st == PROGCACHE_STATUS_HIT); /* stored by the first call */
        CHECK_OK(compile(cache, NULL, targets[i], &st));
    }
    test_cache_done(cache, dir);
    return 0;
}
