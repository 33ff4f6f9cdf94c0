#include "cuda_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "sha256.h"
#include "progcache/sys/store.h"
#include "wrap_store.h"

/* The "scale" kernel of the cuda.core reference cache (its index's first
 * line), byte for byte, so keys and artifacts can be compared with it. */
const char fixture_scale_source[] =
    "extern \"C\" __global__ void scale(float *a, float s, int n){ int i = "
    "blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] *= s; }\n";

const char *const fixture_options[2] = {"-arch=sm_90", "--std=c++17"};

progcache_program fixture_program(unsigned int flags)
{
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = fixture_scale_source;
    p.nvrtc.target = PROGCACHE_TARGET_CUBIN;
    p.nvrtc.options = fixture_options;
    p.nvrtc.num_options = 2;
    p.kernel = "scale";
    p.flags = flags;
    return p;
}

void fixture_entry_path(char *out, size_t len, const char *root, const unsigned char *key)
{
    unsigned char digest[32];
    char hex[65];
    CHECK_OK(progcache__sha256_oneshot(digest, key, PROGCACHE_KEY_SIZE));
    progcache__hex(hex, digest, sizeof digest);
    snprintf(out, len, "%s/entries/%.2s/%s", root, hex, hex + 2);
}

void fixture_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
}

void fixture_replace_file(const char *path, const void *data, size_t size)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.fixture-tmp", path);
    fixture_write_file(tmp, data, size);
    CHECK(rename(tmp, path) == 0);
}

/* ---- a store that fails on demand, over the memory store -------------- */

typedef struct flaky {
    fixture_wrap w;
    fixture_store_ctl *ctl;
} flaky;

static int flaky_get(progcache_buf *out, progcache_store *s, const void *key, size_t key_len)
{
    if (((flaky *)s)->ctl->fail_get)
        return progcache__error(PROGCACHE_EIO, "flaky store: read failed (injected)");
    return fixture_wrap_get(out, s, key, key_len);
}

static int flaky_put(progcache_store *s, const void *key, size_t key_len, const void *data,
                     size_t size)
{
    flaky *f = (flaky *)s;
    if (f->ctl->fail_put)
        return progcache__error(PROGCACHE_EIO, "flaky store: no space left on device (injected)");
    int rc = fixture_wrap_put(s, key, key_len, data, size);
    if (!rc)
        f->ctl->puts++;
    return rc;
}

progcache_store *fixture_flaky_store(fixture_store_ctl *ctl)
{
    flaky *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    progcache_store *inner = NULL;
    CHECK_OK(progcache_store_memory_new(&inner, NULL));
    fixture_wrap_init(&f->w, "flaky", inner);
    f->ctl = ctl;
    f->w.base.get = flaky_get;
    f->w.base.put = flaky_put;
    return &f->w.base;
}

unsigned char *fixture_scale_cubin(size_t *size)
{
    char *dir;
    progcache *cache = test_cache_tmp(&dir, "scale-cubin");
    progcache_program p = fixture_program(PROGCACHE_PROGRAM_NO_LOAD);
    progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
    unsigned char *bytes = fixture_compile_copy(&r, cache, &p, size);
    progcache_program_result_release(&r);
    test_cache_done(cache, dir);
    return bytes;
}

unsigned char *fixture_compile_copy(progcache_program_result *r, progcache *cache,
                                    const progcache_program *p, size_t *size)
{
    CHECK_OK(progcache_compile_or_load(r, cache, p));
    *size = r->artifact.size;
    unsigned char *copy = malloc(*size);
    CHECK(copy != NULL);
    memcpy(copy, r->artifact.data, *size);
    return copy;
}
