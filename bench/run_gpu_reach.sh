#!/usr/bin/env bash
# One call on the GPU machine for the "reach" issues (30 `progcache exec`,
# 31 the Python package, 33's hot-path check): build, the gpu-labelled and
# interceptor tests, a whole HIT process of the sample against a bare
# driver-only program, bench_exec with NVRTC's own cache on (the driver is
# there) and off (CUDA_CACHE_DISABLE=1), cuda.core, CuPy and PyTorch's
# jiterator under `progcache exec` (two fresh processes each: the second
# must be served by the cache), and NVIDIA's Python sample
# persistentProgramCache.py run as published and with its one import line
# changed to progcache.ProgramCache (MISS then HIT, validation PASSED, and
# each reading the other's cache directory).
#   bench/run_gpu_reach.sh [OUT_DIR] [SAMPLE_DIR]
# OUT_DIR defaults to $OUT, else /tmp/gpu-reach. SAMPLE_DIR holds NVIDIA's
# file as persistentProgramCache.py and the changed copy as
# persistentProgramCache_progcache.py (not in this repository: NVIDIA's
# code; the lead carries them); without it that step is skipped and said.

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail
cd "$(dirname "$0")/.."
O=${1:-${OUT:-/tmp/gpu-reach}}
S=${2:-}
mkdir -p "$O"
B=/tmp/progcache-gpu-build
step() { echo "== $* ($(date -u +%H:%M:%S))"; }
# The cache of one step is never another's, nor the user's.
fresh() { rm -rf "/tmp/pc-$1" && mkdir -p "/tmp/pc-$1" && echo "/tmp/pc-$1"; }

step build
# Warnings are kept (build.log) but not errors: CI, not this call, holds
# the line on them.
cmake -S . -B "$B" -DPROGCACHE_WERROR=OFF -DPROGCACHE_WITH_REDIS=OFF -DPROGCACHE_WITH_CURL=OFF \
  >"$O/build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" >>"$O/build.log" 2>&1 || { tail -40 "$O/build.log"; exit 1; }
grep -A3 "warning:" "$O/build.log" | head -30
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PC=$B/bin/progcache

step "gpu and interceptor tests"
timeout 300 ctest --test-dir "$B" -L gpu -R "." --output-on-failure >"$O/ctest_gpu.log" 2>&1
grep -E "Test +#|tests passed" "$O/ctest_gpu.log"
timeout 200 ctest --test-dir "$B" -R "intercept|bundle" --output-on-failure \
  >"$O/ctest_intercept.log" 2>&1
grep -E "Test +#|tests passed" "$O/ctest_intercept.log"

step "HIT process vs driver-only program, 11 rounds"
JSON="$O/hit_vs_driver.json" timeout 200 bash bench/run_hit_vs_driver.sh "$B" 11 2>&1 |
  tail -14

step "bench_exec, NVRTC's own cache on (driver present)"
D=$(fresh exec-on)
PROGCACHE_DIR=$D timeout 240 "$B/bin/bench_exec" --client "$B/tests/intercept/nvrtc_client_runpath" \
  --progcache "$PC" --runs 9 --heavy-runs 5 --json "$O/exec_cache_on.json" 2>&1 | tail -14
step "bench_exec, NVRTC's own cache off (CUDA_CACHE_DISABLE=1)"
D=$(fresh exec-off)
CUDA_CACHE_DISABLE=1 PROGCACHE_DIR=$D timeout 240 "$B/bin/bench_exec" \
  --client "$B/tests/intercept/nvrtc_client_runpath" --progcache "$PC" --runs 9 --heavy-runs 5 \
  --json "$O/exec_cache_off.json" 2>&1 | tail -14

# Two fresh processes under `progcache exec`: the first compiles, the second
# must be served (intercept_hits goes up, no new intercept_misses). The
# interceptor's info log (route, each compile) is kept in OUT_DIR.
twice() {
  local name=$1 dir
  shift
  dir=$(fresh "$name")
  for run in 1 2; do
    local t0=$(date +%s%N)
    PROGCACHE_LOG=info timeout 120 "$PC" exec -d "$dir" -- "$@" >"$O/$name.$run.out" 2>&1
    local rc=$? t1=$(date +%s%N)
    echo "$name run $run: exit $rc, $(((t1 - t0) / 1000000)) ms, $(tail -1 "$O/$name.$run.out")"
  done
  "$PC" stats -d "$dir" --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
s = s.get("counters", s)
print("  ", {k: v for k, v in s.items() if k.startswith("intercept") and v})'
}
step "cuda.core under progcache exec"
twice cudacore python3 -c '
from cuda.core import Device, Program, ProgramOptions
d = Device(); d.set_current()
src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }"
code = Program(src, "c++", ProgramOptions(arch=f"sm_{d.arch}")).compile("cubin")
k = code.get_kernel("k")
print("cuda.core ok", len(bytes(code.code)), "bytes")'
step "CuPy under progcache exec"
twice cupy python3 -c '
import cupy as cp
k = cp.RawKernel(r"""extern "C" __global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }""",
                 "twice", backend="nvrtc")
x = cp.arange(32, dtype=cp.float32); k((1,), (32,), (x,))
assert float(x[3]) == 6.0
print("cupy ok")'
step "PyTorch jiterator under progcache exec"
twice torch python3 -c '
import torch
f = torch.cuda.jiterator._create_jit_fn("template <typename T> T pc_fma(T x, T y) { return x * y + x; }")
x = torch.arange(8, device="cuda", dtype=torch.float32)
assert torch.equal(f(x, x), x * x + x)
print("torch ok")'

step "the Python package (progcache) for this python"
python3 -m pip install -q --no-build-isolation --no-deps --no-compile --target /tmp/pcsite \
  ./python >"$O/pip.log" 2>&1 || { tail -20 "$O/pip.log"; }
if [ -n "$S" ] && [ -f "$S/persistentProgramCache.py" ]; then
  step "NVIDIA's persistentProgramCache.py, as published and with one line changed"
  diff "$S/persistentProgramCache.py" "$S/persistentProgramCache_progcache.py"
  A=$(fresh nv-filestream)
  P=$(fresh nv-progcache)
  for v in "persistentProgramCache.py $A" "persistentProgramCache_progcache.py $P" \
    "persistentProgramCache.py $A" "persistentProgramCache_progcache.py $P" \
    "persistentProgramCache_progcache.py $A" "persistentProgramCache.py $P"; do
    set -- $v
    echo "-- $1 --cache-dir $2"
    PYTHONPATH=/tmp/pcsite timeout 120 python3 "$S/$1" --cache-dir "$2" 2>&1 |
      grep -E "Cache status|Host prep|Compile time|Validation|Error|rror"
  done
  "$PC" stats -d "$P" 2>&1 | head -8
else
  echo "NVIDIA's sample not given (SAMPLE_DIR): skipped"
fi
step done
