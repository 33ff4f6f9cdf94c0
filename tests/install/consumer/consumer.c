/* A program outside the progcache tree, built against an installed
 * progcache by tests/install/test_install.sh: through pkg-config (shared
 * and static) and through CMake's find_package (shared and static). It
 * uses the public headers only, CUDA's included (progcache/cuda.h), and
 * runs the cache: put, get, the settings. */
#include <progcache/cuda.h>
#include <progcache/progcache.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer CACHE_DIR\n");
        return 2;
    }
    if (progcache_version_number() != PROGCACHE_VERSION_NUMBER) {
        fprintf(stderr, "consumer: headers %s, library %s\n", PROGCACHE_VERSION_STRING,
                progcache_version_string());
        return 1;
    }
    progcache *cache;
    if (progcache_open(&cache, argv[1], NULL)) {
        fprintf(stderr, "consumer: %s\n", progcache_error_last());
        return 1;
    }
    static const char key[] = "consumer key", value[] = "consumer value";
    progcache_buf out = PROGCACHE_BUF_INIT;
    int ok = progcache_put(cache, key, sizeof key, value, sizeof value) == PROGCACHE_OK &&
             progcache_get(&out, cache, key, sizeof key) == PROGCACHE_OK &&
             out.size == sizeof value && !memcmp(out.data, value, sizeof value);
    progcache_stats s = PROGCACHE_STATS_INIT;
    ok = ok && progcache_stats_get(&s, cache) == PROGCACHE_OK &&
         s.max_size == PROGCACHE_MAX_SIZE_DEFAULT;
    progcache_buf_free(&out);
    progcache_close(cache);
    /* Something from progcache/cuda.h, which needs the CUDA headers. */
    progcache_program prog = PROGCACHE_PROGRAM_INIT;
    ok = ok && prog.version == PROGCACHE_PROGRAM_VERSION;
    printf("consumer: progcache %s %s\n", progcache_version_string(), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
