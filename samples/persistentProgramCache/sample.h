/* persistentProgramCache: shared declarations of the sample's files. */
#ifndef PERSISTENT_PROGRAM_CACHE_SAMPLE_H
#define PERSISTENT_PROGRAM_CACHE_SAMPLE_H

#include <stddef.h>

/* Exit statuses: 0 validation passed (or skipped without a device when
 * --arch was given), 1 failure (validation, CUDA, no device), 2 bad usage. */
enum { EXIT_PASSED = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

/* The order is the order of --help and of the tests; identity and relu
 * keep the values they had before the others were added. */
typedef enum {
    EPILOGUE_IDENTITY = 0,
    EPILOGUE_RELU = 1,
    EPILOGUE_GELU = 2,
    EPILOGUE_SIGMOID = 3,
    EPILOGUE_TANH = 4,
    EPILOGUE_SILU = 5,
    EPILOGUE_COUNT = 6
} epilogue_kind;

typedef enum { KERNEL_TILED = 0, KERNEL_FAST = 1 } kernel_kind;

/* The tile shape of the fast kernel: a block computes BM x BN outputs,
 * each of its (BM/TM) * (BN/TN) threads TM x TN of them, stepping through
 * K by BK. Written "BMxBNxBK:TMxTN", e.g. "128x128x8:8x8". */
typedef struct fast_config {
    int bm, bn, bk, tm, tn;
} fast_config;

typedef struct sample_args {
    int device;
    int m, n, k;
    int tile;
    epilogue_kind epilogue;
    char *cache_dir; /* absolute, ~ expanded; malloc'd */
    int clear_cache;
    int warmup;
    int iterations;
    const char *arch; /* "sm_90" from --arch, or NULL: from the device */
    int print_source;
    int async_store;
    kernel_kind kernel;
    fast_config config; /* --config, or the default */
    int config_given;
    int autotune;
    int templated; /* --templated: matmul<TILE, Epilogue> by a name expression */
} sample_args;

/* Parse argv. Returns -1 to go on, or an exit status (--help: 0; bad
 * input: 2, after a one-line message on stderr). */
int sample_parse_args(sample_args *out, int argc, char **argv);
void sample_args_free(sample_args *args);

const char *epilogue_name(epilogue_kind e);
/* The epilogue called name, or -1. */
int epilogue_parse(const char *name);
/* The epilogue in double precision, the formula the kernels use
 * (epilogue_body): what the host reference applies. */
double epilogue_apply(epilogue_kind e, double v);

/* The CUDA C++ source of the tiled kernel (malloc'd). */
char *kernel_source(int tile, epilogue_kind epilogue);
/* The body of the device function `float epilogue(float v)`, shared by
 * both kernels. */
const char *epilogue_body(epilogue_kind e);

/* ---- --templated (kernel_templated.c) ----------------------------------- */

/* The templated kernel's source, matmul<TILE, Epilogue> and one struct per
 * epilogue (malloc'd; the same text for every tile and epilogue). */
char *kernel_source_templated(void);
/* The epilogue's type in that source: "Relu". */
const char *epilogue_type(epilogue_kind e);
/* The name expression of one instantiation: "matmul<16, Relu>". */
void templated_expression(char *out, size_t len, int tile, epilogue_kind epilogue);

/* ---- the fast kernel (kernel_fast.c) ------------------------------------ */

/* The configuration used when neither --config nor --autotune picks one. */
extern const fast_config fast_default_config;

/* Threads per block of c: (bm/tm) * (bn/tn). */
int fast_config_threads(const fast_config *c);
/* Static shared memory of a block of c, in bytes. */
size_t fast_config_smem(const fast_config *c);
/* NULL when the generator supports c; else why not (static text). */
const char *fast_config_check(const fast_config *c);
/* Parse "BMxBNxBK:TMxTN". 0 on success, -1 on a malformed text (the
 * values are not checked: use fast_config_check). */
int fast_config_parse(fast_config *out, const char *text);
/* "BMxBNxBK:TMxTN" into out (at least 48 bytes). */
void fast_config_format(char *out, size_t len, const fast_config *c);
int fast_config_equal(const fast_config *a, const fast_config *b);

/* The candidates --autotune compiles and times, in a fixed order. */
size_t fast_candidates(const fast_config **out);

/* The CUDA C++ source of the fast kernel for c (valid) and epilogue
 * (malloc'd; NULL when out of memory). */
char *kernel_source_fast(const fast_config *c, epilogue_kind epilogue);

/* Launch shape of a kernel for an M x N output. */
typedef struct launch_dims {
    unsigned grid_x, grid_y, block_x, block_y;
} launch_dims;
launch_dims launch_dims_tiled(int tile, int m, int n);
launch_dims launch_dims_fast(const fast_config *c, int m, int n);

/* ---- host side (host_reference.c) --------------------------------------- */

/* Deterministic standard-normal float32 values (seeded; the same for any
 * number of threads). */
void fill_normal(float *out, size_t rows, size_t cols, unsigned long long seed);

/* The host reference C = epilogue(A @ B + bias) in double, compared with
 * the device's result as NumPy's allclose(rtol, atol) would.
 * Returns 1 when every element is close; *max_error is the largest
 * absolute difference. Uses every core. */
int validate(const float *a, const float *b, const float *bias, const float *c_device, int m,
             int n, int k, epilogue_kind epilogue, double rtol, double atol, double *max_error);

/* Number of threads the host work uses. */
int host_threads(void);

#endif
