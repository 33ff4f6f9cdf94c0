#!/usr/bin/env bash
# Build progcache and run the persistentProgramCache sample twice on one
# cache directory: the first run compiles (MISS), the second loads (HIT).
#   scripts/run.sh [sample options...]
# Builds in build-run/ (BUILD_DIR), apart from scripts/test.sh's build/, so
# neither reconfigures the other's; the binaries land in build-run/bin/,
# the sample's cache in build-run/sample-cache/, the build's output in
# build-run/build.log (its end is shown if the build fails).
# Without a CUDA device the sample runs the whole cache flow for sm_90
# (key, lookup, compile, store, MISS then HIT) and says launch and
# validation were skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh

BUILD_DIR=${BUILD_DIR:-build-run}
mkdir -p "$BUILD_DIR"
log=$BUILD_DIR/build.log
echo "progcache: building the library, the tool and the sample in $BUILD_DIR/ (log: $log)"
if ! { cmake -S . -B "$BUILD_DIR" -DCUDAToolkit_ROOT="$CUDAToolkit_ROOT" &&
       cmake --build "$BUILD_DIR" -j "$(nproc)" --target persistentProgramCache progcache_tool; } \
     >"$log" 2>&1; then
  tail -40 "$log" >&2
  echo "progcache: the build failed; the whole output is in $log" >&2
  exit 1
fi
echo "progcache: built $BUILD_DIR/bin/persistentProgramCache and $BUILD_DIR/bin/progcache"

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
