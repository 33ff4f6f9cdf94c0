#!/usr/bin/env bash
# Issue 32's table on a machine whose page cache holds a million entries
# (the GPU machine: 128 GiB of memory, 16 cores), before and after in one
# run: bench_scale of another source tree (BEFORE, e.g. `git archive
# <commit>` unpacked), with its own progcache tool, against this checkout's,
# alternately, at 10 and 100,000 entries in folders of their own and at a
# million in one folder both use (bench_scale writes only the entries
# missing and removes progcache/state, so each run seeds its counters
# again).
#   bench/run_scale_gpu.sh BEFORE_SRC [ROUNDS] [DIR]
# ROUNDS defaults to 5, DIR (needs ~6 GB) to /tmp/pc-scale.

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail
cd "$(dirname "$0")/.."
BEFORE=$(cd "${1:?usage: $0 BEFORE_SRC [ROUNDS] [DIR]}" && pwd)
ROUNDS=${2:-5}
DIR=${3:-/tmp/pc-scale}
build() { # src dir
  cmake -S "$1" -B "$2" -DPROGCACHE_WITH_REDIS=OFF -DPROGCACHE_WITH_CURL=OFF \
    -DPROGCACHE_BUILD_TESTS=OFF >"$2.log" 2>&1 &&
    cmake --build "$2" -j "$(nproc)" --target progcache_tool bench_scale >>"$2.log" 2>&1 ||
    cmake --build "$2" -j "$(nproc)" >>"$2.log" 2>&1 || { tail -30 "$2.log"; exit 1; }
}
build "$BEFORE" /tmp/scale-before
build . /tmp/scale-after
run() { # which sizes dir
  echo "-- $1, $2 entries ($(date -u +%H:%M:%S))"
  "/tmp/scale-$1/bin/bench_scale" --dir "$3" --sizes "$2" --rounds "$ROUNDS" \
    --bin "/tmp/scale-$1/bin/progcache"
}
echo "== bench_scale, before and after alternately ($(date -u +%F), $(nproc) cores)"
for round in 1 2; do
  for w in after before; do
    run "$w" 10,100000 "$DIR/$w-$round"
  done
done
for w in after before after before; do
  run "$w" 1000000 "$DIR/m1"
done
