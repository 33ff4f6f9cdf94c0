/* Helpers shared by the benchmarks that spawn fresh processes (header only:
 * each benchmark is one file and one executable). */
#ifndef PROGCACHE_BENCH_UTIL_H
#define PROGCACHE_BENCH_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "progcache/cuda.h"
#include "progcache/progcache.h"

/* The sample's 16x16 tiled matmul with bias and ReLU: a realistic compile
 * for the benchmarks of many processes compiling (bench_single_flight,
 * bench_fleet), which make it distinct per round by a leading comment. */
static const char bench_matmul_source[] =
    "#define TILE 16\n"
    "extern \"C\" __global__ void matmul_epilogue(const float *__restrict__ A,\n"
    "    const float *__restrict__ B, const float *__restrict__ bias, float *__restrict__ C,\n"
    "    int M, int N, int K) {\n"
    "  __shared__ float As[TILE][TILE]; __shared__ float Bs[TILE][TILE];\n"
    "  int tx = threadIdx.x, ty = threadIdx.y;\n"
    "  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;\n"
    "  float acc = 0.0f;\n"
    "  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {\n"
    "    int ac = t * TILE + tx, br = t * TILE + ty;\n"
    "    As[ty][tx] = (row < M && ac < K) ? A[row * K + ac] : 0.0f;\n"
    "    Bs[ty][tx] = (br < K && col < N) ? B[br * N + col] : 0.0f;\n"
    "    __syncthreads();\n"
    "    #pragma unroll\n"
    "    for (int i = 0; i < TILE; ++i) acc += As[ty][i] * Bs[i][tx];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (row < M && col < N) { float v = acc + bias[col]; C[row * N + col] = v > 0.0f ? v : 0.0f; }\n"
    "}\n";

/* Every benchmark answers --help (or -h) anywhere on its command line with
 * its usage on standard output and exit status 0, before it does anything
 * (tests/bench/test_bench_help.sh runs each so). */
static inline void bench_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            exit(0);
        }
}

static inline double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0-1) of n values, which it sorts: the median at 0.5. */
static inline double bench_quantile(double *v, size_t n, double q)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* The file store at dir with the cap and flags given (the store benchmarks'
 * one way to open it), or exit saying why, named prog. */
static inline progcache_store *bench_store_open(const char *prog, const char *dir, uint64_t cap,
                                                unsigned int flags)
{
    progcache_file_options opts = PROGCACHE_FILE_OPTIONS_INIT;
    opts.max_size = cap;
    opts.flags = flags;
    progcache_store *s = NULL;
    if (progcache_store_file_new(&s, dir, &opts) != PROGCACHE_OK) {
        fprintf(stderr, "%s: %s: %s\n", prog, dir, progcache_error_last());
        exit(1);
    }
    return s;
}

static inline int bench__remove_one(const char *path, const struct stat *st, int type,
                                    struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

/* Delete a temporary directory a benchmark made, with everything in it (a
 * store bench leaves 100,000 entries behind otherwise). */
static inline void bench_remove_tree(const char *dir)
{
    if (nftw(dir, bench__remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "warning: could not remove all of %s\n", dir);
}

/* "-arch=sm_XY" for device 0, into arch. For a probe child: nothing CUDA
 * may run in a parent before it forks the processes it measures. Returns
 * 0, or 3 after saying on stdout that there is no device (the benchmark
 * then has nothing to measure and exits 0). */
static inline int bench_device_arch_option(char *arch, size_t len, const char *prog)
{
    const progcache_cuda_api *api;
    CUdevice dev;
    int major = 0, minor = 0;
    if (progcache_cuda_load(&api) || api->cuDeviceGet(&dev, 0) ||
        api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) {
        printf("%s: no CUDA device (%s): nothing to measure\n", prog, progcache_error_last());
        fflush(stdout);
        return 3;
    }
    snprintf(arch, len, "-arch=sm_%d%d", major, minor);
    return 0;
}

/* Machine-readable results (--json FILE), what scripts/plot_perf.py draws
 * docs/PERFORMANCE.md's figures from: one JSON object,
 *   {"schema": 1, "bench": NAME, "date": "YYYY-MM-DD", "time": ISO 8601 UTC,
 *    "host": {"name", "cpus"}, "command": "bench_x --a b", "results": {...}}
 * The benchmark writes the results object between bench_json_begin (which
 * leaves the file after "results": ) and bench_json_end. NULL path: no
 * file (both are no-ops). */
static inline FILE *bench_json_begin(const char *path, const char *bench, int argc, char **argv)
{
    if (!path)
        return NULL;
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return NULL;
    }
    time_t now = time(NULL);
    struct tm tm;
    char date[16], iso[32], host[256] = "";
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\"schema\": 1, \"bench\": \"%s\", \"date\": \"%s\", \"time\": \"%s\", ", bench,
            date, iso);
    fprintf(f, "\"host\": {\"name\": \"%s\", \"cpus\": %ld}, \"command\": \"", host,
            sysconf(_SC_NPROCESSORS_ONLN));
    for (int i = 0; i < argc; i++) {
        const char *a = i == 0 && strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[i];
        fputs(i ? " " : "", f);
        for (; *a; a++)
            if (*a == '"' || *a == '\\')
                fprintf(f, "\\%c", *a);
            else if ((unsigned char)*a >= 0x20)
                fputc(*a, f);
    }
    fputs("\", \"results\": ", f);
    return f;
}

static inline void bench_json_end(FILE *f, const char *path)
{
    if (!f)
        return;
    fputs("}\n", f);
    if (fclose(f) != 0)
        perror(path);
}

/* A free loopback TCP port (for a redis-server of the benchmark's own);
 * exits with a message naming prog when none can be had. */
static inline int bench_free_port(const char *prog)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        fprintf(stderr, "%s: picking a free port: %s\n", prog, strerror(errno));
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

#endif
