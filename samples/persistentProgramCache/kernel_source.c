/* The CUDA C++ source the sample compiles: a tiled matrix product with a
 * bias and an epilogue, one output element per thread.
 *
 * The tile size is a compile-time constant and the epilogue is spelled out
 * in the source, so each (tile, epilogue) pair is a different program with
 * its own cache key, as in NVIDIA's Python sample. The text is fixed for a
 * given pair: the key of the printed source (--print-source) is the key the
 * sample uses, and cuda.core derives the same one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

/* Names as on the command line; bodies of `float epilogue(float v)`.
 * identity and relu are the texts of the first version, so their programs
 * keep their keys. gelu is the exact (erf) form, PyTorch's default
 * (approximate='none'), not the tanh approximation. */
static const char *const epilogue_names[EPILOGUE_COUNT] = {"identity", "relu", "gelu",
                                                             "sigmoid",  "tanh", "silu"};
static const char *const epilogue_bodies[EPILOGUE_COUNT] = {
    "return v;",
    "return v > 0.0f ? v : 0.0f;",
    "return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));",
    "return 1.0f / (1.0f + expf(-v));",
    "return tanhf(v);",
    "return v / (1.0f + expf(-v));",
};

const char *epilogue_name(epilogue_kind e)
{
    return (unsigned)e < EPILOGUE_COUNT ? epilogue_names[e] : "?";
}

int epilogue_parse(const char *name)
{
    for (int e = 0; e < EPILOGUE_COUNT; e++)
        if (!strcmp(name, epilogue_names[e]))
            return e;
    return -1;
}

const char *epilogue_body(epilogue_kind e)
{
    return (unsigned)e < EPILOGUE_COUNT ? epilogue_bodies[e] : "return v;";
}

static const char source_format[] =
    "// C = %s(A @ B + bias): A is MxK, B is KxN, bias has N entries, C is MxN,\n"
    "// all row-major float32. One thread per element of C; a TILE x TILE block\n"
    "// stages tiles of A and B in shared memory. Bounds are checked, so any\n"
    "// M, N, K work.\n"
    "constexpr int TILE = %d;\n"
    "\n"
    "__device__ __forceinline__ float epilogue(float v)\n"
    "{\n"
    "    %s\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void matmul_epilogue(const float *__restrict__ A,\n"
    "                                            const float *__restrict__ B,\n"
    "                                            const float *__restrict__ bias,\n"
    "                                            float *__restrict__ C,\n"
    "                                            int M, int N, int K)\n"
    "{\n"
    SAMPLE_TILED_MATMUL_LOOP
    "        C[(size_t)row * N + col] = epilogue(acc + bias[col]);\n"
    "}\n";

char *kernel_source(int tile, epilogue_kind epilogue)
{
    const char *name = epilogue_name(epilogue);
    const char *body = epilogue_body(epilogue);
    int len = snprintf(NULL, 0, source_format, name, tile, body);
    char *text = malloc((size_t)len + 1);
    if (text)
        snprintf(text, (size_t)len + 1, source_format, name, tile, body);
    return text;
}

launch_dims launch_dims_tiled(int tile, int m, int n)
{
    launch_dims d = {(unsigned)((n + tile - 1) / tile), (unsigned)((m + tile - 1) / tile),
                     (unsigned)tile, (unsigned)tile};
    return d;
}
