/* Inputs and the host reference: seeded normal random numbers, and
 * C = epilogue(A @ B + bias) in double precision, compared element by
 * element with the device's result.
 *
 * The reference must keep up with the GPU at M=N=K=4096 (69 GFLOP in
 * double) in well under two seconds on a 16-core host, so it is a small
 * blocked GEMM rather than a triple loop:
 *  - B is converted once to double and repacked into panels of 8 columns
 *    (K x 8, contiguous), so the inner loop reads B sequentially;
 *  - each step computes a 4 x 8 block of C over all of K in registers
 *    (32 accumulators), reading 4 values of A and 8 of B per k;
 *  - rows are handed out to the cores in blocks of 32, and each block walks
 *    every panel, so a panel is reused from cache by the block's 8 row
 *    quads;
 *  - on x86-64 the kernel is also built for AVX2+FMA and picked at run time
 *    (target_clones), so one binary runs everywhere and fast where it can.
 * The comparison happens as each 4 x 8 block is finished: C is never stored
 * in double. Work is split into items taken from an atomic counter, so the
 * result does not depend on the number of threads. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sample.h"

#define PANEL 8      /* columns per panel of B */
#define QUAD 4       /* rows computed together */
#define ROW_BLOCK 32 /* rows per work item */
#define MAX_THREADS 256

/* Not under ThreadSanitizer: ifunc resolvers run before its run time is
 * initialised, and an instrumented resolver crashes the program at load. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define HOT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HOT_CLONES
#endif

/* Threads for work of this many multiply-adds (or values to draw): one
 * per 4 Mi of them, so that small problems run on the calling thread. A
 * thread costs its creation and a stack (about 50 us and a few pages of
 * memory); below this it is not won back, and a HIT process of a small
 * matrix (bench/run_hit_vs_driver.sh) would pay it for nothing. */
static int threads_for(double work)
{
    double n = work / (4.0 * 1024 * 1024);
    int max = host_threads();
    return n < 1 ? 1 : n > max ? max : (int)n;
}

int host_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    return (int)n;
}

/* ---- a tiny work pool -------------------------------------------------- */

typedef struct pool {
    void (*item)(void *ctx, size_t index, int worker);
    void *ctx;
    size_t count;
    atomic_size_t next;
} pool;

typedef struct worker_arg {
    pool *p;
    int worker;
} worker_arg;

static void *pool_worker(void *arg)
{
    worker_arg *w = arg;
    size_t i;
    while ((i = atomic_fetch_add(&w->p->next, 1)) < w->p->count)
        w->p->item(w->p->ctx, i, w->worker);
    return NULL;
}

/* Run item(ctx, i, worker) for i in [0, count) on up to nthreads threads,
 * the caller's included. A thread that fails to start leaves its share to
 * the others. */
