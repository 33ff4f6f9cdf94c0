/* The fast kernel (--kernel fast): C = epilogue(A @ B + bias) in FP32 as a
 * register-blocked SGEMM, generated for one tile shape and one epilogue.
 *
 * Design (docs/PERFORMANCE.md, "Matmul kernels", has the figures):
 *  - A block computes a BM x BN tile of C; each thread TM x TN outputs held
 *    in registers, as groups of 4 x 4 spread over the tile (rows ty*4..+3,
 *    then the same BM/(TM/4) further down; columns likewise), so that every
 *    fragment read from shared memory is one 16-byte load and the threads of
 *    a quarter warp read 128 consecutive bytes or one broadcast.
 *  - A warp is 4 x 8 threads (rows x columns): per step of k it reads 4
 *    vectors of A and 8 of B, few shared-memory wavefronts per 32*TM*TN
 *    FMAs.
 *  - Tiles of A (stored transposed, so that a thread's TM values of A for
 *    one k are contiguous) and of B go through shared memory BK values of k
 *    at a time, in two buffers: the next step's global loads are issued
 *    into registers before this step's FMAs and written to the other
 *    buffer after them, one barrier per step.
 *  - Global loads and the stores of C are 16-byte vectors where the row is
 *    16-byte aligned (K, resp. N, a multiple of 4) and the vector lies
 *    inside the matrix; otherwise guarded scalar loads fill zeros, so any
 *    M, N, K work (1 x 1 x 1 too).
 *  - Everything is a compile-time constant but M, N, K: one program per
 *    (tile shape, epilogue), compiled once for every size, and fully
 *    unrolled inner loops with register arrays indexed by constants only.
 *    __launch_bounds__ caps the registers so that MIN_BLOCKS blocks fit on
 *    a multiprocessor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

/* 128 x 256 tiles of 256 threads, 8 x 16 outputs each: the shape --autotune
 * picked on an H200 for every size from 2048 to 8192 (docs/PERFORMANCE.md:
 * 45 TFLOP/s at 4096, against 39.5 for 128 x 128 tiles of 8 x 8). 128
 * accumulators and 24 fragment values per k step: 3 shared-memory loads
 * per 128 FMAs. It takes 236 registers, so one block (8 warps) per
 * multiprocessor; the FMAs of a thread are independent enough to hide
 * the latencies. Small matrices want smaller tiles (more blocks): that is
 * what --autotune is for. */
const fast_config fast_default_config = {128, 256, 8, 8, 16};

/* What --autotune tries: large thread tiles (most FMAs per shared-memory
 * load), the classic 128 x 128 / 8 x 8 shape and deeper k steps, narrower
 * tiles (more blocks for mid-sized matrices) and small tiles for small
 * matrices, where filling the 132 multiprocessors matters most. */
static const fast_config candidates[] = {
    {128, 256, 8, 8, 16}, {128, 128, 8, 8, 8},  {128, 128, 16, 8, 8}, {256, 128, 8, 16, 8},
    {128, 256, 12, 8, 16}, {128, 128, 8, 8, 16}, {128, 64, 8, 8, 8},  {64, 128, 8, 8, 8},
    {64, 64, 8, 8, 8},    {64, 64, 16, 4, 4},   {256, 128, 8, 8, 8},  {32, 32, 8, 4, 4},
};

size_t fast_candidates(const fast_config **out)
{
    *out = candidates;
    return sizeof candidates / sizeof candidates[0];
}

int fast_config_threads(const fast_config *c)
{
    return (c->bm / c->tm) * (c->bn / c->tn);
}

/* Two buffers of A (transposed, rows padded by 4 floats) and of B. */
size_t fast_config_smem(const fast_config *c)
{
    return 2 * (size_t)c->bk * (size_t)(c->bm + 4 + c->bn) * sizeof(float);
}

const char *fast_config_check(const fast_config *c)
{
    if (c->bm < 4 || c->bn < 4 || c->bk < 4 || c->tm < 4 || c->tn < 4 || c->bm > 1024 ||
        c->bn > 1024 || c->bk > 64 || c->tm > 16 || c->tn > 16)
        return "BM, BN must be 4..1024, BK 4..64, TM and TN 4..16";
    if (c->tm % 4 || c->tn % 4 || c->bk % 4)
        return "TM, TN and BK must be multiples of 4 (16-byte vectors)";
    if (c->bm % c->tm || c->bn % c->tn)
        return "BM must be a multiple of TM and BN of TN";
    if ((c->bm / c->tm) % 4 || (c->bn / c->tn) % 8)
        return "a warp is 4 x 8 threads: BM/TM must be a multiple of 4 and BN/TN of 8";
    if (fast_config_threads(c) > 1024)
        return "more than 1024 threads per block: (BM/TM)*(BN/TN) must be at most 1024";
    if (c->tm * c->tn > 256)
        return "TM*TN must be at most 256 (registers)";
    if (fast_config_smem(c) > 48 * 1024)
        return "the two shared-memory buffers exceed 48 KiB: make BK, BM or BN smaller";
    return NULL;
}

