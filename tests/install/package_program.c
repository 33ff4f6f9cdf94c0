/* Built by tests/install/test_package.sh against the installed .deb
 * packages with `pkg-config --cflags --libs progcache`, and run twice on one
 * cache directory: the first run compiles a kernel to PTX with NVRTC (no
 * GPU needed) and stores it (prints MISS), the second finds it (prints
 * HIT) and checks the bytes are the ones compiled. */
#include <progcache/cuda.h>
#include <progcache/progcache.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: package_program CACHE_DIR\n");
        return 2;
    }
    progcache_key_nvrtc_options prog = PROGCACHE_KEY_NVRTC_OPTIONS_INIT;
    prog.source = "extern \"C\" __global__ void scale(float *a) { a[threadIdx.x] *= 2.0f; }\n";
    prog.target = PROGCACHE_TARGET_PTX;
    prog.name = "package_program.cu";
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache *cache = NULL;
    progcache_buf hit = PROGCACHE_BUF_INIT, built = PROGCACHE_BUF_INIT;
    int rc = 1;
    if (progcache_key_nvrtc(key, &prog) || progcache_open(&cache, argv[1], NULL))
        goto done;
    int got = progcache_get(&hit, cache, key, sizeof key);
    if (got != PROGCACHE_OK && got != PROGCACHE_ENOTFOUND)
        goto done;
    if (progcache_nvrtc_compile(&built, NULL, NULL, &prog))
        goto done;
    if (got == PROGCACHE_OK) {
        if (hit.size != built.size || memcmp(hit.data, built.data, hit.size)) {
            fprintf(stderr, "package_program: the hit's bytes are not the compile's\n");
            goto done;
        }
        puts("HIT");
    } else {
        if (progcache_put(cache, key, sizeof key, built.data, built.size))
            goto done;
        puts("MISS");
    }
    rc = 0;
done:
    if (rc && progcache_error_last()[0])
        fprintf(stderr, "package_program: %s\n", progcache_error_last());
    progcache_buf_free(&hit);
    progcache_buf_free(&built);
    progcache_close(cache);
    return rc;
}
