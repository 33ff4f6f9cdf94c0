/* bench_scale: the operations of issue 32 at several directory sizes, side
 * by side: whatever grows with the number of entries shows here.
 *
 *   bench_scale [--dir DIR] [--sizes 10,100000] [--rounds N] [--bin PROGCACHE]
 *               [--value-size N] [--cuda-core PYTHON]
 *
 * Each size is populated by writing entries directly in the on-disk layout
 * (entries/<2 hex>/<62 hex>, small files, no fsync: a million puts would
 * take hours on a small machine), then progcache/state is removed so that
 * the next open seeds the counters with one scan, as for a directory
 * another program filled. Then, medians of --rounds runs:
 *
 *   stats           `progcache stats --no-charts` (a read-only open), a process
 *   stats --charts  the same with the charts
 *   ls | head -1    spawn to the first line of `progcache ls` on a pipe
 *   prune noop      `progcache prune -M 1T` (nothing to remove)
 *   put after other the first put (library, a cap of 5 GiB or twice the
 *                   directory, whichever is larger) after one
 *                   entry written cuda.core's way (tmp/ then rename), and
 *                   the slowest of the 5 puts after it
 *   crossing put    a put that takes the total over a cap set just above it
 *                   (once: it evicts)
 *
 * The tool is --bin (default: progcache next to this program). Run with
 * LD_LIBRARY_PATH and --bin of another build to measure that build (the
 * library calls go through the shared library). With --cuda-core (the
 * Python of a virtual environment with cuda-core 1.2, such as the tests'
 * build/cuda-core-venv/bin/python), cuda.core's FileStreamProgramCache is
 * timed in the same directory by bench_scale_cuda_core.py: len() (its
 * count), an open with a cap, and a put after another writer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "progcache/progcache.h"

static const char *bin;
static size_t vsize = 5734;

static void entry_name(char out[65], uint64_t i)
{
    uint64_t x = i + 0x1234567ull;
    for (int w = 0; w < 4; w++) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        snprintf(out + 16 * w, 17, "%016llx", (unsigned long long)z);
    }
}

/* Entries 0..n-1 that are missing written (so a directory grows, and what
 * an eviction removed comes back); the state file removed. */
static void populate(const char *dir, size_t n)
{
    char path[PATH_MAX], name[65];
    static char *value;
    if (!value && !(value = calloc(1, vsize)))
        exit(1);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/entries", dir);
    mkdir(path, 0700);
    for (int s = 0; s < 256; s++) {
        snprintf(path, sizeof path, "%s/entries/%02x", dir, s);
        mkdir(path, 0700);
    }
    for (size_t i = 0; i < n; i++) {
        entry_name(name, i);
        snprintf(path, sizeof path, "%s/entries/%.2s/%s", dir, name, name + 2);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0 || write(fd, value, vsize) != (ssize_t)vsize) {
            perror(path);
            exit(1);
        }
        close(fd);
    }
    snprintf(path, sizeof path, "%s/progcache/state", dir);
    (void)unlink(path);
}

static progcache_store *open_store(const char *dir, uint64_t cap)
{
    return bench_store_open("bench_scale", dir, cap, PROGCACHE_FILE_NO_FSYNC);
}

/* Run the tool with args; ms from spawn to exit, or (first_line) to its
 * first line of output, after which it is stopped. */
static double tool_ms(char *const *args, int first_line)
{
    int fds[2];
    if (pipe(fds) != 0)
        exit(1);
    double t0 = bench_now_us();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        if (!first_line)
            dup2(null, 1);
        close(fds[0]);
        execv(bin, args);
        _exit(127);
    }
    close(fds[1]);
    char c;
    double t = -1;
    if (first_line) {
        while (read(fds[0], &c, 1) == 1 && c != '\n')
            ;
        t = (bench_now_us() - t0) / 1000;
        kill(pid, SIGTERM);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!first_line)
        t = (bench_now_us() - t0) / 1000;
    close(fds[0]);
    return t;
}

