/* Every key vector cuda.core 1.2.0 derived is reproduced byte for byte, and
 * every input cuda.core refused is refused here too, for the same reason. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "key_vectors.h"

static void check_key_vector(const key_vector *v)
{
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    unsigned char key[PROGCACHE_KEY_SIZE];
    char hex[2 * PROGCACHE_KEY_SIZE + 1];
    const char **names = calloc(v->num_names + 1, sizeof *names);
    CHECK(names != NULL);

    /* The C API tags all name expressions alike; the vectors do too. */
    for (size_t i = 0; i < v->num_names; i++) {
        const char *tagged = v->names[i];
        CHECK(!strncmp(tagged, "s:", 2) || !strncmp(tagged, "b:", 2));
        CHECK(tagged[0] == v->names[0][0]);
        names[i] = tagged + 2;
    }
    o.name_expressions_are_bytes = v->num_names && v->names[0][0] == 'b';
    o.source = v->code;
    o.source_len = v->code_len;
    CHECK_OK(progcache_target_parse(&o.target, v->target));
    o.options = (const char *const *)v->argv;
    o.num_options = v->argc;
    o.name = v->options_name;
    o.name_expressions = names;
    o.num_name_expressions = v->num_names;
    o.extra_digest = v->digest;
    o.extra_digest_len = v->digest_len;
    o.nvrtc_major = 13; /* the vectors were made with NVRTC 13.0 */
    o.nvrtc_minor = 0;
    CHECK_OK(progcache_key_nvrtc(key, &o));
    progcache_key_hex(hex, key, sizeof key);
    if (strcmp(hex, v->key_hex)) {
        fprintf(stderr, "vector on line %d: got %s, cuda.core %s\n", v->line, hex, v->key_hex);
        CHECK(!"key differs from cuda.core's");
    }

    /* Round trip through the hex parser. */
    unsigned char back[PROGCACHE_KEY_SIZE];
    CHECK_OK(progcache_key_from_hex(back, v->key_hex));
    CHECK(!memcmp(back, key, sizeof key));

    /* Without its digest, a vector that needed one must be refused. */
    if (v->digest) {
        int needs = 0;
        for (size_t i = 0; i < v->argc; i++)
            needs |= !strncmp(v->argv[i], "--include-path", 14);
        if (needs) {
            o.extra_digest = NULL;
            o.extra_digest_len = 0;
            CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(key, &o));
        }
    }
    free(names);
}

/* cuda.core states its refusals as ProgramOptions fields; a C caller writes
 * the NVRTC option strings those fields become. */
static void check_rejection(const key_vector *v)
{
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    unsigned char key[PROGCACHE_KEY_SIZE];
    const char *argv[2] = {"-arch=sm_90", NULL};
    const char *named = NULL; /* what the message must name */
    static const unsigned char digest[4] = {1, 2, 3, 4};

    o.source = "extern \"C\" __global__ void k(float *a){ a[threadIdx.x] *= 2.0f; }\n";
    o.options = argv;
    o.num_options = 2;
    o.nvrtc_major = 13;
    if (strstr(v->rejected, "'include_path'"))
        named = argv[1] = "--include-path=/usr/include";
    else if (strstr(v->rejected, "'create_pch'"))
        named = argv[1] = "--create-pch=x.pch";
    else if (strstr(v->rejected, "'pre_include'"))
        named = argv[1] = "--pre-include=a.h";
    else if (strstr(v->rejected, "'name': 'dir/k.cu'")) {
        o.num_options = 1;
        named = o.name = "dir/k.cu";
    } else {
        fprintf(stderr, "line %d: rejection %s is not known to this test\n", v->line,
                v->rejected);
        CHECK(!"unknown rejection line");
    }
    CHECK(!strcmp(v->error, "ValueError"));
    CHECK_RC(PROGCACHE_EUNSAFEKEY, progcache_key_nvrtc(key, &o));
    CHECK(strstr(progcache_error_last(), named) != NULL);
    printf("refused like cuda.core (%s): %s\n", v->rejected, progcache_error_last());

    /* cuda.core's reason decides whether a digest makes it acceptable. */
    int side_effect = strstr(v->msg, "side effect") != NULL;
    CHECK(side_effect || strstr(v->msg, "without an extra_digest"));
    o.extra_digest = digest;
    o.extra_digest_len = sizeof digest;
    CHECK_RC(side_effect ? PROGCACHE_EUNSAFEKEY : PROGCACHE_OK, progcache_key_nvrtc(key, &o));
}

int main(void)
{
    const char *dir = test_reference_dir();
    char path[4096];
    key_vector *v = NULL;
    if (!dir) {
        /* The data is in the repository (tests/data): missing is a fault,
         * not a reason to skip the proof of compatibility. */
        printf("FAIL: no key vectors at PROGCACHE_REFERENCE_DIR=\"%s\" (tests/data in the "
               "repository)\n",
               getenv("PROGCACHE_REFERENCE_DIR") ? getenv("PROGCACHE_REFERENCE_DIR") : "");
        return 1;
    }
    snprintf(path, sizeof path, "%s/cuda-core-key-vectors.jsonl", dir);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("SKIPPED: %s is missing\n", path);
        return TEST_SKIP_CODE;
    }
    fclose(probe);

    int n = key_vectors_load(&v, path);
    CHECK(n > 0);
    int keys = 0, rejections = 0, non_ascii = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].is_rejected) {
            check_rejection(&v[i]);
            rejections++;
            continue;
        }
        check_key_vector(&v[i]);
        keys++;
        for (size_t j = 0; j < v[i].code_len; j++)
            non_ascii |= (unsigned char)v[i].code[j] >= 0x80;
    }
    /* The file has both kinds, and one source with non-ASCII text; a parse
     * that lost any of them would make this test vacuous. */
    CHECK(keys >= 10);
    CHECK(rejections >= 4);
    CHECK(non_ascii);
    printf("%d key vectors reproduced, %d refusals matched\n", keys, rejections);
    key_vectors_free(v, n);
    return 0;
}
