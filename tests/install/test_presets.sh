#!/usr/bin/env bash
# CMakePresets.json: the four presets the README names (release, debug,
# asan, tsan) are listed for configure, build and test, and each configures
# with what it promises (build type, sanitizer, warnings as errors) - into a
# temporary folder (-B), the library alone, so the test builds nothing.
#   test_presets.sh SOURCE_DIR CUDA_TOOLKIT_ROOT
set -euo pipefail
src=$1 cuda=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test_presets: FAIL: $*" >&2; exit 1; }
cd "$src"
for kind in configure build test; do
  listed=$(cmake --list-presets=$kind | sed -n 's/^ *"\([a-z]*\)".*/\1/p' | sort | tr '\n' ' ')
  [ "$listed" = "asan debug release tsan " ] || fail "$kind presets: '$listed'"
done
check() { # preset variable value
  grep -qx "$2:[A-Z]*=$3" "$work/$1/CMakeCache.txt" || fail "preset $1: $2 is not $3"
}
for p in release debug asan tsan; do
  cmake --preset "$p" -B "$work/$p" -DCUDAToolkit_ROOT="$cuda" -DPROGCACHE_BUILD_TESTS=OFF \
    -DPROGCACHE_BUILD_SAMPLES=OFF -DPROGCACHE_BUILD_EXAMPLES=OFF -DPROGCACHE_BUILD_BENCH=OFF \
    >"$work/$p.log" 2>&1 || { cat "$work/$p.log"; fail "configure preset $p"; }
done
check release CMAKE_BUILD_TYPE Release
check debug CMAKE_BUILD_TYPE Debug
check debug PROGCACHE_WERROR ON
check asan PROGCACHE_SANITIZE address,undefined
check tsan PROGCACHE_SANITIZE thread
echo "test_presets: ok"
