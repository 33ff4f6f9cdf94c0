/* The sample's fast-kernel configurations and --autotune's cache record,
 * as functions: shapes are checked and round-trip through text, every
 * candidate is valid and distinct, the record's key changes with each part
 * of what it is for, and a record is read back only when it is whole, ours
 * and for this target (anything else is a miss that re-tunes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sample_device.h"

static const autotune_target base = {"NVIDIA H200", "sm_90", 4096, 4096, 4096, EPILOGUE_RELU};

static void test_configs(void)
{
    const fast_config *c;
    size_t n = fast_candidates(&c);
    CHECK(n >= 6 && n <= 12 && n <= AUTOTUNE_MAX_CANDIDATES);
    int default_seen = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(fast_config_check(&c[i]) == NULL);
        CHECK(fast_config_threads(&c[i]) % 32 == 0);
        CHECK(fast_config_smem(&c[i]) <= 48 * 1024);
        default_seen |= fast_config_equal(&c[i], &fast_default_config);
        for (size_t j = i + 1; j < n; j++)
            CHECK(!fast_config_equal(&c[i], &c[j]));
        char text[48];
        fast_config_format(text, sizeof text, &c[i]);
        fast_config back;
        CHECK(fast_config_parse(&back, text) == 0 && fast_config_equal(&back, &c[i]));
    }
    CHECK(default_seen);
    CHECK(fast_config_threads(&fast_default_config) == 256);

    fast_config x;
    CHECK(fast_config_parse(&x, "128x128x8:8x8") == 0);
    CHECK(x.bm == 128 && x.bn == 128 && x.bk == 8 && x.tm == 8 && x.tn == 8);
    const char *malformed[] = {"", "128", "128x128x8", "128x128x8:8", "128x128x8:8x8 ",
                               "128x128x8:8x8x", "axbxc:dxe"};
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++)
        CHECK(fast_config_parse(&x, malformed[i]) == -1);
    const fast_config bad[] = {
        {128, 128, 6, 8, 8},   /* BK not a multiple of 4 */
        {128, 128, 8, 6, 8},   /* TM not a multiple of 4 */
        {100, 128, 8, 8, 8},   /* BM not a multiple of TM */
        {32, 32, 8, 8, 8},     /* 4 x 4 threads: not a 4 x 8 warp */
        {512, 512, 8, 8, 8},   /* 4096 threads */
        {128, 128, 64, 8, 8},  /* 130 KiB of shared memory */
        {64, 64, 8, 32, 32},   /* TM, TN too large */
        {0, 128, 8, 8, 8},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(fast_config_check(&bad[i]) != NULL);

    const fast_config classic = {128, 128, 8, 8, 8};
    launch_dims d = launch_dims_fast(&classic, 1000, 777);
    CHECK(d.grid_x == 7 && d.grid_y == 8 && d.block_x == 256 && d.block_y == 1);
    d = launch_dims_fast(&fast_default_config, 1000, 777);
    CHECK(d.grid_x == 4 && d.grid_y == 8 && d.block_x == 256 && d.block_y == 1);
    d = launch_dims_fast(&fast_default_config, 1, 1);
    CHECK(d.grid_x == 1 && d.grid_y == 1);
    d = launch_dims_tiled(16, 1000, 777);
    CHECK(d.grid_x == 49 && d.grid_y == 63 && d.block_x == 16 && d.block_y == 16);
}

static void test_sources(void)
{
    /* 128 x 128 / 8 x 8: two 256-thread blocks per multiprocessor (a
     * 128-register cap); the default 128 x 256 / 8 x 16 needs one. */
    const fast_config classic = {128, 128, 8, 8, 8};
    char *s = kernel_source_fast(&classic, EPILOGUE_RELU);
    CHECK(s && strstr(s, "constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;"));
    CHECK(strstr(s, "constexpr int MIN_BLOCKS = 2;"));
    free(s);
    s = kernel_source_fast(&fast_default_config, EPILOGUE_GELU);
    CHECK(s != NULL);
    CHECK(strstr(s, "constexpr int BM = 128, BN = 256, BK = 8, TM = 8, TN = 16;"));
    CHECK(strstr(s, "constexpr int MIN_BLOCKS = 1;"));
    CHECK(strstr(s, "erff(v * 0.70710678118654752f)"));
    CHECK(strstr(s, "// C = gelu(A @ B + bias)"));
    const fast_config *c;
    size_t n = fast_candidates(&c);
    for (size_t i = 0; i < n; i++) {
        char *t = kernel_source_fast(&c[i], EPILOGUE_GELU);
        CHECK(t != NULL);
        CHECK(fast_config_equal(&c[i], &fast_default_config) == !strcmp(s, t));
        free(t);
    }
    free(s);
    /* identity and relu keep their first texts (and so their keys) */
    s = kernel_source(16, EPILOGUE_RELU);
    CHECK(strstr(s, "    return v > 0.0f ? v : 0.0f;\n"));
    CHECK(strstr(s, "constexpr int TILE = 16;"));
    free(s);
    for (int e = 0; e < EPILOGUE_COUNT; e++)
        CHECK(epilogue_parse(epilogue_name((epilogue_kind)e)) == e);
    CHECK(epilogue_parse("swish") == -1);
    /* the host formulas */
    CHECK(epilogue_apply(EPILOGUE_RELU, -2.0) == 0.0 && epilogue_apply(EPILOGUE_RELU, 2.0) == 2.0);
    CHECK(epilogue_apply(EPILOGUE_IDENTITY, -2.5) == -2.5);
    CHECK(epilogue_apply(EPILOGUE_SIGMOID, 0.0) == 0.5);
    CHECK(epilogue_apply(EPILOGUE_SILU, 0.0) == 0.0);
    double g = epilogue_apply(EPILOGUE_GELU, 1.0); /* 0.5 * (1 + erf(1/sqrt 2)) */
    CHECK(g > 0.841344 && g < 0.841345);
    double t = epilogue_apply(EPILOGUE_TANH, 1.0);
    CHECK(t > 0.761594 && t < 0.761595);
    CHECK(epilogue_apply(EPILOGUE_SIGMOID, -1000.0) == 0.0);
}

