/* progcache_nvrtc_compile: CUBIN, PTX and LTO-IR without a GPU, compile
 * errors with the log, lowered names, bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/expect.h"
#include "check.h"
#include "cuda_fixtures.h"

#define REFERENCE_SCALE_CUBIN_KEY "59bcff4260892d4dc837f7f50b9a5d418cbdc5901e53c093c52aef55316be2c1"

static progcache_key_nvrtc_options scale_program(progcache_target target)
{
    progcache_key_nvrtc_options p = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    p.source = fixture_scale_source;
    p.target = target;
    p.options = fixture_options;
    p.num_options = 2;
    return p;
}

/* Whether the first size bytes of b pass the check of an artifact of
 * target (sealed: the kind check alone); why (256 bytes) says why not. */
static int passes(const progcache_buf *b, size_t size, progcache_target target, int sealed,
                  char *why)
{
    return progcache__artifact_check(b->data, size, target, sealed, why, 256) == 0;
}

static void test_cubin(void)
{
    progcache_key_nvrtc_options p = scale_program(PROGCACHE_TARGET_CUBIN);
    progcache_buf out = PROGCACHE_BUF_INIT, log = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_compile(&out, &log, NULL, &p));
    CHECK(out.size > 1000);
    CHECK(!memcmp(out.data, "\177ELF", 4));
    char why[256];
    CHECK(passes(&out, out.size, PROGCACHE_TARGET_CUBIN, 0, why));
    /* Sealed bytes (they matched their stored digest) get the kind check
     * only: the right kind passes, another kind does not, and a CUBIN cut
     * short fails only the full check. */
    CHECK(passes(&out, out.size, PROGCACHE_TARGET_CUBIN, 1, why));
    CHECK(!passes(&out, out.size, PROGCACHE_TARGET_PTX, 1, why));
    CHECK(strstr(why, "expected a PTX") != NULL);
    CHECK(!passes(&out, 100, PROGCACHE_TARGET_CUBIN, 0, why));
    CHECK(passes(&out, 100, PROGCACHE_TARGET_CUBIN, 1, why));
    CHECK(!passes(&out, 32, PROGCACHE_TARGET_CUBIN, 1, why));
    CHECK(memmem(out.data, out.size, "scale", 5) != NULL);
    /* The same compile cuda.core made for the reference cache: with the
     * same NVRTC the bytes are the same, so C and Python entries agree. */
    const char *ref = test_reference_dir();
    if (ref) {
        unsigned char key[PROGCACHE_KEY_SIZE];
        CHECK_OK(progcache_key_from_hex(key, REFERENCE_SCALE_CUBIN_KEY));
        char path[4096];
        char root[4096];
        snprintf(root, sizeof root, "%s/cuda-core-cache", ref);
        fixture_entry_path(path, sizeof path, root, key);
        size_t n = 0;
        char *bytes = test_read_file(path, &n);
        CHECK(bytes != NULL);
        int major = 0, minor = 0;
        CHECK_OK(progcache_nvrtc_version(&major, &minor));
        if (major == 13 && minor == 0) { /* the reference's NVRTC */
            CHECK(n == out.size);
            CHECK(!memcmp(bytes, out.data, n));
        }
        free(bytes);
    }
    progcache_buf_free(&out);
    progcache_buf_free(&log);
}

static void test_ptx_and_ltoir(void)
{
    progcache_key_nvrtc_options p = scale_program(PROGCACHE_TARGET_PTX);
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_compile(&out, NULL, NULL, &p));
    /* PTX keeps NVRTC's final NUL, as cuda.core stores it. */
    CHECK(out.size > 100 && out.data[out.size - 1] == '\0');
    CHECK(strstr((const char *)out.data, ".entry scale") != NULL);
    char why[256];
    CHECK(passes(&out, out.size, PROGCACHE_TARGET_PTX, 0, why));
    CHECK(passes(&out, out.size, PROGCACHE_TARGET_PTX, 1, why));
    CHECK(!passes(&out, out.size, PROGCACHE_TARGET_CUBIN, 1, why));

    p.target = PROGCACHE_TARGET_LTOIR;
    CHECK_OK(progcache_nvrtc_compile(&out, NULL, NULL, &p));
    CHECK(out.size > 0);
    CHECK(memcmp(out.data, "\177ELF", 4) != 0);
    progcache_buf_free(&out);
}

static void test_compile_error(void)
{
    progcache_key_nvrtc_options p = scale_program(PROGCACHE_TARGET_CUBIN);
    p.source = "extern \"C\" __global__ void broken(float *a) { a[0] = undefined_thing; }\n";
    p.name = "broken.cu";
    progcache_buf out = PROGCACHE_BUF_INIT, log = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ECOMPILE, progcache_nvrtc_compile(&out, &log, NULL, &p));
    const char *msg = progcache_error_last();
    CHECK(strstr(msg, "NVRTC could not compile 'broken.cu'") != NULL);
    CHECK(strstr(msg, "undefined_thing") != NULL); /* the log is in the message */
    CHECK(strstr(msg, "log cut") == NULL);
    CHECK(log.size > 0 && strstr((const char *)log.data, "undefined_thing") != NULL);
    progcache_buf_free(&out);
    progcache_buf_free(&log);
}