static double median(double *v, int n)
{
    return bench_quantile(v, (size_t)n, 0.5);
}

static double tool_median(int rounds, int first_line, const char *a1, const char *a2,
                          const char *a3, const char *a4, const char *a5)
{
    char *args[] = {(char *)bin, (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5,
                    NULL};
    double t[64];
    for (int r = 0; r < rounds; r++)
        t[r] = tool_ms(args, first_line);
    return median(t, rounds);
}

/* An entry written the way cuda.core writes one. */
static void foreign_write(const char *dir, uint64_t id)
{
    char path[PATH_MAX], to[PATH_MAX], name[65];
    snprintf(path, sizeof path, "%s/tmp", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/tmp/tmpXXXXXX", dir);
    int fd = mkstemp(path);
    char buf[512] = {0};
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        exit(1);
    close(fd);
    entry_name(name, id);
    snprintf(to, sizeof to, "%s/entries/%.2s/%s", dir, name, name + 2);
    if (rename(path, to) != 0)
        exit(1);
}

static double put_us(progcache_store *s, uint64_t id, const void *value)
{
    char key[32];
    snprintf(key, sizeof key, "bench-scale-%llu", (unsigned long long)id);
    double t0 = bench_now_us();
    if (progcache_store_put(s, key, strlen(key), value, vsize) != PROGCACHE_OK) {
        fprintf(stderr, "bench_scale: put: %s\n", progcache_error_last());
        exit(1);
    }
    return bench_now_us() - t0;
}

typedef struct row {
    size_t n;
    double stats, charts, ls, prune, put_first, put_next, cross;
    double cc_len, cc_open, cc_put; /* cuda.core's, -1 when not run */
} row;

static const char *cuda_core_python;

/* cuda.core's figures in dir, from bench_scale_cuda_core.py. */
static void cuda_core(row *r, const char *dir, int rounds)
{
    r->cc_len = r->cc_open = r->cc_put = -1;
    if (!cuda_core_python)
        return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --dir '%s' --rounds %d", cuda_core_python,
             BENCH_SCALE_CUDA_CORE, dir, rounds);
    FILE *p = popen(cmd, "r");
    if (!p || fscanf(p, "len %lf open_cap %lf put_after_other %lf", &r->cc_len, &r->cc_open,
                     &r->cc_put) != 3)
        fprintf(stderr, "bench_scale: no figures from %s\n", cmd);
    while (p && fgetc(p) != EOF) /* the rest of its line: it exits, not killed */
        ;
    if (p)
        pclose(p);
}

static row measure(const char *dir, size_t n, int rounds)
{
    row r = {n, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1};
    uint64_t count = 0, total = 0;
    sleep(3); /* the shard directories just written settle (FORMAT.md: 2 s) */
    progcache_store *s = open_store(dir, PROGCACHE_SIZE_NONE);
    progcache_store_count(&count, s); /* seeds the counters: one scan */
    progcache_store_free(s);
    r.stats = tool_median(rounds, 0, "stats", "--no-charts", "--dir", dir, NULL);
    r.charts = tool_median(rounds, 0, "stats", "--charts", "--dir", dir, NULL);
    r.ls = tool_median(rounds, 1, "ls", "--dir", dir, NULL, NULL);
    r.prune = tool_median(rounds, 0, "prune", "-M", "1T", "--dir", dir);
    char *value = calloc(1, vsize);
    /* A cap in force (what makes puts look for other writers) but above
     * the directory: at a million 5.6 KiB entries the default 5 GiB is
     * exceeded, and every put would be an eviction step instead. */
    s = open_store(dir, PROGCACHE_SIZE_NONE);
    progcache_store_total_size(&total, s);
    progcache_store_free(s);
    s = open_store(dir, total * 2 > (5ull << 30) ? total * 2 : 5ull << 30);
    double first[64], next[64];
    /* Keys no earlier run of this bench put in the directory: a key put
     * again replaces its entry, and a "crossing" put that replaces one
     * crosses nothing (the 1M figure of an earlier pass was that). */
    static uint64_t id;
    if (!id)
        id = (uint64_t)time(NULL) << 24;
    for (int k = 0; k < rounds; k++) {
        foreign_write(dir, id++);
        first[k] = put_us(s, id++, value);
        next[k] = 0;
        for (int j = 0; j < 5; j++) {
            double t = put_us(s, id++, value);
            next[k] = t > next[k] ? t : next[k];
        }
    }
    r.put_first = median(first, rounds) / 1000;
    r.put_next = median(next, rounds) / 1000;
    progcache_store_total_size(&total, s);
    progcache_store_free(s);
    sleep(3); /* tmp/ quiet: the crossing put is not also a catch-up */
    s = open_store(dir, total + vsize / 2);
    r.cross = put_us(s, id++, value) / 1000;
    progcache_store_free(s);
    free(value);
    cuda_core(&r, dir, rounds);
    return r;
}

static const char usage_text[] =
    "usage: bench_scale [--dir DIR] [--sizes 10,100000] [--rounds N] [--bin PROGCACHE]\n"
    "                   [--value-size N] [--cuda-core PYTHON]\n"
    "\n"
    "The operations of issue 32 (stats, stats --charts, ls | head -1, prune with\n"
    "nothing to do, a put after another writer, the put that crosses the cap) at\n"
    "each size, in ms. Entries are written directly in the on-disk layout.\n"
    "--cuda-core PYTHON: also cuda.core's len(), open with a cap and put after\n"
    "another writer, with that Python (a virtual environment with cuda-core).\n";

int main(int argc, char **argv)
{
    bench_help(argc, argv, usage_text);
    const char *base = NULL, *sizes = "10,100000";
    int rounds = 5;
    static char self_bin[PATH_MAX];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            base = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bin") && i + 1 < argc)
            bin = argv[++i];
        else if (!strcmp(argv[i], "--cuda-core") && i + 1 < argc)
            cuda_core_python = argv[++i];
        else if (!strcmp(argv[i], "--value-size") && i + 1 < argc)
            vsize = strtoul(argv[++i], NULL, 10);
        else {
            fputs(usage_text, stderr);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64)
        rounds = 5;
    if (!bin) {
        ssize_t len = readlink("/proc/self/exe", self_bin, sizeof self_bin - 16);
        if (len <= 0)
            return 1;
        self_bin[len] = '\0';
        strcpy(strrchr(self_bin, '/') + 1, "progcache");
        bin = self_bin;
    }
    char tmpl[512];
    int made = !base;
    if (!base) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpl, sizeof tmpl, "%s/bench-scale-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpl))
            return 1;
        base = tmpl;
    }
    (void)mkdir(base, 0700);
    unsetenv("PROGCACHE_MAX_SIZE");
    printf("bench_scale: %zu-byte entries, medians of %d rounds, tool %s\n\n", vsize, rounds, bin);
    printf("| entries | stats (ms) | stats --charts (ms) | ls \\| head -1 (ms) | "
           "prune, nothing to do (ms) | put after one other write (ms) | "
           "slowest of the 5 puts after (ms) | put crossing the cap (ms) | "
           "cuda.core len() (ms) | cuda.core open with a cap (ms) | "
           "cuda.core put after another writer (ms) |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    char dir[600];
    for (const char *p = sizes; *p;) {
        size_t n = strtoul(p, (char **)&p, 10);
        if (*p == ',')
            p++;
        if (!n)
            continue;
        /* Small sizes in a folder of their own; large ones grow one. */
        snprintf(dir, sizeof dir, "%s/%s", base, n < 1000 ? "small" : "large");
        populate(dir, n);
        row r = measure(dir, n, rounds);
        printf("| %zu | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f | %.1f | %.2f |\n",
               r.n, r.stats, r.charts, r.ls, r.prune, r.put_first, r.put_next, r.cross, r.cc_len,
               r.cc_open, r.cc_put);
        fflush(stdout);
    }
    if (made)
        bench_remove_tree(base);
    return 0;
}