int fast_config_parse(fast_config *out, const char *text)
{
    fast_config c;
    int used = 0;
    if (sscanf(text, "%dx%dx%d:%dx%d%n", &c.bm, &c.bn, &c.bk, &c.tm, &c.tn, &used) != 5 ||
        text[used] != '\0')
        return -1;
    *out = c;
    return 0;
}

void fast_config_format(char *out, size_t len, const fast_config *c)
{
    snprintf(out, len, "%dx%dx%d:%dx%d", c->bm, c->bn, c->bk, c->tm, c->tn);
}

int fast_config_equal(const fast_config *a, const fast_config *b)
{
    return a->bm == b->bm && a->bn == b->bn && a->bk == b->bk && a->tm == b->tm &&
           a->tn == b->tn;
}

launch_dims launch_dims_fast(const fast_config *c, int m, int n)
{
    launch_dims d = {(unsigned)((n + c->bn - 1) / c->bn), (unsigned)((m + c->bm - 1) / c->bm),
                     (unsigned)fast_config_threads(c), 1};
    return d;
}

/* Registers per thread that ptxas allows when `blocks` blocks of `threads`
 * threads must fit on one multiprocessor: each of its 4 schedulers has
 * 16384 registers and gets a quarter of the warps, rounded up; allocation
 * is in steps of 8, at most 255. */
static int register_cap(int threads, int blocks)
{
    int warps = blocks * ((threads + 31) / 32);
    int cap = 16384 / (((warps + 3) / 4) * 32) / 8 * 8;
    return cap > 255 ? 255 : cap;
}

/* Blocks per multiprocessor to ask __launch_bounds__ for: the most whose
 * register cap still holds a rough estimate of what a thread needs
 * (accumulators, two sets of fragments, staging vectors, addresses), and
 * that 2048 threads, 32 blocks and 228 KiB of shared memory allow. Checked
 * with ptxas -v: none of the candidates spills. */
static int min_blocks(const fast_config *c)
{
    int threads = fast_config_threads(c);
    int staging = 4 * ((c->bm * c->bk / 4 + threads - 1) / threads +
                       (c->bk * c->bn / 4 + threads - 1) / threads);
    int regs = c->tm * c->tn + 2 * (c->tm + c->tn) + staging + 24;
    if (regs < 72)
        regs = 72;
    int most = 2048 / threads;
    int by_smem = (int)(233472 / (fast_config_smem(c) + 1024));
    if (most > by_smem)
        most = by_smem;
    if (most > 32)
        most = 32;
    int blocks = 1;
    while (blocks < most && register_cap(threads, blocks + 1) >= regs)
        blocks++;
    return blocks;
}

