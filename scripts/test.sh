#!/usr/bin/env bash
# Build progcache and run its whole test suite (this is what CI runs):
#   1. a normal build (warnings are errors) and every test;
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the same under ThreadSanitizer;
#   4. valgrind memcheck (leaks are errors) over the progcache tool.
#   scripts/test.sh            all four
#   scripts/test.sh --quick    the first only
# Environment: BUILD_DIR (default build; the sanitizer builds go to
# build-asan and build-tsan), JOBS (default nproc). scripts/run.sh builds in
# build-run/, so the two never reconfigure each other's folder. Each
# build's output is in <dir>/build.log (its end is shown if it fails).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
quick=0
[ "${1:-}" = "--quick" ] && quick=1

build() { # dir [cmake args...]: configure and build, output in dir/build.log
  local dir=$1; shift
  mkdir -p "$dir"
  echo "== progcache: build in $dir $* (log: $dir/build.log)"
  if ! { cmake -S . -B "$dir" -DPROGCACHE_WERROR=ON -DCUDAToolkit_ROOT="$CUDAToolkit_ROOT" "$@" &&
         cmake --build "$dir" -j "$JOBS"; } >"$dir/build.log" 2>&1; then
    tail -40 "$dir/build.log" >&2
    echo "progcache: the build failed; the whole output is in $dir/build.log" >&2
    exit 1
  fi
}
run_suite() { # dir [cmake args...]
  local dir=$1; shift
  build "$dir" "$@"
  # The S3 server of test_s3_tier (a venv under the build folder; skipped without it).
  scripts/moto-venv.sh "$dir" >/dev/null 2>&1 ||
    echo "progcache: moto[server] could not be installed; test_s3_tier will be skipped" >&2
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS"
}

run_suite "$BUILD_DIR"
[ $quick = 1 ] && exit 0

# Sanitizer builds run every test but the slow differential one, which
# exercises Python and the normal build's tool already.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
CTEST_ARGS=(-LE "python|gpu")
sanitized() { # dir sanitizers
  local dir=$1 san=$2
  echo "== progcache: $san build"
  build "$dir" -DCMAKE_BUILD_TYPE=Debug -DPROGCACHE_SANITIZE="$san" -DPROGCACHE_BUILD_BENCH=OFF
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "${CTEST_ARGS[@]}"
}
sanitized "$BUILD_DIR-asan" address,undefined
sanitized "$BUILD_DIR-tsan" thread

echo "== progcache: valgrind memcheck over the progcache tool"
bash scripts/valgrind-tools.sh "$BUILD_DIR"
