/* The sample's fast kernel and --autotune on a GPU (label gpu; SKIPPED,
 * exit 77, without a device): the fast kernel validates at 512, at odd
 * sizes, at 1 x 1 x 1 and at 4096; every epilogue validates on the vector
 * path and on the scalar edge path; every candidate tile shape validates at
 * an odd size; --autotune tunes cold, then goes straight to the cached
 * winner, and a damaged or foreign record is a miss that tunes again.
 *
 * usage: test_sample_fast_gpu SAMPLE_EXE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sample_device.h"
#include "sample_run.h"
#include "sha256.h"

static const char *exe;
static char *scratch;
static char arch[16];
static char device_name[256];

#define DEFAULT_TILE "128x256x8:8x16 (fast kernel, BMxBNxBK:TMxTN, 256 threads)"
#define TFLOPS "[0-9]+\\.[0-9]{2} TFLOP/s"

static void run(sample_output *out, const char *const *args)
{
    sample_run r = {exe, args, NULL, NULL};
    sample_exec(out, &r, scratch);
    if (out->status != 0)
        sample_dump(out);
}

static void cache_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", scratch, name);
}

/* Run the fast kernel at m x n x k; it must validate. */
static void expect_passes(const char *dir, const char *m, const char *n, const char *k,
                          const char *epilogue, const char *config)
{
    const char *args[] = {"--cache-dir", dir,  "--kernel", "fast",   "--m",
                          m,             "--n", n,         "--k",    k,
                          "--epilogue",  epilogue, config ? "--config" : NULL, config, NULL};
    sample_output out;
    char key[25], tile[128];
    run(&out, args);
    CHECK(out.status == 0);
    const char *status = sample_value(&out, "Cache status:");
    sample_expect e = {status && !strcmp(status, "HIT") ? "HIT" : "MISS", dir, atoi(m), atoi(n),
                       atoi(k), 0, epilogue, 5, 20, 1};
    if (config) {
        fast_config c;
        CHECK(fast_config_parse(&c, config) == 0);
        snprintf(tile, sizeof tile, "%s (fast kernel, BMxBNxBK:TMxTN, %d threads)", config,
                 fast_config_threads(&c));
    }
    sample_check_format_ex(&out, &e, key, config ? tile : DEFAULT_TILE, 1);
    CHECK(!strcmp(sample_value(&out, "Validation:"), "PASSED"));
    CHECK(sample_match(sample_value(&out, "Throughput:"), TFLOPS));
    printf("fast %s %sx%sx%s %s: %s, %s\n", config ? config : "default", m, n, k, epilogue,
           sample_value(&out, "Kernel time:"), sample_value(&out, "Throughput:"));
    sample_output_free(&out);
}

static void test_sizes(void)
{
    char dir[4096];
    cache_dir(dir, sizeof dir, "sizes");
    expect_passes(dir, "512", "512", "512", "relu", NULL);
    expect_passes(dir, "1000", "777", "333", "relu", NULL);
    expect_passes(dir, "1", "1", "1", "relu", NULL);
    expect_passes(dir, "4096", "4096", "4096", "relu", NULL);
}

static void test_epilogues(void)
{
    char dir[4096];
    cache_dir(dir, sizeof dir, "epilogues");
    const char *names[] = {"identity", "relu", "gelu", "sigmoid", "tanh", "silu"};
    for (int e = 0; e < 6; e++) {
        expect_passes(dir, "200", "264", "136", names[e], NULL); /* 16-byte path */
        expect_passes(dir, "77", "55", "33", names[e], NULL);    /* scalar edges */
        /* the tiled kernel too */
        const char *args[] = {"--cache-dir", dir, "--epilogue", names[e], "--m", "77",
                              "--n", "55", "--k", "33", NULL};
        sample_output out;
        run(&out, args);
        CHECK(out.status == 0 && !strcmp(sample_value(&out, "Validation:"), "PASSED"));
        sample_output_free(&out);
    }
}

static void test_candidates(void)
{
    char dir[4096];
    cache_dir(dir, sizeof dir, "tune");
    const fast_config *c;
    size_t n = fast_candidates(&c);
    for (size_t i = 0; i < n; i++) {
        char config[48];
        fast_config_format(config, sizeof config, &c[i]);
        expect_passes(dir, "257", "259", "261", "relu", config);
        expect_passes(dir, "260", "264", "64", "silu", config);
    }
}

/* Where the file store keeps key: entries/<h[0:2]>/<h[2:]>, h the SHA-256
 * of the key's bytes. */
