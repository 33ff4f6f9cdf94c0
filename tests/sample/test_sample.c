/* The persistentProgramCache sample, run as a user would, with no GPU
 * needed: the --arch cache flow (MISS then HIT), the output format, key
 * interop through --print-source and `progcache key`, bad input, an
 * unusable cache directory, path handling, a fake driver for device
 * errors.
 *
 * usage: test_sample SAMPLE_EXE   (env PROGCACHE_BIN: the progcache tool;
 * PROGCACHE_TEST_FAKE_CUDA_DIR: a folder holding the fake driver as
 * libcuda.so.1, optional) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "progcache/cuda.h"
#include "sample_run.h"

static char *exe;
static char *scratch;
static int have_gpu; /* a real device answers: launches run */

static void run(sample_output *out, const char *const *args)
{
    sample_run r = {exe, args, NULL, NULL};
    sample_exec(out, &r, scratch);
}

static sample_expect expect_default(const char *status, const char *dir)
{
    sample_expect e = {status, dir, 512, 512, 512, 16, "relu", 5, 20, have_gpu};
    return e;
}

/* A run of args that succeeds with the default sizes and status; the key
 * it printed goes to key24. */
static void expect_default_run(const char *const *args, const char *status, const char *dir,
                               char *key24)
{
    sample_output out;
    run(&out, args);
    CHECK(out.status == 0);
    sample_expect e = expect_default(status, dir);
    sample_check_format(&out, &e, key24);
    sample_output_free(&out);
}

static void test_miss_then_hit(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cache", scratch);
    const char *args[] = {"--arch", "sm_90", "--cache-dir", dir, NULL};
    sample_output out;
    char key_miss[25], key_hit[25];

    run(&out, args);
    if (out.status != 0)
        sample_dump(&out);
    CHECK(out.status == 0);
    sample_expect e = expect_default("MISS", dir);
    sample_check_format(&out, &e, key_miss);
    if (!have_gpu)
        CHECK(!strcmp(sample_value(&out, "Device:"), "none (no CUDA driver)") ||
              !strcmp(sample_value(&out, "Device:"), "none (no CUDA device)"));
    sample_output_free(&out);

    expect_default_run(args, "HIT", dir, key_hit);
    CHECK(!strcmp(key_miss, key_hit));

    /* --clear-cache empties it first: a miss again, same key. */
    const char *clear[] = {"--arch", "sm_90", "--cache-dir", dir, "--clear-cache", NULL};
    expect_default_run(clear, "MISS", dir, key_hit);
    CHECK(!strcmp(key_miss, key_hit));

    /* Another variant is another program: its own key, a miss, then a hit. */
    const char *variant[] = {"--arch", "sm_90", "--cache-dir", dir, "--tile-size", "32",
                             "--epilogue", "identity", "--m", "100", "--n", "7", "--k", "3",
                             "--warmup", "0", "--iterations", "1", NULL};
    run(&out, variant);
    CHECK(out.status == 0);
    e = (sample_expect){"MISS", dir, 100, 7, 3, 32, "identity", 0, 1, have_gpu};
    char key_variant[25];
    sample_check_format(&out, &e, key_variant);
    CHECK(strcmp(key_variant, key_miss) != 0);
    sample_output_free(&out);
    run(&out, variant);
    e.status = "HIT";
    sample_check_format(&out, &e, key_hit);
    CHECK(!strcmp(key_variant, key_hit));
    sample_output_free(&out);

    /* --async-store: stored in the background, and there by the next run. */
    char dir2[4096];
    snprintf(dir2, sizeof dir2, "%s/cache-async", scratch);
    const char *async[] = {"--arch", "sm_90", "--cache-dir", dir2, "--async-store", NULL};
    run(&out, async);
    CHECK(out.status == 0);
    CHECK(strstr(sample_value(&out, "Cache store:"), "(in the background)"));
    e = expect_default("MISS", dir2);
    sample_check_format(&out, &e, key_hit);
    sample_output_free(&out);
    run(&out, async);
    e = expect_default("HIT", dir2);
    sample_check_format(&out, &e, key_hit);
    CHECK(!strcmp(key_miss, key_hit));
    sample_output_free(&out);
}

/* The printed source has the printed key: `progcache key` on it (and
 * cuda.core's make_program_cache_key, checked on the GPU machine) derives
 * the same. */
