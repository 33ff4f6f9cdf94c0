#!/usr/bin/env bash
# Build progcache and run the persistentProgramCache sample twice on one
# cache directory: the first run compiles (MISS), the second loads (HIT).
#   scripts/run.sh [sample options...]
# Without a CUDA device the sample runs the whole cache flow for sm_90
# (key, lookup, compile, store, MISS then HIT) and says launch and
# validation were skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCUDAToolkit_ROOT="$CUDAToolkit_ROOT" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target persistentProgramCache progcache_tool >/dev/null

sample=("$BUILD_DIR/bin/persistentProgramCache")
args=("$@")
if ! "${sample[@]}" --help >/dev/null 2>&1; then
  echo "progcache: the sample did not build" >&2; exit 1
fi
# The first run empties the cache (--clear-cache): a directory of its own
# in the build tree, never the shared default ($PROGCACHE_DIR or cuda.core's,
# which the sample uses without --cache-dir) unless asked for by name.
if ! printf '%s\n' "${args[@]}" | grep -q -- '--cache-dir'; then
  args+=(--cache-dir "$BUILD_DIR/sample-cache")
fi
if [ -z "$(ls /dev/nvidia0 2>/dev/null)" ] && ! printf '%s\n' "${args[@]}" | grep -q -- '--arch'; then
  echo "(no CUDA device here: running the cache flow for --arch sm_90)"
  args+=(--arch sm_90)
fi
"${sample[@]}" --clear-cache "${args[@]}"
echo
"${sample[@]}" "${args[@]}"
