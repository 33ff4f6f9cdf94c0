#!/usr/bin/env python3
"""persistentProgramCache in Python on cuda.core, CuPy and NumPy.

The Python side of the side-by-side comparison with the C sample
(samples/persistentProgramCache). It follows the flow of NVIDIA's Python
sample of the same name (cuda-samples, python/2_CoreConcepts) step for step:
Program + ProgramOptions, make_program_cache_key, FileStreamProgramCache,
ObjectCode.from_cubin, get_kernel, launch, CUDA events; CuPy for device
arrays, NumPy for the reference. It generates exactly the C sample's kernel
source (same text, same options), so both derive the same cache key and can
share one cache directory; it prints the same lines in the same format, so
bench/run_sample_compare.sh reads both the same way.

Written for this repository (not NVIDIA's file); see docs/PERFORMANCE.md.
"""

import argparse
import os
import sys
import time

# --help and --print-source need none of these: their absence is said when a
# run needs them.
try:
    import cupy as cp
    import numpy as np
    from cuda.core import (
        Device,
        EventOptions,
        LaunchConfig,
        ObjectCode,
        Program,
        ProgramOptions,
        launch,
    )
    from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
    MISSING = None
except ImportError as e:
    MISSING = e

KERNEL_NAME = "matmul_epilogue"
RTOL = 1e-3
ATOL = 1e-3

# Byte for byte the C sample's source (samples/persistentProgramCache/
# kernel_source.c): same text, same key.
SOURCE_FORMAT = """\
// C = {name}(A @ B + bias): A is MxK, B is KxN, bias has N entries, C is MxN,
// all row-major float32. One thread per element of C; a TILE x TILE block
// stages tiles of A and B in shared memory. Bounds are checked, so any
// M, N, K work.
constexpr int TILE = {tile};

__device__ __forceinline__ float epilogue(float v)
{{
    {body}
}}

extern "C" __global__ void matmul_epilogue(const float *__restrict__ A,
                                            const float *__restrict__ B,
                                            const float *__restrict__ bias,
                                            float *__restrict__ C,
                                            int M, int N, int K)
{{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk)
            acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
        __syncthreads();
    }}
    if (row < M && col < N)
        C[(size_t)row * N + col] = epilogue(acc + bias[col]);
}}
"""

EPILOGUE_BODIES = {
    "identity": "return v;",
    "relu": "return v > 0.0f ? v : 0.0f;",
}


def kernel_source(tile, epilogue):
    return SOURCE_FORMAT.format(name=epilogue, tile=tile, body=EPILOGUE_BODIES[epilogue])


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--m", type=positive_int, default=512)
    p.add_argument("--n", type=positive_int, default=512)
    p.add_argument("--k", type=positive_int, default=512)
    p.add_argument("--tile-size", type=int, choices=(16, 32), default=16)
    p.add_argument("--epilogue", choices=("identity", "relu"), default="relu")
    p.add_argument("--cache-dir", default="~/.cache/cuda-samples/persistentProgramCache")
    p.add_argument("--clear-cache", action="store_true")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iterations", type=positive_int, default=20)
    p.add_argument("--print-source", action="store_true")
    p.add_argument("--progcache", action="store_true",
                   help="progcache.ProgramCache instead of FileStreamProgramCache (the one "
                        "line docs/PYTHON.md changes; needs the progcache package)")
    return p.parse_args(argv)


def line(label, value):
    print(f"{label:<20}{value}")


