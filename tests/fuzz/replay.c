/* Replays a fuzz target over its committed corpus without libFuzzer, so
 * the normal and sanitizer test runs check every input ever found
 * interesting (and every crash ever fixed stays fixed).
 *   replay DIR... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One input: its bytes in a buffer of exactly their size, so ASan sees
 * any read past them. */
static void replay_one(const char *path, void *ctx)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint8_t *copy = malloc(len ? len : 1);
    for (size_t j = 0; j < len; j++)
        copy[j] = buf[j];
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
    ++*(size_t *)ctx;
}

int main(int argc, char **argv)
{
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (test_each_name(argv[i], replay_one, &n) < 0) {
            fprintf(stderr, "replay: cannot open corpus %s\n", argv[i]);
            return 1;
        }
    }
    printf("replayed %zu inputs: no crash\n", n);
    return n ? 0 : 1;
}
