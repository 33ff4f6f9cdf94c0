#!/usr/bin/env bash
# One call on the GPU machine for this session's changes (issues 20-24):
# build, the gpu-labelled tests and the sample, then the benchmarks whose
# figures docs/PERFORMANCE.md quotes for them: a whole HIT process against a
# driver-only program (run_hit_vs_driver.sh), the PCH tier's 20 fresh
# processes (bench_pch), the seal's HIT cost (bench_seal, local disk).
#   bench/run_gpu_session.sh [OUT_DIR]
# Everything goes to OUT_DIR (default $OUT, else /tmp/gpu-session).

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail
cd "$(dirname "$0")/.."
O=${1:-${OUT:-/tmp/gpu-session}}
mkdir -p "$O"
B=/tmp/progcache-gpu-build
step() { echo "== $* ($(date -u +%H:%M:%S))"; }
step build
cmake -S . -B "$B" -DPROGCACHE_WERROR=ON -DPROGCACHE_WITH_REDIS=OFF >"$O/build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" >>"$O/build.log" 2>&1 || { tail -40 "$O/build.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step "gpu tests"
ctest --test-dir "$B" -L gpu --output-on-failure >"$O/ctest_gpu.log" 2>&1
grep -E "Test +#|tests passed" "$O/ctest_gpu.log"
step "driver-only and lazy-NVRTC tests"
ctest --test-dir "$B" -R "nvrtc_lazy|driver_only|pch_detach|pch_stamp|pch_unloaded|pch_warm|test_warm$|test_pch$" --output-on-failure \
  >"$O/ctest_more.log" 2>&1
grep -E "Test +#|tests passed" "$O/ctest_more.log"
step "HIT process vs driver-only program, 21 rounds"
JSON="$O/hit_vs_driver.json" bash bench/run_hit_vs_driver.sh "$B" 21 2>&1 | tee "$O/hit_vs_driver.txt" | tail -25
step "bench_pch, 20 variants"
# Everything but the per-variant rows (in pch.txt): medians, totals, the
# statistics and where a fresh process's time goes.
timeout 420 "$B/bin/bench_pch" --variants 20 2>&1 | tee "$O/pch.txt" |
  grep -v -E '^ +[0-9]+ +[0-9]+ +[0-9]+( +[0-9]+)?$'
step "bench_pch, 20 variants, with the column without a warm helper"
timeout 420 "$B/bin/bench_pch" --variants 20 --cold 2>&1 | tee "$O/pch_cold.txt" |
  grep -v -E '^ +[0-9]+ +[0-9]+ +[0-9]+( +[0-9]+)?( +[0-9]+)?$'
step "bench_seal (local disk)"
"$B/bin/bench_seal" --samples 5000 --no-nfs --json "$O/seal.json" 2>&1 | tail -12
step done
