"""A CuPy program, unchanged but for one patch, for test_intercept_cupy:
compiles a kernel with cupy.cuda.compiler.compile_using_nvrtc and writes
the CUBIN, and the process's /proc/self/maps, to OUTDIR (argv[1]).

argv[2] is "memory" (cache_in_memory=True: CuPy names the program nothing,
NVRTC's default_program) or "temp" (CuPy's default: the source written to
a fresh temporary directory, whose random path is the program's name).

The patch: CuPy asks the current device for the architecture before it
compiles (compiler._get_arch_for_options_for_nvrtc), which fails without a
GPU; here it answers sm_90 as it would on an H100/H200."""
import os
import sys

from cupy.cuda import compiler

compiler._get_arch_for_options_for_nvrtc = lambda arch=None: ("-arch=sm_90", "cubin")
SOURCE = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n'
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cubin = compiler.compile_using_nvrtc(SOURCE, cache_in_memory=sys.argv[2] == "memory")
if isinstance(cubin, tuple):  # CuPy 14: (code, name mapping)
    cubin = cubin[0]
with open(os.path.join(out, "cubin"), "wb") as f:
    f.write(bytes(cubin))
with open("/proc/self/maps", "rb") as f, open(os.path.join(out, "maps"), "wb") as m:
    m.write(f.read())
