/* progcache_compile_or_load without a GPU (PROGCACHE_PROGRAM_NO_LOAD):
 * MISS then HIT, entries cuda.core wrote, a failing cache never losing the
 * artifact, healing of damaged entries, errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "cuda_fixtures.h"
#include "progcache/stats.h"
#include "sha256.h"

#define REFERENCE_SCALE_CUBIN_KEY "59bcff4260892d4dc837f7f50b9a5d418cbdc5901e53c093c52aef55316be2c1"

static int warnings;
static char last_warning[2048];

static void count_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level == PROGCACHE_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", message);
    }
}

static void test_miss_then_hit(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "col");
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);

    progcache_program_result miss = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&miss, cache, &p));
    CHECK(miss.status == PROGCACHE_STATUS_MISS);
    CHECK(!strcmp(progcache_status_name(miss.status), "MISS"));
    CHECK(miss.compile_ms > 0 && miss.store_ms > 0 && miss.load_ms == 0);
    CHECK(!miss.healed && !miss.cache_error && !miss.store_pending);
    CHECK(miss.library == NULL && miss.kernel == NULL);
    CHECK(miss.artifact.size > 1000 && !memcmp(miss.artifact.data, "\177ELF", 4));

    /* The key is the one progcache_key_nvrtc derives, and cuda.core's. */
    unsigned char key[PROGCACHE_KEY_SIZE], ref_key[PROGCACHE_KEY_SIZE];
    CHECK_OK(progcache_key_nvrtc(key, &p.nvrtc));
    CHECK(!memcmp(key, miss.key, sizeof key));
    int major = 0, minor = 0;
    CHECK_OK(progcache_nvrtc_version(&major, &minor));
    CHECK_OK(progcache_key_from_hex(ref_key, REFERENCE_SCALE_CUBIN_KEY));
    if (major == 13 && minor == 0)
        CHECK(!memcmp(ref_key, miss.key, sizeof key));

    /* The entry is where cuda.core looks, holding the raw artifact. */
    char path[4096];
    fixture_entry_path(path, sizeof path, dir, miss.key);
    size_t n = 0;
    char *bytes = test_read_file(path, &n);
    CHECK(bytes && n == miss.artifact.size && !memcmp(bytes, miss.artifact.data, n));
    free(bytes);

    progcache_program_result hit = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&hit, cache, &p));
    CHECK(hit.status == PROGCACHE_STATUS_HIT);
    CHECK(hit.compile_ms == 0 && hit.store_ms == 0);
    CHECK(!memcmp(hit.key, miss.key, sizeof key));
    CHECK(hit.artifact.size == miss.artifact.size);
    CHECK(!memcmp(hit.artifact.data, miss.artifact.data, hit.artifact.size));

    /* A result may be passed again: its buffer is reused. */
    unsigned char *before = hit.artifact.data;
    CHECK_OK(progcache_compile_or_load(&hit, cache, &p));
    CHECK(hit.status == PROGCACHE_STATUS_HIT && hit.artifact.data == before);

    progcache_program_result_release(&miss);
    progcache_program_result_release(&hit);
    CHECK(hit.artifact.data == NULL && hit.version == PROGCACHE_PROGRAM_RESULT_VERSION);
    progcache_program_result_release(&hit); /* twice is fine */
    progcache_program_result_release(NULL);
    test_cache_done(cache, dir);
}

static void test_disabled(void)
{
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, NULL, &p));
    CHECK(r.status == PROGCACHE_STATUS_DISABLED);
    CHECK(!strcmp(progcache_status_name(r.status), "DISABLED"));
    CHECK(r.artifact.size > 1000 && r.compile_ms > 0 && r.lookup_ms >= 0);
    progcache_program_result_release(&r);
}

/* An entry written by cuda.core's FileStreamProgramCache is a hit. */
static void test_reference_entry_hits(void)
{
    const char *ref = test_reference_dir();
    int major = 0, minor = 0;
    CHECK_OK(progcache_nvrtc_version(&major, &minor));
    if (!ref || major != 13 || minor != 0)
        return; /* keys carry the NVRTC version: only 13.0 matches the reference */
    char src[4096];
    snprintf(src, sizeof src, "%s/cuda-core-cache", ref);
    char *dir = test_mkdtemp("colref");
    CHECK(test_copytree(src, dir) == 0);
    progcache *cache;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT);
    CHECK(r.artifact.size == 3832); /* the size the reference index gives */
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
}