def main(argv=None):
    args = parse_args(argv)
    source = kernel_source(args.tile_size, args.epilogue)
    if args.print_source:
        sys.stdout.write(source)
        return 0
    if MISSING:
        print("persistent_program_cache_cudacore.py: needs cuda.core, CuPy and NumPy: %s" % MISSING,
              file=sys.stderr)
        return 3

    # Device and stream (cuInit and the primary context happen here, before
    # any timing, as in the C sample).
    device = Device(args.device)
    device.set_current()
    stream = device.create_stream()
    cc = device.compute_capability
    arch = f"sm_{cc.major}{cc.minor}"

    cache_dir = os.path.abspath(os.path.expanduser(args.cache_dir))
    if args.progcache:  # the one-line change (docs/PYTHON.md)
        import progcache

        cache = progcache.ProgramCache(cache_dir)
    else:
        cache = FileStreamProgramCache(cache_dir)
    if args.clear_cache:
        cache.clear()

    print("Persistent Program Cache")
    line("Device:", device.name)
    line("Compute Capability:", f"{cc.major}.{cc.minor}")
    line("Cache directory:", cache_dir)
    line("Workload:", f"C = {args.epilogue}(A @ B + bias)")
    line("Matrix sizes:", f"M={args.m}, N={args.n}, K={args.k}")
    line("Tile size:", args.tile_size)
    line("Timed launches:", f"warmup={args.warmup}, iterations={args.iterations}")
    print()

    # Key and lookup.
    options = ProgramOptions(arch=arch, std="c++17")
    # As NVIDIA's sample times it: the key is derived before the clock
    # starts; "Cache lookup" is cache.get alone.
    key = make_program_cache_key(code=source, code_type="c++", options=options, target_type="cubin")
    t0 = time.perf_counter()
    data = cache.get(key)
    lookup_ms = (time.perf_counter() - t0) * 1e3

    compile_ms = store_ms = 0.0
    if data is None:
        status = "MISS"
        t0 = time.perf_counter()
        program = Program(source, code_type="c++", options=options)
        compiled = program.compile("cubin")
        compile_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        cache[key] = compiled
        store_ms = (time.perf_counter() - t0) * 1e3
        data = bytes(compiled.code)
    else:
        status = "HIT"

    # Load: ObjectCode from the CUBIN bytes, then the kernel.
    t0 = time.perf_counter()
    module = ObjectCode.from_cubin(data)
    kernel = module.get_kernel(KERNEL_NAME)
    load_ms = (time.perf_counter() - t0) * 1e3

    line("Cache status:", status)
    line("Cache key:", key.hex()[:24] + "...")
    line("Artifact size:", f"{len(data) / 1024:.1f} KiB")
    line("Cache lookup:", f"{lookup_ms:.3f} ms")
    line("Compile time:", "skipped" if status == "HIT" else f"{compile_ms:.3f} ms")
    if status == "MISS":
        line("Cache store:", f"{store_ms:.3f} ms")
    line("Module load:", f"{load_ms:.3f} ms")
    line("Host prep time:", f"{lookup_ms + compile_ms + store_ms + load_ms:.3f} ms")

    # Inputs: seeded normal random numbers (NumPy), copied with CuPy.
    rng = np.random.default_rng(2026)
    a = rng.standard_normal((args.m, args.k), dtype=np.float32)
    b = rng.standard_normal((args.k, args.n), dtype=np.float32)
    bias = rng.standard_normal(args.n, dtype=np.float32)
    cp.cuda.Device(args.device).use()
    d_a = cp.asarray(a)
    d_b = cp.asarray(b)
    d_bias = cp.asarray(bias)
    d_c = cp.empty((args.m, args.n), dtype=cp.float32)
    cp.cuda.Device(args.device).synchronize()

    tile = args.tile_size
    config = LaunchConfig(
        grid=((args.n + tile - 1) // tile, (args.m + tile - 1) // tile, 1), block=(tile, tile, 1)
    )
    kernel_args = (
        d_a.data.ptr,
        d_b.data.ptr,
        d_bias.data.ptr,
        d_c.data.ptr,
        np.int32(args.m),
        np.int32(args.n),
        np.int32(args.k),
    )
    for _ in range(args.warmup):
        launch(stream, config, kernel, *kernel_args)
    timing = EventOptions(timing_enabled=True)
    start = stream.record(options=timing)
    for _ in range(args.iterations):
        launch(stream, config, kernel, *kernel_args)
    end = stream.record(options=timing)
    end.sync()
    kernel_ms = (end - start) / args.iterations
    line("Kernel time:", f"{kernel_ms:.3f} ms")

    # Reference in float64 with NumPy, and allclose.
    c = cp.asnumpy(d_c)
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    if args.epilogue == "relu":
        ref = np.maximum(ref, 0.0)
    max_error = float(np.max(np.abs(c.astype(np.float64) - ref)))
    ok = bool(np.allclose(c, ref, rtol=RTOL, atol=ATOL))
    line("Max error:", f"{max_error:.6e}")
    line("Validation:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
