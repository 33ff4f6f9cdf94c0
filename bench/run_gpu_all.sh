#!/usr/bin/env bash
# Everything that needs the GPU machine, in one go: build, the gpu tests and
# the whole suite there, the key differential test against the cuda.core
# installed there, and the benchmarks whose figures docs/PERFORMANCE.md
# quotes (C and cuda.core side by side in the same run).
#   bench/run_gpu_all.sh [OUT_DIR]     (SKIP_STORE=1: leave out the store and
#                                      single-flight benches)
# Each benchmark also writes its figures as JSON into OUT_DIR/json/, and the
# figures of docs/PERFORMANCE.md are drawn from them into OUT_DIR/plots/
# (scripts/plot_perf.py). To publish a run: copy OUT_DIR/json/*.json over
# bench/results/current/ and run python3 scripts/plot_perf.py.

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/gpu-out}}
mkdir -p "$OUT" "$OUT/json"
J=$OUT/json
B=/tmp/progcache-gpu-build
step() { echo "== $* ($(date -u +%H:%M:%S))"; }

# The cuda.core reference data, when carried along as .ref (it lives
# beside the checkout, which does not travel).
ref=()
[ -f .ref/cuda-core-key-vectors.jsonl ] && ref=(-DPROGCACHE_REFERENCE_DIR="$PWD/.ref")

step build
cmake -S . -B "$B" -DPROGCACHE_WERROR=ON -DPROGCACHE_WITH_REDIS=OFF "${ref[@]}" >"$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j "$(nproc)" >>"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }

step tests
ctest --test-dir "$B" -j "$(nproc)" --output-on-failure -LE python >"$OUT/ctest.log" 2>&1
grep -E "tests passed|Failed|Skipped|\*\*\*" "$OUT/ctest.log" | tail -12

step "key differential test against this machine's cuda.core"
python3 tests/key/test_cuda_core_diff.py --progcache-bin "$B/bin/progcache" --no-venv \
  --store-helper "$B/tests/key/key_store_xread" >"$OUT/diff.log" 2>&1
tail -4 "$OUT/diff.log"

step "first load (driver) and first hit (store) of a fresh process"
"$B/bin/bench_first_load" --runs 15 | tee "$OUT/first_load.md"
"$B/bin/bench_first_hit" --runs 21 | tee "$OUT/first_hit.md"

if [ -z "${SKIP_STORE:-}" ]; then
step "single-flight, 16 processes"
"$B/bin/bench_single_flight" --procs 16 --rounds 5 --json "$J/single_flight.json" |
  tee "$OUT/single_flight.md"

step "file store: progcache"
"$B/bin/bench_store_file" --samples 20000 --cap-puts 20000 --json "$J/store_file.json" |
  tee "$OUT/store_c.md"
step "file store: cuda.core"
python3 bench/bench_cuda_core_store.py --samples 20000 --cap-sizes 1000,20000 --cap-seconds 8 \
  --json "$J/cuda_core_store.json" | tee "$OUT/store_py.md"
fi

step "the first hit of a fresh process, taken apart"
JSON="$J/hit_anatomy.json" bash bench/run_hit_anatomy.sh "$B" 15 | tee "$OUT/hit_anatomy.md"

step "persistentProgramCache: C vs cuda.core"
JSON="$J/sample_compare.json" bash bench/run_sample_compare.sh "$B" "${SAMPLE_RUNS:-7}" \
  >"$OUT/sample_compare.md" 2>&1
tail -60 "$OUT/sample_compare.md"

step "matmul kernels"
JSON="$J/matmul.json" bash bench/run_matmul_bench.sh "$B" >"$OUT/matmul.md" 2>&1
tail -30 "$OUT/matmul.md"

step "headers on disk: what they add to a hit"
"$B/bin/bench_headers" --json "$J/headers.json" | tee "$OUT/headers.md"
"$B/bin/bench_headers" --memory --json "$J/headers_memory.json" | tee -a "$OUT/headers.md"

step "fast misses: the PCH tier (NVRTC only, 20 variants; a few minutes)"
"$B/bin/bench_pch" | tee "$OUT/pch.md"

step "the figures, drawn from this run"
python3 scripts/plot_perf.py "$J" "$OUT/plots"
step done