static void record_path(char *out, size_t len, const char *dir, const autotune_target *t)
{
    size_t key_len;
    char *key = autotune_record_key(&key_len, t);
    CHECK(key != NULL);
    unsigned char digest[32];
    char hex[65];
    CHECK_OK(progcache__sha256_oneshot(digest, key, key_len));
    progcache__hex(hex, digest, sizeof digest);
    snprintf(out, len, "%s/entries/%.2s/%s", dir, hex, hex + 2);
    free(key);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void tune_once(sample_output *out, const char *dir)
{
    const char *args[] = {"--cache-dir", dir, "--autotune", "--m", "1024", "--n", "1024",
                          "--k", "1024", NULL};
    run(out, args);
    CHECK(out->status == 0);
    CHECK(!strcmp(sample_value(out, "Validation:"), "PASSED"));
    printf("autotune: %s\n", sample_value(out, "Autotune:"));
}

static void test_autotune(void)
{
    char dir[4096], path[4300], tile[256], key[25];
    cache_dir(dir, sizeof dir, "tune");
    const fast_config *c;
    size_t n = fast_candidates(&c);
    sample_output out;
    char re[512];

    /* Cold: the candidates were compiled by test_candidates, so all HIT. */
    tune_once(&out, dir);
    snprintf(re, sizeof re,
             "cold, %zu candidates compiled on [0-9]+ threads \\(0 MISS, %zu HIT\\) in [0-9.]+ "
             "ms, timed in [0-9.]+ ms; total [0-9.]+ ms; best [0-9]+x[0-9]+x[0-9]+:[0-9]+x[0-9]+ "
             "at [0-9]+\\.[0-9]{3} ms",
             n, n);
    CHECK(sample_match(sample_value(&out, "Autotune:"), re));
    snprintf(tile, sizeof tile, "%s", sample_value(&out, "Tile size:"));
    sample_expect e = {"HIT", dir, 1024, 1024, 1024, 0, "relu", 5, 20, 1};
    sample_check_format_ex(&out, &e, key, tile, 2);
    sample_output_free(&out);

    /* Warm: the record names the same winner. */
    tune_once(&out, dir);
    CHECK(sample_match(sample_value(&out, "Autotune:"),
                       "warm \\(cached record\\), [0-9]+\\.[0-9]{3} ms: .+ \\(tuned at [0-9.]+ "
                       "ms\\)"));
    sample_check_format_ex(&out, &e, key, tile, 2);
    sample_output_free(&out);

    /* A damaged record, then a foreign one, stored through the cache as
     * the sample would: each is a miss that re-tunes and is replaced. */
    autotune_target t = {device_name, arch, 1024, 1024, 1024, EPILOGUE_RELU};
    size_t key_len;
    char *record_key = autotune_record_key(&key_len, &t);
    CHECK(record_key != NULL);
    progcache_buf buf = PROGCACHE_BUF_INIT;
    progcache *cache = NULL;
    CHECK_OK(progcache_open(&cache, dir, NULL));
    CHECK_OK(progcache_get(&buf, cache, record_key, key_len));
    CHECK(buf.size > 22 && !memcmp(buf.data, "progcache-autotune v1\n", 22));
    autotune_target other = t;
    other.m = 2048;
    const fast_config win = {64, 64, 8, 8, 8};
    char *foreign = autotune_record_format(&other, &win, 1.0);
    const char *damage[] = {"progcache-autotune v1\ndevice=", foreign};
    const char *reason[] = {"malformed|another", "another device, size or epilogue"};
    for (int d = 0; d < 2; d++) {
        CHECK_OK(progcache_put(cache, record_key, key_len, damage[d], strlen(damage[d])));
        tune_once(&out, dir);
        const char *v = sample_value(&out, "Autotune:");
        CHECK(!strncmp(v, "cold, ", 6) && strstr(v, "(cached record not used: "));
        snprintf(re, sizeof re, ".*(%s).*", reason[d]);
        CHECK(sample_match(v, re));
        sample_output_free(&out);
        tune_once(&out, dir);
        CHECK(!strncmp(sample_value(&out, "Autotune:"), "warm (cached record)", 20));
        sample_output_free(&out);
    }
    free(foreign);

    /* Bytes damaged on disk behind the store's back: the store refuses the
     * entry (its digest no longer matches) or the record does not parse;
     * either way the run tunes again and the next is warm. */
    record_path(path, sizeof path, dir, &t);
    write_file(path, "progcache-autotune v1\nconfig=");
    tune_once(&out, dir);
    CHECK(!strncmp(sample_value(&out, "Autotune:"), "cold, ", 6));
    sample_output_free(&out);
    tune_once(&out, dir);
    CHECK(!strncmp(sample_value(&out, "Autotune:"), "warm (cached record)", 20));
    sample_output_free(&out);
    progcache_buf_free(&buf);
    progcache_close(cache);
    free(record_key);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    exe = argv[1];
    sample_gpu_or_skip("test_sample_fast_gpu", arch, sizeof arch, device_name, sizeof device_name);
    scratch = test_mkdtemp("samplefastgpu");

    test_sizes();
    test_epilogues();
    test_candidates();
    test_autotune();

    test_rmdtemp(scratch);
    puts("test_sample_fast_gpu: ok");
    return 0;
}
