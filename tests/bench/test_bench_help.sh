#!/usr/bin/env bash
# Every program in bench/ answers --help at once: its usage on standard
# output and exit status 0, nothing run (bench_pch --help ran the whole
# benchmark, over a minute). The C benchmarks' binaries are the arguments;
# the Python and shell programs are found in SOURCE_DIR/bench. Each gets
# 20 s, far more than printing a usage takes, so a benchmark that starts
# its work instead fails rather than hangs the suite.
#   test_bench_help.sh SOURCE_DIR PYTHON BENCH_BINARY|excluded:NAME...
set -uo pipefail
src=$1 python=$2
shift 2
failed=0 n=0
try() { # name command...
  local name=$1 out rc
  shift
  out=$(timeout 20 "$@" --help 2>/dev/null)
  rc=$?
  n=$((n + 1))
  if [ $rc != 0 ] || [ -z "$out" ]; then
    echo "FAIL: $name --help: exit $rc, $(printf %s "$out" | wc -c) bytes of usage"
    failed=1
  elif ! printf %s "$out" | head -1 | grep -qiE "usage|^[A-Z]"; then
    echo "FAIL: $name --help does not start with its usage: $(printf %s "$out" | head -1)"
    failed=1
  fi
}
for bin in "$@"; do
  name=$(basename "$bin")
  if [[ $bin == excluded:* ]]; then
    echo "note: ${bin#excluded:} is not built in this configuration; not run"
    continue
  fi
  try "$name" "$bin"
  timeout 20 "$bin" --help 2>/dev/null | head -1 | grep -q "^usage: $name" \
    || { echo "FAIL: $name --help: no 'usage: $name' line"; failed=1; }
done
for py in "$src"/bench/*.py; do try "$(basename "$py")" "$python" "$py"; done
for sh in "$src"/bench/*.sh; do try "$(basename "$sh")" bash "$sh"; done
# Every bench_*.c was given: a benchmark added later is covered.
for c in "$src"/bench/bench_*.c; do
  name=$(basename "$c" .c)
  printf '%s\n' "$@" | grep -qE "(/|^excluded:)$name\$" \
    || { echo "FAIL: $name was not given to the test"; failed=1; }
done
[ $failed = 0 ] && echo "test_bench_help: ok ($n programs)"
exit $failed