static void test_print_source_key(void)
{
    const char *variants[][2] = {{"16", "relu"}, {"32", "identity"}};
    for (size_t v = 0; v < 2; v++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/cache-src%zu", scratch, v);
        const char *src_args[] = {"--print-source", "--tile-size", variants[v][0], "--epilogue",
                                  variants[v][1], NULL};
        sample_output src;
        run(&src, src_args);
        CHECK(src.status == 0 && src.err[0] == '\0');
        char want[64];
        snprintf(want, sizeof want, "constexpr int TILE = %s;", variants[v][0]);
        char path[4096];
        snprintf(path, sizeof path, "%s/source%zu.cu", scratch, v);
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        /* the captured stdout, lines joined again */
        for (size_t i = 0; i < src.num_lines; i++)
            fprintf(f, "%s\n", src.lines[i]);
        fclose(f);
        size_t n;
        char *text = test_read_file(path, &n);
        CHECK(strstr(text, want));
        CHECK(strstr(text, "extern \"C\" __global__ void matmul_epilogue("));
        CHECK(strstr(text, strcmp(variants[v][1], "relu") ? "return v;" : "v > 0.0f ? v : 0.0f"));
        free(text);
        sample_output_free(&src);

        const char *args[] = {"--arch", "sm_90", "--cache-dir", dir, "--tile-size",
                              variants[v][0], "--epilogue", variants[v][1], NULL};
        sample_expect_key_of(exe, scratch, path, args);
    }
}

static void test_bad_input(void)
{
    static const sample_usage_case cases[] = {
        {{"--m", "0"}, "--m must be a positive integer, got '0'"},
        {{"--n", "-5"}, "--n must be a positive integer, got '-5'"},
        {{"--k", "12x"}, "--k must be a positive integer, got '12x'"},
        {{"--m", "99999999999"}, "--m must be a positive integer"},
        {{"--tile-size", "8"}, "--tile-size must be 16 or 32, got '8'"},
        {{"--epilogue", "swish"},
         "--epilogue must be one of identity, relu, gelu, sigmoid, tanh, silu, got 'swish'"},
        {{"--warmup", "-1"}, "--warmup must be a non-negative integer, got '-1'"},
        {{"--iterations", "0"}, "--iterations must be a positive integer, got '0'"},
        {{"--device", "-1"}, "--device must be a non-negative integer"},
        {{"--arch", "90"}, "--arch must look like sm_90"},
        {{"--bogus"}, "unrecognized argument '--bogus'"},
        {{"--m"}, "--m needs a value"},
        {{"--cache-dir="}, "--cache-dir must not be empty"},
    };
    sample_expect_usage_errors(exe, scratch, cases, sizeof cases / sizeof cases[0]);
    /* --m=5 works like --m 5 */
    const char *eq[] = {"--m=5", "--print-source", NULL};
    sample_output out;
    run(&out, eq);
    CHECK(out.status == 0);
    sample_output_free(&out);

    const char *help[] = {"--help", NULL};
    run(&out, help);
    CHECK(out.status == 0 && sample_contains(&out, "usage: persistentProgramCache"));
    CHECK(sample_contains(&out, "$PROGCACHE_DIR") &&
          sample_contains(&out, "~/.cache/cuda-python/program-cache"));
    sample_output_free(&out);
}

/* A cache directory that cannot be used is not fatal. (Tests run as root,
 * so permissions do not stop anything: the parent is a regular file.) */
static void test_disabled_cache(void)
{
    char file[2048], dir[4096];
    snprintf(file, sizeof file, "%s/not-a-directory", scratch);
    FILE *f = fopen(file, "w");
    CHECK(f && fputs("x", f) >= 0 && fclose(f) == 0);
    snprintf(dir, sizeof dir, "%s/cache", file);
    const char *args[] = {"--arch", "sm_90", "--cache-dir", dir, NULL};
    sample_output out;
    run(&out, args);
    CHECK(out.status == 0);
    sample_expect e = expect_default("DISABLED", dir);
    char key[25];
    sample_check_format(&out, &e, key);
    CHECK(strstr(out.err, "warning: running without a cache"));
    CHECK(strstr(sample_value(&out, "Cache status:"), "not-a-directory"));
    sample_output_free(&out);
}

