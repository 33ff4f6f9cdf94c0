/* The persistentProgramCache sample's fast kernel, epilogues and
 * --autotune, with no GPU needed: --arch runs the cache flow (MISS then
 * HIT), every epilogue of both kernels compiles, the fast source compiles
 * for odd sizes and for every candidate tile shape, bad usage exits 2, and
 * --autotune without a device compiles the candidates once (a second run
 * finds them all cached).
 *
 * usage: test_sample_fast SAMPLE_EXE   (env PROGCACHE_BIN: the progcache
 * tool) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "progcache/cuda.h"
#include "sample.h"
#include "sample_run.h"

static char *exe;
static char *scratch;
static int have_gpu; /* a real device answers: launches run */

#define DEFAULT_TILE "128x256x8:8x16 (fast kernel, BMxBNxBK:TMxTN, 256 threads)"

static void run(sample_output *out, const char *const *args)
{
    sample_run r = {exe, args, NULL, NULL};
    sample_exec(out, &r, scratch);
    if (out->status != 0 && out->status != 2)
        sample_dump(out);
}

static void cache_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", scratch, name);
}

/* Files under dir/entries/<2 hex digits>/: the entries of a file store. */
static size_t count_entries(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/entries", dir);
    DIR *top = opendir(path);
    if (!top)
        return 0;
    size_t n = 0;
    struct dirent *d;
    while ((d = readdir(top))) {
        if (strlen(d->d_name) != 2 || d->d_name[0] == '.')
            continue;
        char sub[4400];
        if (snprintf(sub, sizeof sub, "%s/%s", path, d->d_name) >= (int)sizeof sub)
            continue;
        DIR *s = opendir(sub);
        if (!s)
            continue;
        struct dirent *e;
        while ((e = readdir(s)))
            if (e->d_name[0] != '.' && !strstr(e->d_name, ".tmp"))
                n++;
        closedir(s);
    }
    closedir(top);
    return n;
}

static void tile_text(char *out, size_t len, const fast_config *c)
{
    char name[48];
    fast_config_format(name, sizeof name, c);
    snprintf(out, len, "%s (fast kernel, BMxBNxBK:TMxTN, %d threads)", name,
             fast_config_threads(c));
}

/* --kernel fast: MISS then HIT, its own key (not the tiled kernel's). */
static void test_fast_miss_then_hit(void)
{
    char dir[4096];
    cache_dir(dir, sizeof dir, "fast");
    const char *args[] = {"--arch", "sm_90", "--kernel", "fast", "--cache-dir", dir, NULL};
    sample_output out;
    char k1[25], k2[25], k_tiled[25];
    sample_expect e = {"MISS", dir, 512, 512, 512, 0, "relu", 5, 20, have_gpu};
    run(&out, args);
    CHECK(out.status == 0);
    sample_check_format_ex(&out, &e, k1, DEFAULT_TILE, have_gpu ? 1 : 0);
    CHECK(strtod(sample_value(&out, "Artifact size:"), NULL) > 1.0);
    sample_output_free(&out);

    run(&out, args);
    CHECK(out.status == 0);
    e.status = "HIT";
    sample_check_format_ex(&out, &e, k2, DEFAULT_TILE, have_gpu ? 1 : 0);
    CHECK(!strcmp(k1, k2));
    sample_output_free(&out);

    /* The tiled kernel in the same directory: a program of its own. */
    const char *tiled[] = {"--arch", "sm_90", "--cache-dir", dir, NULL};
    run(&out, tiled);
    CHECK(out.status == 0);
    sample_expect et = {"MISS", dir, 512, 512, 512, 16, "relu", 5, 20, have_gpu};
    sample_check_format(&out, &et, k_tiled);
    CHECK(strcmp(k_tiled, k1) != 0);
    sample_output_free(&out);

    /* --config picks another shape: another program; --config alone means
     * --kernel fast. */
    const char *other[] = {"--arch", "sm_90", "--config", "64x64x16:4x4", "--cache-dir", dir,
                           NULL};
    run(&out, other);
    CHECK(out.status == 0);
    char k3[25];
    e.status = "MISS";
    sample_check_format_ex(&out, &e, k3,
                           "64x64x16:4x4 (fast kernel, BMxBNxBK:TMxTN, 256 threads)",
                           have_gpu ? 1 : 0);
    CHECK(strcmp(k3, k1) != 0 && strcmp(k3, k_tiled) != 0);
    sample_output_free(&out);
}

/* The printed fast source is what the sample compiles: its key (from
 * `progcache key`) is the printed one; its constants are the tile shape. */