/* Rule 1: a failing cache costs the cache, never the artifact. */
static void test_failing_cache(void)
{
    fixture_store_ctl ctl = {0, 1, 0};
    progcache_store *store = fixture_flaky_store(&ctl);
    progcache *cache;
    CHECK_OK(progcache_open_tiers(&cache, &store, 1, NULL));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    p.log = count_log;
    warnings = 0;

    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p)); /* put fails: full disk */
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.artifact.size > 1000);
    CHECK(r.cache_error == PROGCACHE_EIO);
    CHECK(strstr(r.cache_message, "store") && strstr(r.cache_message, "no space left"));
    CHECK(warnings == 1 && strstr(last_warning, "no space left"));
    CHECK(ctl.puts == 0);

    ctl.fail_put = 0;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p)); /* stored this time */
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.cache_error == 0 && ctl.puts == 1);
    CHECK(r.cache_message[0] == '\0');

    ctl.fail_get = 1; /* unreadable cache: compile instead */
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.artifact.size > 1000);
    CHECK(r.cache_error == PROGCACHE_EIO && strstr(r.cache_message, "lookup"));

    ctl.fail_get = 0;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && r.cache_error == 0);
    progcache_program_result_release(&r);
    progcache_close(cache);
}

/* A cache opened read-only: every store fails, every artifact is returned. */
static void test_read_only_cache(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "colro"); /* create the layout */
    progcache_close(cache);
    progcache_options opts = PROGCACHE_OPTIONS_INIT;
    opts.flags = PROGCACHE_FILE_READONLY;
    CHECK_OK(progcache_open(&cache, dir, &opts));
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.artifact.size > 1000);
    CHECK(r.cache_error != 0 && strstr(r.cache_message, "store"));
    char path[4096];
    fixture_entry_path(path, sizeof path, dir, r.key);
    CHECK(test_read_file(path, NULL) == NULL);
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
}

/* Rule 2: damaged entries are replaced, not trusted. The damaged file is a
 * new file (as if written by another program), so the file store has no
 * digest of its own to catch it with, and this layer must. */
static void test_heal(const char *what, size_t keep, const char *reason)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "colheal");
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    p.log = count_log;
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    size_t size = r.artifact.size;
    unsigned char *good = malloc(size);
    memcpy(good, r.artifact.data, size);

    char path[4096];
    fixture_entry_path(path, sizeof path, dir, r.key);
    if (keep) /* a truncated ELF file */
        fixture_replace_file(path, good, keep);
    else
        fixture_replace_file(path, what, strlen(what));

    warnings = 0;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.compile_ms > 0);
    if (keep) {
        /* A cut CUBIN is still an ELF file: the file store's own structure
         * check refuses it on read (a miss, the entry removed and counted),
         * so this layer never sees it. */
        CHECK(r.healed == 0);
        progcache_stats st = PROGCACHE_STATS_INIT;
        CHECK_OK(progcache_stats_get(&st, cache));
        CHECK(st.corrupt_removed == 1);
    } else {
        /* Bytes that are no artifact pass the store (it holds any values);
         * this layer's check wants the target's kind and heals. */
        CHECK(r.healed == 1);
        if (!strstr(r.heal_reason, reason))
            fprintf(stderr, "heal reason: %s\n", r.heal_reason);
        CHECK(strstr(r.heal_reason, reason) != NULL);
        CHECK(warnings >= 1 && strstr(last_warning, "unusable"));
    }
    CHECK(r.artifact.size == size && !memcmp(r.artifact.data, good, size));
    size_t n = 0;
    char *bytes = test_read_file(path, &n); /* the entry was replaced */
    CHECK(bytes && n == size && !memcmp(bytes, good, size));
    free(bytes);

    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !r.healed);
    free(good);
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
}

/* Damage in place (same file): whichever layer notices first, the call
 * compiles again, returns the right bytes and the entry is good again. */
static void test_damage_in_place(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "coldmg");
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    size_t size;
    unsigned char *good = fixture_compile_copy(&r, cache, &p, &size);
    char path[4096];
    fixture_entry_path(path, sizeof path, dir, r.key);
    unsigned char *bad = malloc(size);
    memcpy(bad, good, size);
    bad[size / 2] ^= 0x5a; /* one flipped byte: structure intact */
    fixture_write_file(path, bad, size);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    CHECK(r.artifact.size == size && !memcmp(r.artifact.data, good, size));
    size_t n = 0;
    char *bytes = test_read_file(path, &n);
    CHECK(bytes && n == size && !memcmp(bytes, good, size));
    free(bytes);
    free(bad);
    free(good);
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
}

