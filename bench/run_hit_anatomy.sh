#!/usr/bin/env bash
# The first cache hit of a fresh process, taken apart (needs a GPU):
# bench_hit_anatomy step by step on the sample's own kernel, once as is and
# once with a warm heap (a diagnostic: it tells the driver's heap-growth
# page faults from its other first-call costs), then the HIT lines of the C
# sample (and of any other builds of it given, for A/B runs) next to the
# Python sample's, runs interleaved.
#   bench/run_hit_anatomy.sh BUILD_DIR [RUNS [OTHER_SAMPLE_BINARY...]]
#   (SKIP_ANATOMY=1: only the sample runs; JSON=FILE: the step table also
#   as JSON, for scripts/plot_perf.py)

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -uo pipefail
B=$(cd "${1:?usage: $0 BUILD_DIR [RUNS [OTHER_SAMPLE_BINARY...]]}" && pwd)
RUNS=${2:-15}
shift $(( $# < 2 ? $# : 2 ))
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d /tmp/hit-anatomy.XXXXXX)
trap 'rm -rf "$D"' EXIT
"$B/bin/persistentProgramCache" --print-source >"$D/sample.cu"
if [ -z "${SKIP_ANATOMY:-}" ]; then
  echo "== bench_hit_anatomy, the sample's kernel"
  "$B/bin/bench_hit_anatomy" --runs "$RUNS" --source "$D/sample.cu" --kernel matmul_epilogue \
    ${JSON:+--json "$JSON"}
  echo "== the same with a warm heap (BENCH_HEAP_WARM=1, diagnostic only)"
  BENCH_HEAP_WARM=1 "$B/bin/bench_hit_anatomy" --runs "$RUNS" --source "$D/sample.cu" \
    --kernel matmul_epilogue
fi

"$B/bin/persistentProgramCache" --cache-dir "$D/cache" >/dev/null
progs=("$B/bin/persistentProgramCache" "$@" "python3 $HERE/persistent_program_cache_cudacore.py")
for i in $(seq "$RUNS"); do
  for j in "${!progs[@]}"; do ${progs[$j]} --cache-dir "$D/cache" >>"$D/out.$j" 2>&1; done
done
echo "== HIT, medians of $RUNS fresh processes per program, interleaved"
for j in "${!progs[@]}"; do
  awk -v label="${progs[$j]}" '/^Cache lookup:/ {l[n]=$3} /^Module load:/ {m[n]=$3}
    /^Cache status:/ && $3 != "HIT" {bad++} /^Host prep time:/ {h[n++]=$4}
    function med(a,  i,j,t,k,s) { k=0; for (i in a) s[k++]=a[i];
      for (i=0;i<k;i++) for (j=i+1;j<k;j++) if (s[j]<s[i]) {t=s[i];s[i]=s[j];s[j]=t}
      return s[int(k/2)] }
    END { printf "lookup %.3f  load %.3f  host prep %.3f ms  (n=%d, not HIT %d)  %s\n",
          med(l), med(m), med(h), n, bad, label }' "$D/out.$j"
done
