#!/usr/bin/env bash
# The matmul kernels of the persistentProgramCache sample against cuBLAS
# (docs/PERFORMANCE.md, "Matmul kernels: tiled, fast, autotuned, cuBLAS").
# Needs a GPU.
#
#   bench/run_matmul_bench.sh BUILD_DIR [SIZES]      (SIZES: 512,1024,2048,4096,8192)
#
# 1. bench_matmul on a fresh cache: TFLOP/s of tiled 16 and 32, fast
#    (default shape), autotuned and cuBLAS (+ bias/ReLU kernel) per size,
#    checks against cuBLAS, compile times cold/warm, tuning cold/warm.
# 2. The sample as a user runs it at 4096: --kernel fast (MISS, then HIT),
#    and --autotune cold then warm, each validated on the host.

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail

BUILD=${1:?usage: $0 BUILD_DIR [SIZES]}
SIZES=${2:-512,1024,2048,4096,8192}
BIN=$(cd "$BUILD" && pwd)/bin
WORK=$(mktemp -d "${TMPDIR:-/tmp}/matmul-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== machine"
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
    --format=csv,noheader 2>/dev/null || true
nproc

echo "== bench_matmul --sizes $SIZES"
"$BIN/bench_matmul" --sizes "$SIZES" --cache-dir "$WORK/bench-cache" ${JSON:+--json "$JSON"}
status=$?

echo "== the sample at 4096, --kernel fast (MISS, then HIT)"
for pass in 1 2; do
    "$BIN/persistentProgramCache" --cache-dir "$WORK/sample-cache" --kernel fast \
        --m 4096 --n 4096 --k 4096 || status=1
done
echo "== the sample at 4096, --autotune (cold, then warm)"
for pass in 1 2; do
    "$BIN/persistentProgramCache" --cache-dir "$WORK/sample-cache" --autotune \
        --m 4096 --n 4096 --k 4096 || status=1
done
exit $status