static void test_errors(void)
{
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;

    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(NULL, NULL, &p));
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&r, NULL, NULL));
    progcache_program_result bad = {0};
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&bad, NULL, &p));
    CHECK(strstr(progcache_error_last(), "PROGCACHE_PROGRAM_RESULT_INIT"));
    progcache_program old = p;
    old.version = 0;
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&r, NULL, &old));

    /* LTO-IR cannot be loaded by the driver. */
    progcache_program lto = fixture_program(0);
    lto.nvrtc.target = PROGCACHE_TARGET_LTOIR;
    CHECK_RC(PROGCACHE_EINVAL, progcache_compile_or_load(&r, NULL, &lto));
    CHECK(strstr(progcache_error_last(), "nvJitLink"));
    lto.flags = PROGCACHE_PROGRAM_NO_LOAD;
    CHECK_OK(progcache_compile_or_load(&r, NULL, &lto));

    /* A compile error: the code, NVRTC's log in the message and the result. */
    progcache_program broken = p;
    broken.nvrtc.source = "__global__ void k() { this is not C++; }\n";
    CHECK_RC(PROGCACHE_ECOMPILE, progcache_compile_or_load(&r, NULL, &broken));
    CHECK(strstr(progcache_error_last(), "NVRTC could not compile"));
    CHECK(r.log.size > 0 && strstr((const char *)r.log.data, "error"));
    CHECK(r.artifact.size == 0);

    /* Inputs the key cannot describe are refused before anything runs: a
     * precompiled header (include paths are covered by the include
     * scanner, tests/headers/test_headers_key.c). */
    const char *unsafe[] = {"-arch=sm_90", "--use-pch=x.pch"};
    progcache_program u = p;
    u.nvrtc.options = unsafe;
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_compile_or_load(&r, NULL, &u));
    progcache_program_result_release(&r);

    progcache_program init;
    progcache_program_init(&init);
    CHECK(init.version == PROGCACHE_PROGRAM_VERSION);
    CHECK(init.nvrtc.version == PROGCACHE_KEY_NVRTC_OPTIONS_VERSION);
    progcache_program_init(NULL);
}

/* Loading without a driver fails clearly, and the compiled artifact is
 * still returned and stored. */
static void test_load_without_driver(void)
{
    const progcache_cuda_api *api;
    if (progcache_cuda_load(&api) != PROGCACHE_ENOCUDA)
        return; /* a machine with a GPU: the gpu tests cover loading */
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "colnod");
    progcache_program p = fixture_program(0);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_RC(PROGCACHE_ENOCUDA, progcache_compile_or_load(&r, cache, &p));
    CHECK(strstr(progcache_error_last(), "no CUDA"));
    CHECK(r.artifact.size > 1000 && r.status == PROGCACHE_STATUS_MISS);
    char path[4096];
    fixture_entry_path(path, sizeof path, dir, r.key);
    char *bytes = test_read_file(path, NULL);
    CHECK(bytes != NULL);
    free(bytes);
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
}

/* The seal (docs/FORMAT.md): what compile-or-load stores is sealed as a
 * whole artifact, so its hits are checked for kind only. Bytes put under
 * the key through the cache API are sealed too, but a damaged CUBIN is not
 * marked whole, so a hit on it gets the full structure check and heals;
 * an entry with an older seal (the digest alone) is still verified and
 * served. */
static void test_seal(void)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "colseal");
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS);
    char path[4096];
    fixture_entry_path(path, sizeof path, dir, r.key);
    unsigned char seal[64];
    ssize_t n = getxattr(path, "user.progcache.sha256", seal, sizeof seal);
    if (n < 0) {
        puts("test_compile_or_load: no user xattrs here; seal not checked");
        goto done;
    }
    /* Format 2, then the flags byte (docs/FORMAT.md). */
    CHECK(n == 42 && seal[0] == 2 && seal[1] == 1);
    size_t size = r.artifact.size;
    unsigned char *good = malloc(size);
    memcpy(good, r.artifact.data, size);

    CHECK_OK(progcache_put(cache, r.key, sizeof r.key, good, size / 2));
    CHECK(getxattr(path, "user.progcache.sha256", seal, sizeof seal) == 42 && seal[1] == 0);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && r.healed == 1);
    CHECK(strstr(r.heal_reason, "past the end") != NULL);
    CHECK(r.artifact.size == size && !memcmp(r.artifact.data, good, size));

    /* The seal of an older progcache, the digest of the bytes alone, bound
     * no entry name: read as no seal, so the bytes are structure-checked
     * as cuda.core's are. A whole CUBIN is a hit; one cut short in place
     * (the old seal still on it) is caught by the store. */
    CHECK(getxattr(path, "user.progcache.sha256", seal, sizeof seal) == 42 && seal[1] == 1);
    CHECK_OK(progcache__sha256_oneshot(seal, good, size));
    CHECK(setxattr(path, "user.progcache.sha256", seal, 32, 0) == 0);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_HIT && !r.healed);
    CHECK(truncate(path, (off_t)size - 100) == 0);
    CHECK(getxattr(path, "user.progcache.sha256", seal, sizeof seal) == 32);
    CHECK_OK(progcache_compile_or_load(&r, cache, &p));
    CHECK(r.status == PROGCACHE_STATUS_MISS && !r.healed); /* the store caught it */
    free(good);
done:
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
}

int main(void)
{
    test_miss_then_hit();
    test_disabled();
    test_reference_entry_hits();
    test_failing_cache();
    test_read_only_cache();
    test_heal("this is not an ELF file", 0, "found unknown");
    test_heal(NULL, 1024, "past the end");
    test_heal(NULL, 64, "past the end");
    test_damage_in_place();
    test_seal();
    test_errors();
    test_load_without_driver();
    puts("test_compile_or_load: ok");
    return 0;
}