/* A log longer than the message can hold: the message keeps the start and
 * says so; the log buffer has all of it. */
static void test_long_log(void)
{
    size_t cap = 200000, len = 0;
    char *src = malloc(cap);
    CHECK(src != NULL);
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(src + len, cap - len,
                                "__device__ int f%d() { return missing_identifier_%d; }\n", i, i);
    progcache_key_nvrtc_options p = scale_program(PROGCACHE_TARGET_CUBIN);
    p.source = src;
    progcache_buf out = PROGCACHE_BUF_INIT, log = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_ECOMPILE, progcache_nvrtc_compile(&out, &log, NULL, &p));
    const char *msg = progcache_error_last();
    CHECK(strstr(msg, "missing_identifier_0") != NULL);
    CHECK(strstr(msg, "[log cut") != NULL);
    CHECK(log.size > 7000);
    /* NVRTC stops after 100 errors; the 90th is past the cut. */
    CHECK(strstr((const char *)log.data, "missing_identifier_90;") != NULL);
    CHECK(strstr(msg, "missing_identifier_90;") == NULL);
    /* Without a log buffer, the message is the same. */
    CHECK_RC(PROGCACHE_ECOMPILE, progcache_nvrtc_compile(&out, NULL, NULL, &p));
    CHECK(strstr(progcache_error_last(), "[log cut") != NULL);
    progcache_buf_free(&out);
    progcache_buf_free(&log);
    free(src);
}

static void test_lowered_names(void)
{
    const char *names[] = {"axpy<float>", "axpy<double>"};
    progcache_key_nvrtc_options p = scale_program(PROGCACHE_TARGET_CUBIN);
    p.source = "template <typename T> __global__ void axpy(T a, T *x, T *y) { y[0] += a * x[0]; }\n";
    p.name_expressions = names;
    p.num_name_expressions = 2;
    progcache_buf out = PROGCACHE_BUF_INIT, lowered = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_compile(&out, NULL, &lowered, &p));
    const char *f = progcache_names_at(&lowered, 0);
    const char *d = progcache_names_at(&lowered, 1);
    CHECK(f && d);
    CHECK(!strncmp(f, "_Z", 2) && !strncmp(d, "_Z", 2));
    CHECK(strcmp(f, d) != 0);
    CHECK(progcache_names_at(&lowered, 2) == NULL);
    CHECK(memmem(out.data, out.size, f, strlen(f)) != NULL);
    progcache_buf_free(&out);
    progcache_buf_free(&lowered);
}

static void test_bad_arguments(void)
{
    progcache_key_nvrtc_options p = scale_program(PROGCACHE_TARGET_CUBIN);
    progcache_buf out = PROGCACHE_BUF_INIT;
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_compile(NULL, NULL, NULL, &p));
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_compile(&out, NULL, NULL, NULL));
    p.version = 99;
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_compile(&out, NULL, NULL, &p));
    CHECK(strstr(progcache_error_last(), "version") != NULL);
    p = scale_program(PROGCACHE_TARGET_CUBIN);
    p.source = NULL;
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_compile(&out, NULL, NULL, &p));
    p = scale_program((progcache_target)7);
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_compile(&out, NULL, NULL, &p));
    const char *with_null[] = {"-arch=sm_90", NULL};
    p = scale_program(PROGCACHE_TARGET_CUBIN);
    p.options = with_null;
    CHECK_RC(PROGCACHE_EINVAL, progcache_nvrtc_compile(&out, NULL, NULL, &p));
    CHECK(strstr(progcache_error_last(), "option 1") != NULL);
    /* A virtual architecture gives PTX but no CUBIN: said plainly. */
    const char *virt[] = {"-arch=compute_90"};
    p = scale_program(PROGCACHE_TARGET_CUBIN);
    p.options = virt;
    p.num_options = 1;
    CHECK_RC(PROGCACHE_ECOMPILE, progcache_nvrtc_compile(&out, NULL, NULL, &p));
    CHECK(strstr(progcache_error_last(), "real architecture") != NULL);
    /* A length-delimited source need not be NUL-terminated. */
    p = scale_program(PROGCACHE_TARGET_PTX);
    size_t len = strlen(fixture_scale_source);
    char *copy = malloc(len + 16);
    memcpy(copy, fixture_scale_source, len);
    memset(copy + len, 'x', 16); /* no NUL after the text */
    p.source = copy;
    p.source_len = len;
    CHECK_OK(progcache_nvrtc_compile(&out, NULL, NULL, &p));
    free(copy);
    progcache_buf_free(&out);
}

int main(void)
{
    test_cubin();
    test_ptx_and_ltoir();
    test_compile_error();
    test_long_log();
    test_lowered_names();
    test_bad_arguments();
    puts("test_nvrtc: ok");
    return 0;
}
