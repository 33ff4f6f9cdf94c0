/* Helper for test_cuda_core_diff.py: reads and writes one entry of a file
 * store through the public store API, so the Python test can check that
 * cuda.core's FileStreamProgramCache and progcache share entries byte for
 * byte even when the progcache tool has no get/put subcommands.
 *
 *   key_store_xread get DIR KEY_HEX OUT_FILE   exit 0, or 3 on a miss
 *   key_store_xread put DIR KEY_HEX IN_FILE    exit 0
 * Any failure: exit 1 with the library's message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progcache/progcache.h"

static int fail(const char *what)
{
    fprintf(stderr, "key_store_xread: %s: %s\n", what, progcache_error_last());
    return 1;
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    size_t len = 0, cap = 0, got;
    if (!f)
        return NULL;
    do {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            unsigned char *p = realloc(data, cap);
            if (!p) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = p;
        }
        got = fread(data + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    *size = len;
    return data;
}

int main(int argc, char **argv)
{
    unsigned char key[PROGCACHE_KEY_SIZE];
    progcache_store *store = NULL;
    progcache_buf buf = PROGCACHE_BUF_INIT;
    int code = 1;

    if (argc != 5 || (strcmp(argv[1], "get") && strcmp(argv[1], "put"))) {
        fprintf(stderr, "usage: key_store_xread get|put DIR KEY_HEX FILE\n");
        return 2;
    }
    if (progcache_key_from_hex(key, argv[3]))
        return fail("key");
    if (progcache_store_file_new(&store, argv[2], NULL))
        return fail(argv[2]);
    if (!strcmp(argv[1], "get")) {
        int rc = progcache_store_get(&buf, store, key, sizeof key);
        if (rc == PROGCACHE_ENOTFOUND) {
            code = 3;
            goto done;
        }
        if (rc) {
            code = fail("get");
            goto done;
        }
        FILE *f = fopen(argv[4], "wb");
        if (!f || fwrite(buf.data, 1, buf.size, f) != buf.size || fclose(f)) {
            fprintf(stderr, "key_store_xread: cannot write %s\n", argv[4]);
            goto done;
        }
    } else {
        size_t size = 0;
        unsigned char *data = slurp(argv[4], &size);
        if (!data) {
            fprintf(stderr, "key_store_xread: cannot read %s\n", argv[4]);
            goto done;
        }
        int rc = progcache_store_put(store, key, sizeof key, data, size);
        free(data);
        if (rc) {
            code = fail("put");
            goto done;
        }
    }
    code = 0;
done:
    progcache_buf_free(&buf);
    progcache_store_free(store);
    return code;
}
