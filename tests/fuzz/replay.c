/* Replays a fuzz target over its committed corpus without libFuzzer, so
 * the normal and sanitizer test runs check every input ever found
 * interesting (and every crash ever fixed stays fixed).
 *   replay DIR... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "replay: cannot open corpus %s\n", argv[i]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            static uint8_t buf[1 << 20];
            size_t len = fread(buf, 1, sizeof buf, f);
            fclose(f);
            uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees overreads */
            for (size_t j = 0; j < len; j++)
                copy[j] = buf[j];
            LLVMFuzzerTestOneInput(copy, len);
            free(copy);
            n++;
        }
        closedir(d);
    }
    printf("replayed %zu inputs: no crash\n", n);
    return n ? 0 : 1;
}
