/* bench_seal: the cost of a HIT (store-level get of one entry) with each
 * seal mechanism (docs/FORMAT.md, "The seal" and "The seal without
 * extended attributes"; docs/SHARED.md):
 *
 *   bench_seal [--size N] [--samples N] [--dir DIR] [--no-nfs] [--json FILE]
 *
 *  - xattr, local: a fresh cache under DIR (default $TMPDIR or /tmp);
 *  - sidecar, local (forced): the same, in a child run with the noxattr
 *    LD_PRELOAD shim of tests/nfs/ (the file system then says it has no
 *    user extended attributes);
 *  - sidecar, sshfs: a cache on the sshfs mount of tests/nfs/nfs_fixture.sh
 *    (a private sshd on 127.0.0.1), unless --no-nfs or it cannot mount.
 * Each case puts one entry of --size bytes (100 KB) and times --samples
 * gets of it, after 100 unmeasured ones; medians and p90 of per-call
 * times. Each case runs in a child process of its own (this program with
 * --child DIR), so the shim is only in the forced one. Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/file.h"
#include "progcache/progcache.h"

static int child(const char *dir, size_t size, size_t samples)
{
    progcache_file *f;
    if (progcache_file_open(&f, dir, NULL)) {
        fprintf(stderr, "bench_seal: %s\n", progcache_error_last());
        return 1;
    }
    progcache_store *s = progcache_file_store(f);
    unsigned char key[32];
    for (int i = 0; i < 32; i++)
        key[i] = (unsigned char)(i * 37 + 11);
    unsigned char *value = malloc(size);
    for (size_t i = 0; i < size; i++)
        value[i] = (unsigned char)(i * 131 >> 3);
    if (!value || progcache_store_put(s, key, sizeof key, value, size)) {
        fprintf(stderr, "bench_seal: put: %s\n", progcache_error_last());
        return 1;
    }
    progcache_buf out = PROGCACHE_BUF_INIT;
    double *t = malloc(samples * sizeof *t);
    for (size_t i = 0; i < samples + 100; i++) {
        double a = bench_now_us();
        int rc = progcache_store_get(&out, s, key, sizeof key);
        double b = bench_now_us();
        if (rc || out.size != size) {
            fprintf(stderr, "bench_seal: get: not a hit: %s\n", progcache_error_last());
            return 1;
        }
        if (i >= 100)
            t[i - 100] = b - a;
    }
    qsort(t, samples, sizeof *t, bench_cmp_double);
    printf("%s %.1f %.1f %.1f\n", progcache_file_seal_mechanism(f), t[samples / 2],
           t[samples / 10], t[samples * 9 / 10]);
    progcache_buf_free(&out);
    free(t);
    free(value);
    progcache_file_close(f);
    return 0;
}

typedef struct result {
    const char *name;
    char mechanism[16];
    double median, p10, p90;
    int ok;
} result;

/* Run this program as --child on dir (with the shim when noxattr). */
static void run_case(result *r, const char *self, const char *dir, size_t size, size_t samples,
                     int noxattr)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s'%s' --child '%s' --size %zu --samples %zu",
             noxattr ? "LD_PRELOAD='" BENCH_NOXATTR_SHIM "' " : "", self, dir, size, samples);
    FILE *p = popen(cmd, "r");
    r->ok = p && fscanf(p, "%15s %lf %lf %lf", r->mechanism, &r->median, &r->p10, &r->p90) == 4;
    if (p)
        pclose(p);
}

int main(int argc, char **argv)
{
    bench_help(argc, argv,
               "usage: bench_seal [--size BYTES] [--samples N] [--dir DIR] [--no-nfs] [--json FILE]\n"
               "  a HIT (progcache_get) of one entry with the xattr seal on a local disk, the\n"
               "  sidecar seal (forced) on a local disk, and on an sshfs mount (as root)\n");
    size_t size = 100 * 1000, samples = 2000;
    const char *dir = NULL, *json_path = NULL, *child_dir = NULL;
    int nfs = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
            samples = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--child") && i + 1 < argc)
            child_dir = argv[++i];
        else if (!strcmp(argv[i], "--no-nfs"))
            nfs = 0;
        else {
            fprintf(stderr, "usage: bench_seal [--size N] [--samples N] [--dir DIR] [--no-nfs] "
                            "[--json FILE]\n");
            return 2;
        }
    }
    if (!samples || !size)
        return 2;
    if (child_dir)
        return child(child_dir, size, samples);

    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    char base[4096];
    snprintf(base, sizeof base, "%s/progcache-bench-seal-XXXXXX",
             dir ? dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(base)) {
        perror(base);
        return 1;
    }
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/xattr", base);
    snprintf(b, sizeof b, "%s/forced", base);
    result r[3] = {{"xattr, local disk", "", 0, 0, 0, 0},
                   {"sidecar, local disk (forced)", "", 0, 0, 0, 0},
                   {"sidecar, sshfs mount", "", 0, 0, 0, 0}};
    run_case(&r[0], self, a, size, samples, 0);
    run_case(&r[1], self, b, size, samples, 1);
    bench_remove_tree(base);

    if (nfs) {
        char fx[4200], cmd[8600], node[4200] = "";
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(fx, sizeof fx, "%s/progcache-bench-nfs-XXXXXX", tmp);
        if (mkdtemp(fx)) {
            snprintf(cmd, sizeof cmd, "bash '" BENCH_NFS_FIXTURE "' start '%s' %ld", fx,
                     (long)getpid());
            FILE *p = popen(cmd, "r");
            char line[4200];
            for (int i = 0; p && i < 3 && fgets(line, sizeof line, p); i++)
                if (i == 1)
                    snprintf(node, sizeof node, "%.*s/cache", (int)strcspn(line, "\n"), line);
            if (p && pclose(p) == 0 && node[0])
                run_case(&r[2], self, node, size, samples, 0);
            else
                fprintf(stderr, "bench_seal: the sshfs fixture did not start: no sshfs figure\n");
            snprintf(cmd, sizeof cmd, "bash '" BENCH_NFS_FIXTURE "' stop '%s'", fx);
            if (system(cmd) != 0)
                fprintf(stderr, "bench_seal: the sshfs fixture did not stop cleanly\n");
        }
    }

    printf("HIT of a %zu-byte entry, store-level get, %zu samples (µs)\n\n", size, samples);
    printf("| case | seal | median | p10 | p90 |\n|---|---|---:|---:|---:|\n");
    for (int i = 0; i < 3; i++)
        if (r[i].ok)
            printf("| %s | %s | %.1f | %.1f | %.1f |\n", r[i].name, r[i].mechanism, r[i].median,
                   r[i].p10, r[i].p90);
    FILE *json = bench_json_begin(json_path, "seal", argc, argv);
    if (json) {
        fprintf(json, "{\"size\": %zu, \"samples\": %zu, \"cases\": [", size, samples);
        int first = 1;
        for (int i = 0; i < 3; i++)
            if (r[i].ok) {
                fprintf(json,
                        "%s{\"case\": \"%s\", \"seal\": \"%s\", \"hit_median_us\": %.1f, "
                        "\"hit_p10_us\": %.1f, \"hit_p90_us\": %.1f}",
                        first ? "" : ", ", r[i].name, r[i].mechanism, r[i].median, r[i].p10,
                        r[i].p90);
                first = 0;
            }
        fputs("]}", json);
        bench_json_end(json, json_path);
    }
    return r[0].ok && r[1].ok ? 0 : 1;
}