static void test_fast_source(void)
{
    const char *src_args[] = {"--print-source", "--config", "128x256x8:8x16", "--epilogue",
                              "silu", NULL};
    sample_output src;
    run(&src, src_args);
    CHECK(src.status == 0 && src.err[0] == '\0');
    char path[4096];
    snprintf(path, sizeof path, "%s/fast.cu", scratch);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    /* all of stdout (longer than the lines sample_run splits) */
    const char *whole = sample_stdout_text(&src);
    CHECK(fwrite(whole, 1, src.out_size, f) == src.out_size);
    CHECK(fclose(f) == 0);
    char *text = test_read_file(path, NULL);
    CHECK(strstr(text, "constexpr int BM = 128, BN = 256, BK = 8, TM = 8, TN = 16;"));
    CHECK(strstr(text, "extern \"C\" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)"));
    CHECK(strstr(text, "matmul_epilogue(const float *__restrict__ A"));
    CHECK(strstr(text, "return v / (1.0f + expf(-v));"));
    CHECK(strstr(text, "// C = silu(A @ B + bias)"));
    free(text);
    sample_output_free(&src);

    char dir[4096];
    cache_dir(dir, sizeof dir, "fast-source");
    const char *args[] = {"--arch", "sm_90", "--cache-dir", dir, "--config", "128x256x8:8x16",
                          "--epilogue", "silu", NULL};
    sample_expect_key_of(exe, scratch, path, args);
}

/* Every epilogue compiles in both kernels, each its own program. */
static void test_all_epilogues(void)
{
    char dir[4096];
    cache_dir(dir, sizeof dir, "epilogues");
    static const char *names[] = {"identity", "relu", "gelu", "sigmoid", "tanh", "silu"};
    static const char *bodies[] = {"return v;",
                                   "return v > 0.0f ? v : 0.0f;",
                                   "erff(v * 0.70710678118654752f)",
                                   "return 1.0f / (1.0f + expf(-v));",
                                   "return tanhf(v);",
                                   "return v / (1.0f + expf(-v));"};
    char keys[12][25];
    for (int kernel = 0; kernel < 2; kernel++)
        for (int e = 0; e < 6; e++) {
            const char *kname = kernel ? "fast" : "tiled";
            const char *args[] = {"--arch",     "sm_90",  "--cache-dir", dir,     "--kernel",
                                  kname,        "--epilogue", names[e],    "--m",   "64",
                                  "--n",        "48",     "--k",          "40",    NULL};
            sample_output out;
            run(&out, args);
            CHECK(out.status == 0);
            sample_expect ex = {"MISS", dir, 64, 48, 40, 16, names[e], 5, 20, have_gpu};
            sample_check_format_ex(&out, &ex, keys[kernel * 6 + e],
                                   kernel ? DEFAULT_TILE : NULL, kernel && have_gpu ? 1 : 0);
            sample_output_free(&out);

            const char *src_args[] = {"--print-source", "--kernel", kname, "--epilogue",
                                      names[e], NULL};
            run(&out, src_args);
            CHECK(out.status == 0 && strstr(sample_stdout_text(&out), bodies[e]));
            sample_output_free(&out);
        }
    for (int i = 0; i < 12; i++)
        for (int j = i + 1; j < 12; j++)
            CHECK(strcmp(keys[i], keys[j]) != 0);
}

/* The fast kernel's source does not depend on the sizes, and compiles
 * for any: odd sizes, 1 x 1 x 1, and every candidate tile shape. */
static void test_odd_sizes(void)
{
    const char *sizes[][3] = {{"1000", "777", "333"}, {"1", "1", "1"}, {"3", "5", "7"}};
    char first_key[25] = "";
    for (size_t s = 0; s < 3; s++) {
        char dir[4096], name[32];
        snprintf(name, sizeof name, "odd%zu", s);
        cache_dir(dir, sizeof dir, name);
        const char *args[] = {"--arch", "sm_90",    "--cache-dir", dir,         "--kernel",
                              "fast",   "--m",      sizes[s][0],   "--n",       sizes[s][1],
                              "--k",    sizes[s][2], "--epilogue", "tanh",      NULL};
        sample_output out;
        char key[25];
        run(&out, args);
        CHECK(out.status == 0);
        sample_expect e = {"MISS", dir, atoi(sizes[s][0]), atoi(sizes[s][1]), atoi(sizes[s][2]),
                           0, "tanh", 5, 20, have_gpu};
        sample_check_format_ex(&out, &e, key, DEFAULT_TILE, have_gpu ? 1 : 0);
        if (s == 0)
            snprintf(first_key, sizeof first_key, "%s", key);
        CHECK(!strcmp(key, first_key));
        sample_output_free(&out);
    }
}

