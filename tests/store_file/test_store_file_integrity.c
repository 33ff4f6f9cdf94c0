/* Damaged entries of a real CUBIN are never handed out:
 *  - every truncation length of an entry written without a digest (as
 *    cuda.core writes them) that keeps the ELF magic is a miss, and the
 *    entry is removed (shorter ones are not CUBINs at all);
 *  - every sampled bit flip of an entry progcache wrote (with its digest)
 *    is a miss, and the entry is removed;
 *  - bit flips of an entry without a digest never crash the read: either a
 *    miss (the structure check caught it) or exactly the bytes on disk. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "progcache/cuda.h"
#include "progcache/stats.h"
#include "store/file/file_store.h"

static const char source[] =
    "extern \"C\" __global__ void scale(float *a, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n";

static char path[4400];

/* Write bytes as a new file at the entry's path (no digest: a foreign
 * writer), the way cuda.core publishes an entry. */
static void write_foreign(const unsigned char *data, size_t size)
{
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, data, size) == (ssize_t)size && close(fd) == 0);
    CHECK(rename(tmp, path) == 0);
}

static int exists(void)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int main(void)
{
    const char *opts[] = {"-arch=sm_90"};
    progcache_key_nvrtc_options o = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    o.source = source;
    o.options = opts;
    o.num_options = 1;
    progcache_buf cubin = PROGCACHE_BUF_INIT;
    CHECK_OK(progcache_nvrtc_compile(&cubin, NULL, NULL, &o));
    CHECK(cubin.size > 1000);

    char *dir = test_mkdtemp("integrity");
    progcache_file_options fo = PROGCACHE_FILE_OPTIONS_INIT;
    fo.flags = PROGCACHE_FILE_NO_FSYNC;
    progcache_store *s = NULL;
    CHECK_OK(progcache_store_file_new(&s, dir, &fo));
    const char key[] = "the kernel";
    char rel[FILE_REL_PATH_MAX];
    CHECK_OK(progcache__file_rel_path(rel, NULL, key, sizeof key));
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    CHECK_OK(progcache_store_put(s, key, sizeof key, cubin.data, cubin.size)); /* makes the shard */
    progcache_buf got = PROGCACHE_BUF_INIT;

    /* The whole file, foreign-written: a hit. */
    write_foreign(cubin.data, cubin.size);
    CHECK_OK(progcache_store_get(&got, s, key, sizeof key));
    CHECK(got.size == cubin.size && !memcmp(got.data, cubin.data, cubin.size));

    /* Shorter than the ELF magic, the bytes are no artifact at all: the
     * store (which holds any values) returns them, and compile-or-load,
     * which wants a CUBIN, refuses them and heals (tests/cuda). */
    for (size_t len = 1; len < 4; len++) {
        write_foreign(cubin.data, len);
        CHECK_OK(progcache_store_get(&got, s, key, sizeof key));
        progcache_artifact_info info = PROGCACHE_ARTIFACT_INFO_INIT;
        CHECK_OK(progcache_artifact_inspect(&info, got.data, got.size));
        CHECK(info.kind != PROGCACHE_KIND_CUBIN);
        progcache_artifact_info_release(&info);
    }
    size_t truncations = 0;
    for (size_t len = 4; len < cubin.size; len++) {
        write_foreign(cubin.data, len);
        if (progcache_store_get(&got, s, key, sizeof key) != PROGCACHE_ENOTFOUND) {
            fprintf(stderr, "a CUBIN cut to %zu of %zu bytes was read as whole\n", len,
                    cubin.size);
            CHECK(0);
        }
        CHECK(!exists()); /* removed: the next put heals it */
        truncations++;
    }

    unsigned int rng = 12345;
    size_t flips = 0, foreign_misses = 0;
    unsigned char *bad = malloc(cubin.size);
    for (int round = 0; round < 2000; round++) {
        rng = rng * 1103515245u + 12345u;
        size_t bit = (rng >> 4) % (cubin.size * 8);
        memcpy(bad, cubin.data, cubin.size);
        bad[bit / 8] ^= (unsigned char)(1u << (bit % 8));

        /* progcache's own entry, damaged in place: the digest catches it. */
        CHECK_OK(progcache_store_put(s, key, sizeof key, cubin.data, cubin.size));
        int fd = open(path, O_WRONLY);
        CHECK(fd >= 0 && pwrite(fd, &bad[bit / 8], 1, (off_t)(bit / 8)) == 1 && close(fd) == 0);
        CHECK_RC(PROGCACHE_ENOTFOUND, progcache_store_get(&got, s, key, sizeof key));
        CHECK(!exists());
        flips++;

        /* The same damage in a foreign entry: no crash, and never bytes
         * other than the file's. */
        write_foreign(bad, cubin.size);
        int rc = progcache_store_get(&got, s, key, sizeof key);
        CHECK(rc == PROGCACHE_OK || rc == PROGCACHE_ENOTFOUND);
        if (rc == PROGCACHE_OK)
            CHECK(got.size == cubin.size && !memcmp(got.data, bad, cubin.size));
        else
            foreign_misses++;
    }
    progcache_stats st = PROGCACHE_STATS_INIT;
    CHECK_OK(progcache_store_stats_get(&st, s));
    CHECK(st.corrupt_removed >= truncations + flips);
    printf("%zu truncations and %zu bit flips of a %zu-byte CUBIN: all misses, all removed; "
           "%zu of the same flips in foreign entries caught by the structure check\n",
           truncations, flips, cubin.size, foreign_misses);
    free(bad);
    progcache_buf_free(&got);
    progcache_buf_free(&cubin);
    progcache_store_free(s);
    test_rmdtemp(dir);
    printf("test_store_file_integrity: all passed\n");
    return 0;
}