static void pool_run(void (*item)(void *, size_t, int), void *ctx, size_t count, int nthreads)
{
    pool p = {item, ctx, count, 0};
    pthread_t tids[MAX_THREADS];
    worker_arg args[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    if ((size_t)nthreads > count)
        nthreads = count ? (int)count : 1;
    for (int t = 1; t < nthreads; t++) {
        args[t] = (worker_arg){&p, t};
        started[t] = pthread_create(&tids[t], NULL, pool_worker, &args[t]) == 0;
    }
    args[0] = (worker_arg){&p, 0};
    pool_worker(&args[0]);
    for (int t = 1; t < nthreads; t++)
        if (started[t])
            pthread_join(tids[t], NULL);
}

/* ---- normal random numbers ---------------------------------------------- */

/* splitmix64: a 64-bit generator good enough for test data, and seedable
 * per row so that rows can be filled in any order. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1]: never 0, so log() is finite. */
static double uniform(uint64_t *state)
{
    return (double)((splitmix64(state) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

typedef struct fill_job {
    float *out;
    size_t cols;
    uint64_t seed;
} fill_job;

static void fill_row(void *ctx, size_t row, int worker)
{
    (void)worker;
    const fill_job *j = ctx;
    uint64_t state = j->seed ^ (0x632be59bd9b4e019ull * (row + 1));
    float *out = j->out + row * j->cols;
    const double two_pi = 6.283185307179586;
    /* Box-Muller: two uniforms give two independent normals. */
    for (size_t c = 0; c < j->cols; c += 2) {
        double r = sqrt(-2.0 * log(uniform(&state)));
        double theta = two_pi * uniform(&state);
        out[c] = (float)(r * cos(theta));
        if (c + 1 < j->cols)
            out[c + 1] = (float)(r * sin(theta));
    }
}

void fill_normal(float *out, size_t rows, size_t cols, unsigned long long seed)
{
    fill_job j = {out, cols, seed};
    pool_run(fill_row, &j, rows, threads_for(64.0 * (double)rows * (double)cols));
}

/* ---- the reference ------------------------------------------------------ */

/* The formulas of epilogue_body() in kernel_source.c, in double. */
double epilogue_apply(epilogue_kind e, double v)
{
    switch (e) {
    case EPILOGUE_RELU:
        return v > 0.0 ? v : 0.0;
    case EPILOGUE_GELU:
        return 0.5 * v * (1.0 + erf(v * 0.70710678118654752));
    case EPILOGUE_SIGMOID:
        return 1.0 / (1.0 + exp(-v));
    case EPILOGUE_TANH:
        return tanh(v);
    case EPILOGUE_SILU:
        return v / (1.0 + exp(-v));
    default:
        return v;
    }
}

typedef struct ref_job {
    const float *a, *b, *bias, *c;
    int m, n, k;
    epilogue_kind epilogue;
    double rtol, atol;
    double *panels; /* n8/8 panels of k x 8 doubles */
    size_t n8;      /* n rounded up to PANEL */
    double max_error[MAX_THREADS];
    size_t failures[MAX_THREADS];
    int nan_seen[MAX_THREADS];
} ref_job;

static void pack_panel(void *ctx, size_t p, int worker)
{
    (void)worker;
    ref_job *j = ctx;
    double *dst = j->panels + p * (size_t)j->k * PANEL;
    size_t col0 = p * PANEL;
    for (size_t kk = 0; kk < (size_t)j->k; kk++) {
        const float *src = j->b + kk * (size_t)j->n;
        for (size_t c = 0; c < PANEL; c++)
            dst[kk * PANEL + c] = col0 + c < (size_t)j->n ? (double)src[col0 + c] : 0.0;
    }
}

/* acc[r][c] = sum over k of a_r[k] * panel[k][c]. The hot loop. */
HOT_CLONES static void block_4x8(double acc[QUAD][PANEL], const float *a0, const float *a1,
                                 const float *a2, const float *a3, const double *panel,
                                 size_t k)
{
    double s[QUAD][PANEL] = {{0}};
    for (size_t kk = 0; kk < k; kk++) {
        const double *b = panel + kk * PANEL;
        const double x0 = a0[kk], x1 = a1[kk], x2 = a2[kk], x3 = a3[kk];
        for (int c = 0; c < PANEL; c++) {
            s[0][c] += x0 * b[c];
            s[1][c] += x1 * b[c];
            s[2][c] += x2 * b[c];
            s[3][c] += x3 * b[c];
        }
    }
    memcpy(acc, s, sizeof s);
}

static void reference_rows(void *ctx, size_t item, int worker)
{
    ref_job *j = ctx;
    const size_t k = (size_t)j->k, n = (size_t)j->n;
    const size_t row0 = item * ROW_BLOCK;
    size_t row_end = row0 + ROW_BLOCK;
    if (row_end > (size_t)j->m)
        row_end = (size_t)j->m;
    double max_error = j->max_error[worker];
    size_t failures = j->failures[worker];
    for (size_t p = 0; p < j->n8 / PANEL; p++) {
        const double *panel = j->panels + p * k * PANEL;
        for (size_t r = row0; r < row_end; r += QUAD) {
            /* Rows past the end repeat the last row; their sums are unused. */
            const float *rows[QUAD];
            for (size_t q = 0; q < QUAD; q++)
                rows[q] = j->a + (r + q < row_end ? r + q : row_end - 1) * k;
            double acc[QUAD][PANEL];
            block_4x8(acc, rows[0], rows[1], rows[2], rows[3], panel, k);
            for (size_t q = 0; q < QUAD && r + q < row_end; q++) {
                for (size_t c = 0; c < PANEL && p * PANEL + c < n; c++) {
                    size_t col = p * PANEL + c;
                    double v = acc[q][c] + (double)j->bias[col];
                    v = epilogue_apply(j->epilogue, v);
                    double got = (double)j->c[(r + q) * n + col];
                    double diff = fabs(got - v);
                    if (isnan(diff))
                        j->nan_seen[worker] = 1;
                    if (!(diff <= j->atol + j->rtol * fabs(v)))
                        failures++;
                    if (diff > max_error)
                        max_error = diff;
                }
            }
        }
    }
    j->max_error[worker] = max_error;
    j->failures[worker] = failures;
}

int validate(const float *a, const float *b, const float *bias, const float *c_device, int m,
             int n, int k, epilogue_kind epilogue, double rtol, double atol, double *max_error)
{
    ref_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    *j = (ref_job){.a = a, .b = b, .bias = bias, .c = c_device, .m = m, .n = n, .k = k,
                   .epilogue = epilogue, .rtol = rtol, .atol = atol};
    j->n8 = ((size_t)n + PANEL - 1) / PANEL * PANEL;
    j->panels = malloc(j->n8 * (size_t)k * sizeof(double));
    if (!j->panels) {
        free(j);
        return -1;
    }
    int threads = threads_for((double)m * n * k);
    pool_run(pack_panel, j, j->n8 / PANEL, threads);
    pool_run(reference_rows, j, ((size_t)m + ROW_BLOCK - 1) / ROW_BLOCK, threads);

    double worst = 0.0;
    size_t failures = 0;
    int nan_seen = 0;
    for (int t = 0; t < MAX_THREADS; t++) {
        if (j->max_error[t] > worst)
            worst = j->max_error[t];
        failures += j->failures[t];
        nan_seen |= j->nan_seen[t];
    }
    *max_error = nan_seen ? NAN : worst;
    free(j->panels);
    free(j);
    return failures == 0 && !nan_seen;
}
