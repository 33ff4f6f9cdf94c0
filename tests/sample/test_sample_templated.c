/* The sample's --templated run: matmul<TILE, Epilogue> instantiated by a
 * name expression, the kernel found by its lowered name (docs/CUDA.md,
 * "Name expressions").
 *
 *   test_sample_templated SAMPLE_EXE       no GPU needed: --arch sm_90, the
 *       cache flow MISS then HIT in fresh processes, the same lowered name
 *       both times, the key `progcache key --name-expression` gives, an
 *       entry without the names record (as cuda.core writes it) healed
 *       once then a plain HIT;
 *   test_sample_templated SAMPLE_EXE gpu   (label gpu; SKIPPED without a
 *       device) the same on the device: launched and validated, MISS then
 *       HIT, for two tile sizes and two epilogues.
 * env PROGCACHE_BIN: the progcache tool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "progcache/cuda.h"
#include "progcache/file.h"
#include "progcache/store.h"
#include "sample_run.h"

static const char *exe;
static char *scratch;
static int gpu;

static void run(sample_output *out, const char *const *args)
{
    sample_run r = {exe, args, NULL, NULL};
    sample_exec(out, &r, scratch);
    if (out->status != 0)
        sample_dump(out);
}

/* One run; checks the lines this mode adds and the verdict. Copies the
 * lowered name and the 24 digits of the key. */
static void run_once(const char *dir, const char *tile, const char *epilogue, const char *status,
                     char *lowered, size_t lowered_len, char *key24)
{
    const char *arch_args[] = {"--templated", "--arch", "sm_90", "--cache-dir", dir,
                               "--tile-size", tile, "--epilogue", epilogue, "--m", "200",
                               "--n", "136", "--k", "72", NULL};
    const char *gpu_args[] = {"--templated", "--cache-dir", dir, "--tile-size", tile,
                              "--epilogue", epilogue, "--m", "200", "--n", "136", "--k", "72",
                              NULL};
    sample_output out;
    run(&out, gpu ? gpu_args : arch_args);
    CHECK(out.status == 0);
    const char *v = sample_value(&out, "Cache status:");
    CHECK(v && !strncmp(v, status, strlen(status)));
    v = sample_value(&out, "Name expression:");
    char want[64];
    snprintf(want, sizeof want, "matmul<%s, %c%s>", tile, epilogue[0] - 'a' + 'A', epilogue + 1);
    CHECK(v && !strcmp(v, want));
    v = sample_value(&out, "Lowered name:");
    CHECK(v && sample_match(v, "_Z6matmulILi[0-9]+E[0-9]+[A-Za-z]+EvPKfS2_S2_Pfiii( .*)?"));
    snprintf(lowered, lowered_len, "%s", v);
    v = sample_value(&out, "Cache key:");
    CHECK(v && strlen(v) >= 24);
    memcpy(key24, v, 24);
    key24[24] = '\0';
    v = sample_value(&out, "Validation:");
    CHECK(v && !strncmp(v, gpu ? "PASSED" : "SKIPPED", gpu ? 6 : 7));
    sample_output_free(&out);
}

static void test_miss_then_hit(void)
{
    const char *tiles[] = {"16", "32"}, *epilogues[] = {"relu", "gelu"};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cache", scratch);
    for (int t = 0; t < 2; t++)
        for (int e = 0; e < 2; e++) {
            char l1[256], l2[256], k1[25], k2[25];
            run_once(dir, tiles[t], epilogues[e], "MISS", l1, sizeof l1, k1);
            run_once(dir, tiles[t], epilogues[e], "HIT", l2, sizeof l2, k2);
            CHECK(!strcmp(l1, l2) && !strcmp(k1, k2));
        }
}

/* The printed source and `progcache key` with the name expression: the
 * key the sample uses, the one cuda.core derives from the same inputs. */
static void test_key(void)
{
    const char *tool = getenv("PROGCACHE_BIN");
    CHECK(tool != NULL);
    const char *src_args[] = {"--print-source", "--templated", NULL};
    sample_output src;
    run(&src, src_args);
    CHECK(src.status == 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/templated.cu", scratch);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (size_t i = 0; i < src.num_lines; i++)
        fprintf(f, "%s\n", src.lines[i]);
    fclose(f);
    sample_output_free(&src);
    const char *key_args[] = {"key", "--name-expression", "matmul<16, Relu>", path, "--",
                              "-arch=sm_90", "--std=c++17", NULL};
    sample_run kr = {tool, key_args, NULL, NULL};
    sample_output key;
    sample_exec(&key, &kr, scratch);
    CHECK(key.status == 0 && key.num_lines == 1);
    char dir[4096], lowered[256], key24[25];
    snprintf(dir, sizeof dir, "%s/cache-key", scratch);
    run_once(dir, "16", "relu", "MISS", lowered, sizeof lowered, key24);
    CHECK(!strncmp(key.lines[0], key24, 24));

    /* The same entry written without the names record, as cuda.core
     * writes it: the sample's one name and the artifact's one kernel say
     * which it is (no compile), a HIT with the same lowered name. */
    unsigned char k[32];
    CHECK_OK(progcache_key_from_hex(k, key.lines[0]));
    progcache_file *file = NULL;
    CHECK_OK(progcache_file_open(&file, dir, NULL));
    progcache_buf bytes = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_store_get(&bytes, progcache_file_store(file), k, 32));
    CHECK_OK(progcache_store_remove(progcache_file_store(file), k, 32));
    CHECK_OK(progcache_store_put(progcache_file_store(file), k, 32, bytes.data, bytes.size));
    progcache_buf_free(&bytes);
    progcache_file_close(file);
    char again[256], key2[25];
    run_once(dir, "16", "relu", "HIT", again, sizeof again, key2);
    CHECK(!strcmp(again, lowered));
    sample_output_free(&key);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2);
    exe = argv[1];
    gpu = argc > 2 && !strcmp(argv[2], "gpu");
    const progcache_cuda_api *api;
    if (gpu && progcache_cuda_load(&api) != PROGCACHE_OK) {
        printf("test_sample_templated gpu: no CUDA device (%s): SKIPPED\n", progcache_error_last());
        return TEST_SKIP_CODE;
    }
    if (!gpu && progcache_cuda_load(&api) == PROGCACHE_OK)
        gpu = 1; /* a real device answers: launches run and validate */
    scratch = test_mkdtemp("sample-templated");
    test_miss_then_hit();
    test_key();
    test_rmdtemp(scratch);
    printf("sample --templated: ok\n");
    return 0;
}