static void test_bad_usage(void)
{
    static const sample_usage_case cases[] = {
        {{"--kernel", "turbo"}, "--kernel must be tiled or fast, got 'turbo'"},
        {{"--kernel"}, "--kernel needs a value"},
        /* (an unknown --epilogue: test_sample's table) */
        {{"--epilogue", "RELU"}, "--epilogue must be one of"},
        {{"--config", "128x128x8"}, "--config must look like BMxBNxBK:TMxTN"},
        {{"--config", "128x128x8:8x8x"}, "--config must look like BMxBNxBK:TMxTN"},
        {{"--config", "128x128x6:8x8"}, "--config 128x128x6:8x8 is not supported"},
        {{"--config", "128x128x64:8x8"}, "exceed 48 KiB"},
        {{"--config", "32x32x8:8x8"}, "a warp is 4 x 8 threads"},
        {{"--kernel", "tiled", "--autotune"}, "--autotune applies to --kernel fast, not tiled"},
        {{"--kernel", "tiled", "--config", "128x128x8:8x8"}, "--config applies to --kernel fast"},
        {{"--kernel", "fast", "--tile-size", "32"}, "--tile-size applies to --kernel tiled"},
        {{"--autotune", "--config", "128x128x8:8x8"}, "--autotune and --config both choose"},
    };
    sample_expect_usage_errors(exe, scratch, cases, sizeof cases / sizeof cases[0]);
    sample_output out;
    const char *help[] = {"--help", NULL};
    run(&out, help);
    CHECK(out.status == 0 && sample_contains(&out, "--kernel K") &&
          sample_contains(&out, "--autotune") && sample_contains(&out, "silu"));
    sample_output_free(&out);
}

/* --autotune without a device: every candidate compiled through the cache
 * (one entry each), timing skipped; a second run finds them all; each is
 * the very program --config compiles. */
static void test_autotune_without_gpu(void)
{
    if (have_gpu)
        return; /* the GPU test times them */
    const fast_config *c;
    size_t n = fast_candidates(&c);
    CHECK(n >= 6 && n <= 12);
    char dir[4096];
    cache_dir(dir, sizeof dir, "autotune");
    const char *args[] = {"--arch", "sm_90", "--autotune", "--cache-dir", dir, NULL};
    sample_output out;
    char key[25], re[512];
    sample_expect e = {"HIT", dir, 512, 512, 512, 0, "relu", 5, 20, 0};
    for (int pass = 0; pass < 2; pass++) {
        run(&out, args);
        CHECK(out.status == 0);
        /* The default shape is a candidate, so the sample's own compile
         * finds it cached by the tuning. */
        sample_check_format_ex(&out, &e, key, DEFAULT_TILE, 1);
        snprintf(re, sizeof re,
                 "no device: %zu candidates compiled on [0-9]+ threads \\(%zu MISS, %zu HIT\\) "
                 "in [0-9]+\\.[0-9] ms; timing skipped \\(no CUDA device\\)",
                 n, pass ? (size_t)0 : n, pass ? n : (size_t)0);
        if (!sample_match(sample_value(&out, "Autotune:"), re))
            sample_dump(&out);
        CHECK(sample_match(sample_value(&out, "Autotune:"), re));
        sample_output_free(&out);
        size_t entries = count_entries(dir);
        if (entries != n)
            fprintf(stderr, "%zu entries in %s, expected %zu\n", entries, dir, n);
        CHECK(entries == n);
    }
    for (size_t i = 0; i < n; i++) {
        char config[48], tile[128];
        fast_config_format(config, sizeof config, &c[i]);
        tile_text(tile, sizeof tile, &c[i]);
        const char *one[] = {"--arch", "sm_90", "--config", config, "--cache-dir", dir, NULL};
        run(&out, one);
        CHECK(out.status == 0);
        sample_check_format_ex(&out, &e, key, tile, 0);
        sample_output_free(&out);
    }
    CHECK(count_entries(dir) == n);
}

int main(int argc, char **argv)
{
    have_gpu = sample_setup(argc, argv, "samplefast", &exe, &scratch);
    static void (*const tests[])(void) = {test_fast_miss_then_hit, test_fast_source,
                                           test_all_epilogues, test_odd_sizes, test_bad_usage,
                                           test_autotune_without_gpu};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        tests[i]();

    sample_teardown(exe, scratch);
    puts("test_sample_fast: ok");
    return 0;
}
