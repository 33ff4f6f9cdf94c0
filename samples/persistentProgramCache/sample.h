/* persistentProgramCache: shared declarations of the sample's files. */
#ifndef PERSISTENT_PROGRAM_CACHE_SAMPLE_H
#define PERSISTENT_PROGRAM_CACHE_SAMPLE_H

#include <stddef.h>

/* Exit statuses: 0 validation passed (or skipped without a device when
 * --arch was given), 1 failure (validation, CUDA, no device), 2 bad usage. */
enum { EXIT_PASSED = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

typedef enum { EPILOGUE_IDENTITY = 0, EPILOGUE_RELU = 1 } epilogue_kind;

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
} sample_args;

/* Parse argv. Returns -1 to go on, or an exit status (--help: 0; bad
 * input: 2, after a one-line message on stderr). */
int sample_parse_args(sample_args *out, int argc, char **argv);
void sample_args_free(sample_args *args);

const char *epilogue_name(epilogue_kind e);

/* The CUDA C++ source of the kernel (malloc'd). */
char *kernel_source(int tile, epilogue_kind epilogue);

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