/* ~ is expanded and relative paths are made absolute and clean. */
static void test_cache_dir_paths(void)
{
    char home[2048], env_home[2100], want[4096];
    snprintf(home, sizeof home, "%s/home", scratch);
    CHECK(mkdir(home, 0755) == 0);
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    /* Without --cache-dir: cuda.core's default, under HOME here... */
    const char *env[] = {env_home, "PROGCACHE_DIR=", "XDG_CACHE_HOME=", NULL};
    const char *dflt[] = {"--arch", "sm_90", NULL};
    sample_run r = {exe, dflt, NULL, env};
    sample_output out;
    sample_exec(&out, &r, scratch);
    CHECK(out.status == 0);
    snprintf(want, sizeof want, "%s/.cache/cuda-python/program-cache", home);
    CHECK(!strcmp(sample_value(&out, "Cache directory:"), want));
    CHECK(!strcmp(sample_value(&out, "Cache status:"), "MISS"));
    sample_output_free(&out);

    /* ... and $PROGCACHE_DIR when it is set, as for every progcache program. */
    char env_dir[2200];
    snprintf(env_dir, sizeof env_dir, "PROGCACHE_DIR=%s/fromenv", home);
    const char *env2[] = {env_home, env_dir, NULL};
    r.env = env2;
    sample_exec(&out, &r, scratch);
    snprintf(want, sizeof want, "%s/fromenv", home);
    CHECK(out.status == 0 && !strcmp(sample_value(&out, "Cache directory:"), want));
    sample_output_free(&out);
    r.env = env;

    const char *tilde[] = {"--arch", "sm_90", "--cache-dir", "~/elsewhere/./c", NULL};
    r.args = tilde;
    sample_exec(&out, &r, scratch);
    snprintf(want, sizeof want, "%s/elsewhere/c", home);
    CHECK(out.status == 0 && !strcmp(sample_value(&out, "Cache directory:"), want));
    sample_output_free(&out);

    const char *rel[] = {"--arch", "sm_90", "--cache-dir", "rel/../relcache/", NULL};
    r.args = rel;
    r.cwd = home;
    sample_exec(&out, &r, scratch);
    if (out.status != 0)
        sample_dump(&out);
    snprintf(want, sizeof want, "%s/relcache", home);
    CHECK(out.status == 0 && !strcmp(sample_value(&out, "Cache directory:"), want));
    sample_output_free(&out);
}

/* No device and no --arch: a clear error. */
static void test_no_device(void)
{
    if (have_gpu)
        return;
    const char *args[] = {"--cache-dir", scratch, NULL};
    sample_output out;
    run(&out, args);
    CHECK(out.status == 1);
    CHECK(strstr(out.err, "no CUDA driver") || strstr(out.err, "no CUDA device"));
    CHECK(strstr(out.err, "--arch"));
    CHECK(out.num_lines == 0);
    sample_output_free(&out);
}

/* Device errors, against the fake driver installed as libcuda.so.1. */
static void test_fake_driver(void)
{
    const char *fake = getenv("PROGCACHE_TEST_FAKE_CUDA_DIR");
    if (!fake || !*fake || have_gpu)
        return;
    char ld[4200];
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", fake);
    const char *env[] = {ld, NULL};
    const char *args[] = {"--device", "3", "--cache-dir", scratch, NULL};
    sample_run r = {exe, args, NULL, env};
    sample_output out;
    sample_exec(&out, &r, scratch);
    if (out.status != 2)
        sample_dump(&out);
    CHECK(out.status == 2);
    CHECK(!strcmp(out.err, "persistentProgramCache: device 3 does not exist (1 CUDA device "
                           "present)\n"));
    sample_output_free(&out);

    const char *env0[] = {ld, "FAKE_CUDA_DEVICES=0", NULL};
    const char *args0[] = {"--cache-dir", scratch, NULL};
    r.args = args0;
    r.env = env0;
    sample_exec(&out, &r, scratch);
    CHECK(out.status == 1 && strstr(out.err, "no CUDA device"));
    sample_output_free(&out);
}

int main(int argc, char **argv)
{
    have_gpu = sample_setup(argc, argv, "sample", &exe, &scratch);
    static void (*const tests[])(void) = {test_miss_then_hit, test_print_source_key,
                                           test_bad_input, test_disabled_cache,
                                           test_cache_dir_paths, test_no_device, test_fake_driver};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        tests[i]();

    sample_teardown(exe, scratch);
    puts("test_sample: ok");
    return 0;
}
