#!/usr/bin/env bash
# Fuzz the parsers of hostile input with libFuzzer (clang) under ASan+UBSan:
# the artifact validators and the tar reader of `progcache import`.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 600: ten minutes each)
# New interesting inputs are merged back into tests/fuzz/corpus/<target>,
# reduced to a small set that covers the same edges; every normal test run
# replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
command -v clang >/dev/null || { echo "fuzz: needs clang (apt-get install clang)" >&2; exit 1; }
dir=build-fuzz
CC=clang cmake -S . -B "$dir" -DPROGCACHE_FUZZ=ON -DPROGCACHE_SANITIZE=address,undefined \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROGCACHE_BUILD_BENCH=OFF -DPROGCACHE_BUILD_SAMPLES=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target fuzz_validate fuzz_tar >/dev/null
for t in validate tar; do
  work=$(mktemp -d)
  echo "== fuzz_$t for ${secs}s"
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=65536 -timeout=10 \
    -print_final_stats=1 "$work" "tests/fuzz/corpus/$t"
  # Keep the committed corpus small: a set of inputs that covers every edge
  # (not every hit count) of the old corpus and the new finds.
  small=$(mktemp -d)
  "$dir/tests/fuzz/fuzz_$t" -use_counters=0 -set_cover_merge=1 "$small" \
    "tests/fuzz/corpus/$t" "$work" >/dev/null 2>&1
  rm -rf "tests/fuzz/corpus/$t" && mv "$small" "tests/fuzz/corpus/$t" && chmod 755 "tests/fuzz/corpus/$t"
  rm -rf "$work"
done
