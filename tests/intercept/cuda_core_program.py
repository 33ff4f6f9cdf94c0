"""A cuda.core program, unchanged, for test_intercept_cuda_core: compiles a
template kernel to CUBIN with a name expression (no cache of cuda.core's)
and writes the CUBIN and the lowered name to OUTDIR (argv[1]), and the
process's /proc/self/maps (which libraries it mapped) as OUTDIR/maps."""
import os
import sys

from cuda.core import Program, ProgramOptions

SOURCE = ("template <typename T> __global__ void scale(T *x, T a) {\n"
          "    x[threadIdx.x] *= a;\n}\n")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
prog = Program(SOURCE, "c++", options=ProgramOptions(arch="sm_90", name="cc.cu"))
obj = prog.compile("cubin", name_expressions=("scale<float>",))
with open(os.path.join(out, "cubin"), "wb") as f:
    f.write(bytes(obj.code))
with open(os.path.join(out, "lowered"), "wb") as f:
    f.write(bytes(obj.symbol_mapping["scale<float>"]))
with open("/proc/self/maps", "rb") as f, open(os.path.join(out, "maps"), "wb") as m:
    m.write(f.read())