static const char fast_format[] =
    "// C = %s(A @ B + bias): A is MxK, B is KxN, bias has N entries, C is MxN,\n"
    "// all row-major float32. Fast variant, generated for one tile shape: a\n"
    "// block of THREADS threads computes a BM x BN tile of C, each thread TM x TN\n"
    "// outputs in registers; tiles of A (transposed) and B pass through shared\n"
    "// memory BK values of k at a time, double-buffered. 16-byte loads where rows\n"
    "// are 16-byte aligned, guarded scalar loads at the edges: any M, N, K work.\n"
    "constexpr int BM = %d, BN = %d, BK = %d, TM = %d, TN = %d;\n"
    "constexpr int MIN_BLOCKS = %d;\n"
    "\n"
    "constexpr int THREADS_M = BM / TM, THREADS_N = BN / TN;\n"
    "constexpr int THREADS = THREADS_M * THREADS_N;\n"
    "constexpr int WARPS_N = THREADS_N / 8; // a warp is 4 x 8 threads\n"
    "constexpr int AS_LD = BM + 4; // padding: conflict-free transposed stores\n"
    "constexpr int A_VECS = BM * BK / 4, B_VECS = BK * BN / 4;\n"
    "constexpr int A_PER_THREAD = (A_VECS + THREADS - 1) / THREADS;\n"
    "constexpr int B_PER_THREAD = (B_VECS + THREADS - 1) / THREADS;\n"
    "\n"
    "__device__ __forceinline__ float epilogue(float v)\n"
    "{\n"
    "    %s\n"
    "}\n"
    "\n"
    "// A[row][k..k+3], zeros outside A.\n"
    "__device__ __forceinline__ float4 load_a(const float *__restrict__ A, int M, int K,\n"
    "                                         int row, int k, bool vec)\n"
    "{\n"
    "    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
    "    if (row < M) {\n"
    "        const float *p = A + (size_t)row * K + k;\n"
    "        if (vec && k + 3 < K) {\n"
    "            v = __ldg(reinterpret_cast<const float4 *>(p));\n"
    "        } else {\n"
    "            if (k < K) v.x = __ldg(p);\n"
    "            if (k + 1 < K) v.y = __ldg(p + 1);\n"
    "            if (k + 2 < K) v.z = __ldg(p + 2);\n"
    "            if (k + 3 < K) v.w = __ldg(p + 3);\n"
    "        }\n"
    "    }\n"
    "    return v;\n"
    "}\n"
    "\n"
    "// B[k][col..col+3], zeros outside B.\n"
    "__device__ __forceinline__ float4 load_b(const float *__restrict__ B, int K, int N,\n"
    "                                         int k, int col, bool vec)\n"
    "{\n"
    "    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
    "    if (k < K) {\n"
    "        const float *p = B + (size_t)k * N + col;\n"
    "        if (vec && col + 3 < N) {\n"
    "            v = __ldg(reinterpret_cast<const float4 *>(p));\n"
    "        } else {\n"
    "            if (col < N) v.x = __ldg(p);\n"
    "            if (col + 1 < N) v.y = __ldg(p + 1);\n"
    "            if (col + 2 < N) v.z = __ldg(p + 2);\n"
    "            if (col + 3 < N) v.w = __ldg(p + 3);\n"
    "        }\n"
    "    }\n"
    "    return v;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)\n"
    "matmul_epilogue(const float *__restrict__ A, const float *__restrict__ B,\n"
    "                const float *__restrict__ bias, float *__restrict__ C,\n"
    "                int M, int N, int K)\n"
    "{\n"
    "    __shared__ __align__(16) float As[2][BK][AS_LD];\n"
    "    __shared__ __align__(16) float Bs[2][BK][BN];\n"
    "\n"
    "    const int tid = threadIdx.x;\n"
    "    const int warp = tid / 32, lane = tid %% 32;\n"
    "    const int ty = (warp / WARPS_N) * 4 + lane / 8;\n"
    "    const int tx = (warp %% WARPS_N) * 8 + lane %% 8;\n"
    "    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;\n"
    "    const bool a_vec = (K & 3) == 0; // rows of A are 16-byte aligned\n"
    "    const bool b_vec = (N & 3) == 0; // rows of B and C are\n"
    "\n"
    "    float4 ra[A_PER_THREAD], rb[B_PER_THREAD];\n"
    "    auto load_tile = [&](int k0) {\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < A_PER_THREAD; ++i) {\n"
    "            const int v = tid + i * THREADS;\n"
    "            if (A_VECS %% THREADS == 0 || v < A_VECS)\n"
    "                ra[i] = load_a(A, M, K, m0 + v / (BK / 4), k0 + v %% (BK / 4) * 4, a_vec);\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < B_PER_THREAD; ++i) {\n"
    "            const int v = tid + i * THREADS;\n"
    "            if (B_VECS %% THREADS == 0 || v < B_VECS)\n"
    "                rb[i] = load_b(B, K, N, k0 + v / (BN / 4), n0 + v %% (BN / 4) * 4, b_vec);\n"
    "        }\n"
    "    };\n"
    "    auto store_tile = [&](int buf) {\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < A_PER_THREAD; ++i) {\n"
    "            const int v = tid + i * THREADS;\n"
    "            if (A_VECS %% THREADS == 0 || v < A_VECS) {\n"
    "                const int r = v / (BK / 4), c = v %% (BK / 4) * 4;\n"
    "                As[buf][c + 0][r] = ra[i].x;\n"
    "                As[buf][c + 1][r] = ra[i].y;\n"
    "                As[buf][c + 2][r] = ra[i].z;\n"
    "                As[buf][c + 3][r] = ra[i].w;\n"
    "            }\n"
    "        }\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < B_PER_THREAD; ++i) {\n"
    "            const int v = tid + i * THREADS;\n"
    "            if (B_VECS %% THREADS == 0 || v < B_VECS)\n"
    "                *reinterpret_cast<float4 *>(&Bs[buf][v / (BN / 4)][v %% (BN / 4) * 4]) = rb[i];\n"
    "        }\n"
    "    };\n"
    "\n"
    "    float acc[TM][TN];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < TM; ++i)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < TN; ++j)\n"
    "            acc[i][j] = 0.0f;\n"
    "\n"
    "    const int tiles = (K + BK - 1) / BK;\n"
    "    load_tile(0);\n"
    "    store_tile(0);\n"
    "    __syncthreads();\n"
    "    for (int t = 0; t < tiles; ++t) {\n"
    "        const int cur = t & 1;\n"
    "        if (t + 1 < tiles)\n"
    "            load_tile((t + 1) * BK); // in flight during the FMAs below\n"
    "#pragma unroll\n"
    "        for (int kk = 0; kk < BK; ++kk) {\n"
    "            float a[TM], b[TN];\n"
    "#pragma unroll\n"
    "            for (int g = 0; g < TM / 4; ++g) {\n"
    "                const float4 v = *reinterpret_cast<const float4 *>(\n"
    "                    &As[cur][kk][g * THREADS_M * 4 + ty * 4]);\n"
    "                a[g * 4 + 0] = v.x;\n"
    "                a[g * 4 + 1] = v.y;\n"
    "                a[g * 4 + 2] = v.z;\n"
    "                a[g * 4 + 3] = v.w;\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int g = 0; g < TN / 4; ++g) {\n"
    "                const float4 v = *reinterpret_cast<const float4 *>(\n"
    "                    &Bs[cur][kk][g * THREADS_N * 4 + tx * 4]);\n"
    "                b[g * 4 + 0] = v.x;\n"
    "                b[g * 4 + 1] = v.y;\n"
    "                b[g * 4 + 2] = v.z;\n"
    "                b[g * 4 + 3] = v.w;\n"
    "            }\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < TM; ++i)\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < TN; ++j)\n"
    "                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);\n"
    "        }\n"
    "        if (t + 1 < tiles)\n"
    "            store_tile(cur ^ 1); // the other buffer: its readers passed the last barrier\n"
    "        __syncthreads();\n"
    "    }\n"
    "\n"
    "#pragma unroll\n"
    "    for (int g = 0; g < TM / 4; ++g) {\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < 4; ++i) {\n"
    "            const int row = m0 + g * THREADS_M * 4 + ty * 4 + i;\n"
    "            if (row >= M)\n"
    "                continue;\n"
    "            float *c_row = C + (size_t)row * N;\n"
    "#pragma unroll\n"
    "            for (int h = 0; h < TN / 4; ++h) {\n"
    "                const int col = n0 + h * THREADS_N * 4 + tx * 4;\n"
    "                const float *s = &acc[g * 4 + i][h * 4];\n"
    "                if (b_vec && col + 3 < N) {\n"
    "                    const float4 bv = __ldg(reinterpret_cast<const float4 *>(bias + col));\n"
    "                    float4 o;\n"
    "                    o.x = epilogue(s[0] + bv.x);\n"
    "                    o.y = epilogue(s[1] + bv.y);\n"
    "                    o.z = epilogue(s[2] + bv.z);\n"
    "                    o.w = epilogue(s[3] + bv.w);\n"
    "                    *reinterpret_cast<float4 *>(c_row + col) = o;\n"
    "                } else {\n"
    "#pragma unroll\n"
    "                    for (int j = 0; j < 4; ++j)\n"
    "                        if (col + j < N)\n"
    "                            c_row[col + j] = epilogue(s[j] + __ldg(bias + col + j));\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n";

char *kernel_source_fast(const fast_config *c, epilogue_kind epilogue)
{
    const char *name = epilogue_name(epilogue);
    const char *body = epilogue_body(epilogue);
    int blocks = min_blocks(c);
    int len = snprintf(NULL, 0, fast_format, name, c->bm, c->bn, c->bk, c->tm, c->tn, blocks,
                       body);
    char *text = malloc((size_t)len + 1);
    if (text)
        snprintf(text, (size_t)len + 1, fast_format, name, c->bm, c->bn, c->bk, c->tm, c->tn,
                 blocks, body);
    return text;
}