static char *key_of(const autotune_target *t, size_t *len)
{
    char *k = autotune_record_key(len, t);
    CHECK(k != NULL && *len == strlen(k));
    return k;
}

static void test_key(void)
{
    size_t len, len2;
    char *k = key_of(&base, &len);
    CHECK(!strncmp(k, "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\n", 51));
    CHECK(strstr(k, "\nsize=4096x4096x4096\nepilogue=relu\nnvrtc="));
    CHECK(strstr(k, "\ncandidates="));
    char *again = key_of(&base, &len2);
    CHECK(len == len2 && !memcmp(k, again, len));
    free(again);
    autotune_target v[6];
    for (int i = 0; i < 6; i++)
        v[i] = base;
    v[0].device = "NVIDIA H100 80GB HBM3";
    v[1].arch = "sm_90a";
    v[2].m = 4095;
    v[3].n = 4095;
    v[4].k = 4095;
    v[5].epilogue = EPILOGUE_GELU;
    for (int i = 0; i < 6; i++) {
        char *o = key_of(&v[i], &len2);
        CHECK(len2 != len || memcmp(o, k, len) != 0);
        free(o);
    }
    free(k);
}

static int parse(const char *text, size_t size, const autotune_target *t, fast_config *out,
                 double *ms, char *why)
{
    why[0] = '\0';
    return autotune_record_parse(out, ms, text, size, t, why, 160);
}

static void test_record(void)
{
    const fast_config win = {128, 256, 8, 8, 16};
    char *r = autotune_record_format(&base, &win, 3.25);
    CHECK(r != NULL);
    CHECK(!strcmp(r, "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\n"
                     "size=4096x4096x4096\nepilogue=relu\nconfig=128x256x8:8x16\n"
                     "kernel_ms=3.250000\n"));
    fast_config got;
    double ms = 0;
    char why[160];
    CHECK(parse(r, strlen(r), &base, &got, &ms, why) == 0);
    CHECK(fast_config_equal(&got, &win) && ms == 3.25);

    /* Records for something else are foreign. */
    autotune_target other = base;
    other.n = 4000;
    CHECK(parse(r, strlen(r), &other, &got, &ms, why) == -1 && strstr(why, "another"));
    other = base;
    other.device = "NVIDIA H200 NVL";
    CHECK(parse(r, strlen(r), &other, &got, &ms, why) == -1);
    other = base;
    other.epilogue = EPILOGUE_SILU;
    CHECK(parse(r, strlen(r), &other, &got, &ms, why) == -1);

    /* Damaged or foreign bytes. */
    const char *bad[] = {
        "",
        "garbage",
        "\x7f" "ELF\x02\x01\x01",
        "progcache-autotune v2\ndevice=NVIDIA H200\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nconfig=128x256x8:8x16\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nconfig=128x256x8:8x16\nkernel_ms=3.25",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nconfig=128x256x8:8x16\nkernel_ms=fast\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nconfig=128x256x8:8x16\nkernel_ms=-1\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nconfig=128x128x6:8x8\nkernel_ms=3.25\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nconfig=128x256x8:8x16\nkernel_ms=3.25\nextra=1\n",
        "progcache-autotune v1\ndevice=NVIDIA H200\narch=sm_90\nsize=4096x4096x4096\n"
        "epilogue=relu\nkernel_ms=3.25\nconfig=128x256x8:8x16\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        got = fast_default_config;
        if (parse(bad[i], strlen(bad[i]), &base, &got, &ms, why) != -1) {
            fprintf(stderr, "accepted bad record %zu\n", i);
            CHECK(!"bad record refused");
        }
        CHECK(why[0] != '\0');
        CHECK(fast_config_equal(&got, &fast_default_config)); /* untouched */
    }
    /* A cut record: every prefix is refused. */
    for (size_t cut = 0; cut < strlen(r); cut++)
        CHECK(parse(r, cut, &base, &got, &ms, why) == -1);
    free(r);
}

int main(void)
{
    test_configs();
    test_sources();
    test_key();
    test_record();
    puts("test_autotune_record: ok");
    return 0;
}
