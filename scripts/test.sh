#!/usr/bin/env bash
# Build progcache and run its whole test suite (what CI runs).
#   scripts/test.sh            build in build/ and run ctest
# Environment: BUILD_DIR (default build), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DPROGCACHE_WERROR=ON -DCUDAToolkit_ROOT="$CUDAToolkit_ROOT"
cmake --build "$BUILD_DIR" -j "$JOBS"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
