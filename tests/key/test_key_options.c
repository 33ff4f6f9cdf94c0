/* Which NVRTC option strings make a key unsafe: every spelling NVRTC accepts
 * for an option that reads or writes outside files is refused (with a
 * message naming it exactly as given), options that only look alike are
 * not, and a digest lifts the refusal for reads but never for writes. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "key/key_options.h"

static const unsigned char digest[] = {0xde, 0xad, 0xbe, 0xef};

/* Key for {"-arch=sm_90", opts...}, with or without the digest. */
static int key_for(const char *const *extra, size_t n, const char *name, int with_digest)
{
    const char *argv[8] = {"-arch=sm_90"};
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    CHECK(n < 8);
    if (n)
        memcpy(argv + 1, extra, n * sizeof *extra);
    o.source = "__global__ void k() {}\n";
    o.options = argv;
    o.num_options = n + 1;
    o.name = name;
    o.nvrtc_major = 13;
    if (with_digest) {
        o.extra_digest = digest;
        o.extra_digest_len = sizeof digest;
    }
    return progcache_key_nvrtc(key, &o);
}

/* Each case: the option strings (a value may be its own string), which
 * string the message must name, and whether a digest makes it acceptable. */
typedef struct refusal {
    const char *argv[2];
    int side_effect;
} refusal;

static const refusal refused[] = {
    /* include path: -I is a prefix option in every form */
    {{"-I/tmp"}, 0},
    {{"-I=/tmp"}, 0},
    {{"-I", "/tmp"}, 0},
    {{"-Irelative/dir"}, 0},
    {{"--include-path=/tmp"}, 0},
    {{"--include-path", "/tmp"}, 0},
    /* pre-include */
    {{"-include=x.h"}, 0},
    {{"-include", "x.h"}, 0},
    {{"--pre-include=x.h"}, 0},
    {{"--pre-include", "x.h"}, 0},
    /* automatic PCH, use PCH, PCH directory */
    {{"--pch"}, 0},
    {{"-pch"}, 0},
};

/* Options with a value, refused in all four spellings NVRTC accepts:
 * --name=value, -name=value, --name value, -name value. */
static const struct {
    const char *name, *value;
    int side_effect;
} spelled[] = {
    /* use PCH, PCH directory */
    {"use-pch", "f.pch", 0},
    {"pch-dir", "d", 0},
    /* side effects: refused even with a digest */
    {"create-pch", "f.pch", 1},
    {"time", "t.csv", 1},
    {"fdevice-time-trace", "t.json", 1},
};

/* Options that share a prefix with a refused one but read and write nothing
 * outside the key. */
static const char *const accepted[] = {
    "--pch-verbose=true",
    "--pch-messages=false",
    "--instantiate-templates-in-pch=true",
    "-time-passes",
    "--timex=1",
    "--include-paths-are-weird",
    "--pchx",
    "-pch-dirs=d",
    "--use-pch-file",
    "--pre-includes",
    "-includex",
    "--create-pchx",
    "--fdevice-time-tracex",
    "-i/tmp", /* lower case: not -I */
    "--std=c++17",
    "-DINCLUDE=1",
    "--define-macro=PCH",
    "-Xptxas=-time",
};

static void check_refusal(const refusal *r)
{
    size_t n = r->argv[1] ? 2 : 1;
    CHECK_RC(PROGCACHE_EUNSAFEKEY, key_for(r->argv, n, NULL, 0));
    /* Named exactly as given, in quotes, with what to do. */
    char quoted[256];
    snprintf(quoted, sizeof quoted, "\"%s\"", r->argv[0]);
    if (!strstr(progcache_error_last(), quoted)) {
        fprintf(stderr, "message for %s does not name it: %s\n", r->argv[0],
                progcache_error_last());
        CHECK(!"refusal message names the option");
    }
    CHECK(strstr(progcache_error_last(), "remove the option") != NULL);
    if (!r->side_effect)
        CHECK(strstr(progcache_error_last(), "progcache_digest_files") != NULL);
    CHECK_RC(r->side_effect ? PROGCACHE_EUNSAFEKEY : PROGCACHE_OK, key_for(r->argv, n, NULL, 1));

    /* The classifier agrees with the key. */
    CHECK(progcache__option_classify(r->argv[0], NULL) ==
          (r->side_effect ? PROGCACHE__OPTION_SIDE_EFFECT : PROGCACHE__OPTION_READS_FILES));
}

