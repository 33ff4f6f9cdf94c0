#!/usr/bin/env bash
# Before/after on the GPU machine, in one run: another source tree (BEFORE,
# e.g. `git archive <commit>` unpacked) against this checkout (AFTER).
#  - the file store's get latency (bench_store_file), the two builds run
#    alternately, twice each;
#  - the sample's HIT in fresh processes (host prep = lookup + load),
#    both builds and cuda.core's sample interleaved (run_hit_anatomy.sh).
#   bench/run_ab_gpu.sh BEFORE_SRC [RUNS]

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail
cd "$(dirname "$0")/.."
BEFORE=$(cd "${1:?usage: $0 BEFORE_SRC [RUNS]}" && pwd)
RUNS=${2:-15}
build() { # src dir
  cmake -S "$1" -B "$2" -DPROGCACHE_WITH_REDIS=OFF -DPROGCACHE_BUILD_TESTS=OFF >"$2.log" 2>&1 &&
    cmake --build "$2" -j "$(nproc)" --target persistentProgramCache bench_store_file \
      >>"$2.log" 2>&1 || { tail -30 "$2.log"; exit 1; }
}
build "$BEFORE" /tmp/ab-before
build . /tmp/ab-after
echo "== file store get (hit, miss) and put, before and after alternately ($(date -u +%F))"
for round in 1 2; do
  for w in before after; do
    echo "-- $w, round $round"
    /tmp/ab-$w/bin/bench_store_file --sizes 10,1000,100000 --samples 20000 --cap-puts 2000
  done
done
echo "== the sample's HIT: after, before, cuda.core (interleaved)"
SKIP_ANATOMY=1 bash bench/run_hit_anatomy.sh /tmp/ab-after "$RUNS" /tmp/ab-before/bin/persistentProgramCache
