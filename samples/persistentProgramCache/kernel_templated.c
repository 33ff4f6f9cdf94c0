/* --templated: the tiled kernel as a C++ template, matmul<TILE, Epilogue>,
 * instantiated by a name expression ("matmul<16, Relu>") instead of being
 * generated per tile size and epilogue. The source is one fixed text; the
 * name expression is what makes each (tile, epilogue) pair a program of
 * its own (name expressions are in the cache key). The kernel is found by
 * the lowered (mangled) name NVRTC gives the instantiation, which
 * progcache keeps with the cache entry, so a hit in a fresh process finds
 * it without compiling (docs/CUDA.md, "Name expressions"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

/* The epilogue's type in the source, for each epilogue_kind. */
static const char *const type_names[EPILOGUE_COUNT] = {"Identity", "Relu",  "Gelu",
                                                         "Sigmoid",  "Tanh", "Silu"};

static const char source_head[] =
    "// C = Epilogue(A @ B + bias): A is MxK, B is KxN, bias has N entries, C is\n"
    "// MxN, all row-major float32. One thread per element of C; a TILE x TILE\n"
    "// block stages tiles of A and B in shared memory. Instantiate it with a name\n"
    "// expression such as \"matmul<16, Relu>\".\n";

static const char source_body[] =
    "\n"
    "template <int TILE, class Epilogue>\n"
    "__global__ void matmul(const float *__restrict__ A, const float *__restrict__ B,\n"
    "                       const float *__restrict__ bias, float *__restrict__ C,\n"
    "                       int M, int N, int K)\n"
    "{\n"
    "    __shared__ float As[TILE][TILE];\n"
    "    __shared__ float Bs[TILE][TILE];\n"
    "    const int tx = threadIdx.x;\n"
    "    const int ty = threadIdx.y;\n"
    "    const int row = blockIdx.y * TILE + ty;\n"
    "    const int col = blockIdx.x * TILE + tx;\n"
    "    float acc = 0.0f;\n"
    "    for (int k0 = 0; k0 < K; k0 += TILE) {\n"
    "        const int ka = k0 + tx;\n"
    "        const int kb = k0 + ty;\n"
    "        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;\n"
    "        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;\n"
    "        __syncthreads();\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < TILE; ++kk)\n"
    "            acc = fmaf(As[ty][kk], Bs[kk][tx], acc);\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (row < M && col < N)\n"
    "        C[(size_t)row * N + col] = Epilogue::apply(acc + bias[col]);\n"
    "}\n";

const char *epilogue_type(epilogue_kind e)
{
    return (unsigned)e < EPILOGUE_COUNT ? type_names[e] : "Identity";
}

char *kernel_source_templated(void)
{
    /* One struct per epilogue, its body the one the generated kernels use. */
    size_t len = sizeof source_head + sizeof source_body;
    for (int e = 0; e < EPILOGUE_COUNT; e++)
        len += strlen(type_names[e]) + strlen(epilogue_body((epilogue_kind)e)) + 96;
    char *text = malloc(len);
    if (!text)
        return NULL;
    size_t at = (size_t)snprintf(text, len, "%s\n", source_head);
    for (int e = 0; e < EPILOGUE_COUNT; e++)
        at += (size_t)snprintf(text + at, len - at,
                               "struct %s {\n"
                               "    __device__ __forceinline__ static float apply(float v) { %s }\n"
                               "};\n",
                               type_names[e], epilogue_body((epilogue_kind)e));
    snprintf(text + at, len - at, "%s", source_body);
    return text;
}

void templated_expression(char *out, size_t len, int tile, epilogue_kind epilogue)
{
    snprintf(out, len, "matmul<%d, %s>", tile, epilogue_type(epilogue));
}