static void test_refusals(void)
{
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        check_refusal(&refused[i]);
    for (size_t i = 0; i < sizeof spelled / sizeof spelled[0]; i++) {
        char joined[2][128], alone[2][128];
        for (int dashes = 1; dashes <= 2; dashes++) {
            const char *d = dashes == 2 ? "--" : "-";
            snprintf(joined[dashes - 1], sizeof joined[0], "%s%s=%s", d, spelled[i].name,
                     spelled[i].value);
            snprintf(alone[dashes - 1], sizeof alone[0], "%s%s", d, spelled[i].name);
            refusal with_equals = {{joined[dashes - 1]}, spelled[i].side_effect};
            refusal two_strings = {{alone[dashes - 1], spelled[i].value}, spelled[i].side_effect};
            check_refusal(&with_equals);
            check_refusal(&two_strings);
        }
    }
}

static void test_near_misses(void)
{
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        int rc = key_for(&accepted[i], 1, NULL, 0);
        if (rc != PROGCACHE_OK)
            fprintf(stderr, "%s wrongly refused: %s\n", accepted[i], progcache_error_last());
        CHECK(rc == PROGCACHE_OK);
        CHECK(progcache__option_classify(accepted[i], NULL) == PROGCACHE__OPTION_PLAIN);
    }
}

static void test_mixed(void)
{
    /* A side effect wins over a missing digest: a digest would not help. */
    const char *both[] = {"-I/tmp", "--time=t"};
    CHECK_RC(PROGCACHE_EUNSAFEKEY, key_for(both, 2, NULL, 0));
    CHECK(strstr(progcache_error_last(), "\"--time=t\"") != NULL);
    /* The first offending option is named. */
    const char *two_reads[] = {"--std=c++17", "--pre-include=a.h", "-I/x"};
    CHECK_RC(PROGCACHE_EUNSAFEKEY, key_for(two_reads, 3, NULL, 0));
    CHECK(strstr(progcache_error_last(), "\"--pre-include=a.h\"") != NULL);
    /* An empty digest is still a digest (cuda.core: b"" is not None). */
    const char *inc[] = {"-I/tmp"};
    const char *argv[] = {"-arch=sm_90", "-I/tmp"};
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    o.source = "";
    o.options = argv;
    o.num_options = 2;
    o.nvrtc_major = 13;
    o.extra_digest = digest;
    o.extra_digest_len = 0;
    CHECK_OK(progcache_key_nvrtc(key, &o));
    CHECK_RC(PROGCACHE_EUNSAFEKEY, key_for(inc, 1, NULL, 0));
}

static void test_program_names(void)
{
    static const char *const with_dir[] = {"dir/k.cu", "/abs.cu", "a\\b.cu", "./k.cu", "k/"};
    for (size_t i = 0; i < sizeof with_dir / sizeof with_dir[0]; i++) {
        CHECK_RC(PROGCACHE_EUNSAFEKEY, key_for(NULL, 0, with_dir[i], 0));
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", with_dir[i]);
        CHECK(strstr(progcache_error_last(), quoted) != NULL);
        CHECK(strstr(progcache_error_last(), "directory") != NULL);
        CHECK_OK(key_for(NULL, 0, with_dir[i], 1));
    }
    CHECK_OK(key_for(NULL, 0, "k.cu", 0));
    CHECK_OK(key_for(NULL, 0, "", 0));
    CHECK_OK(key_for(NULL, 0, NULL, 0));
}

int main(void)
{
    test_refusals();
    test_near_misses();
    test_mixed();
    test_program_names();
    printf("test_key_options: %zu refusals, %zu near misses ok\n",
           sizeof refused / sizeof refused[0], sizeof accepted / sizeof accepted[0]);
    return 0;
}
