#!/usr/bin/env bash
# A whole cache-HIT process of the persistentProgramCache sample against a
# bare program doing the same work with the CUDA driver alone
# (bench/bench_driver_only.c: cuInit, context, read the entry, load it,
# launch once, check): issue 23's bar is 1.03x the wall time and 1.05x the
# peak RSS. Needs a GPU.
#
#   bench/run_hit_vs_driver.sh BUILD_DIR [ROUNDS]      (default 21 rounds)
#   (JSON=FILE: the medians and ratios also as JSON, as the other benches)
#
# One cache, filled by one MISS run of the sample at M=N=K=64; then ROUNDS
# rounds, each a fresh process of each program, the order alternating from
# round to round (ABBA), after one untimed run of each (the page cache).
# Wall time is measured around fork/exec/wait, peak RSS is the child's own
# (wait4's ru_maxrss; Linux counts the forking runner's pages in a child
# until it execs, so about 15 MiB is a floor under both, far below either
# program's). The sample runs with one launch (--warmup 0
# --iterations 1), as the bare program does.

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -euo pipefail

BUILD=${1:?usage: $0 BUILD_DIR [ROUNDS]}
ROUNDS=${2:-21}
BIN=$(cd "$BUILD" && pwd)/bin
SAMPLE=$BIN/persistentProgramCache
BARE=$BIN/bench_driver_only
TOOL=$BIN/progcache
for f in "$SAMPLE" "$BARE" "$TOOL"; do
  [ -x "$f" ] || { echo "$0: $f is not built (cmake --build $BUILD)" >&2; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hit-vs-driver.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
CACHE=$WORK/cache
SIZES=(--m 64 --n 64 --k 64)
# The sample's own defaults otherwise (tile 16, relu); no remote tier, no
# settings from the caller's environment.
unset PROGCACHE_REMOTE PROGCACHE_DIR PROGCACHE_NVRTC_VERSION PROGCACHE_NVRTC_LIBRARY

echo "== machine"
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
echo "cpus: $(nproc)"

# The cache flow without a GPU first (--arch): the entry the bare program
# reads exists and the sample's second run is a HIT, on any machine.
"$SAMPLE" "${SIZES[@]}" --arch sm_90 --cache-dir "$WORK/nogpu" >/dev/null
"$SAMPLE" "${SIZES[@]}" --arch sm_90 --cache-dir "$WORK/nogpu" | grep -q 'Cache status: *HIT' \
  || { echo "$0: the sample's second run was not a HIT" >&2; exit 1; }

if ! out=$("$SAMPLE" "${SIZES[@]}" --warmup 0 --iterations 1 --cache-dir "$CACHE" 2>&1); then
  echo "$out" | tail -3 >&2
  echo "$0: no GPU found (the sample cannot open a CUDA device): this comparison needs one;" \
       "run it on the GPU machine. The cache flow was checked without a GPU (--arch sm_90)." >&2
  exit 1
fi
key=$("$TOOL" ls -d "$CACHE" | awk '$5 == "CUBIN" { print $1; exit }')
[ -n "$key" ] || { echo "$0: no CUBIN entry in $CACHE after the MISS run" >&2; exit 1; }
ENTRY=$CACHE/entries/${key:0:2}/${key:2}
[ -f "$ENTRY" ] || { echo "$0: $ENTRY is missing" >&2; exit 1; }
"$BARE" "$ENTRY" 64 64 64 16 || { echo "$0: the bare driver program failed" >&2; exit 1; }

python3 - "$SAMPLE" "$BARE" "$CACHE" "$ENTRY" "$ROUNDS" "${JSON:-}" <<'PY'
import datetime, json, os, socket, statistics, subprocess, sys, time

sample, bare, cache, entry, rounds, json_path = sys.argv[1:]
rounds = int(rounds)
cmds = {
    "hit": [sample, "--m", "64", "--n", "64", "--k", "64", "--warmup", "0", "--iterations", "1",
            "--cache-dir", cache],
    "driver": [bare, entry, "64", "64", "64", "16"],
}

def once(name):
    t = time.perf_counter()
    p = subprocess.Popen(cmds[name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{name} run failed (exit {p.returncode})")
    if name == "hit" and not any(l.split() == ["Cache", "status:", "HIT"] for l in out.splitlines()):
        sys.exit("the sample's run was not a HIT:\n" + out)
    if name == "driver" and "PASSED" not in out:
        sys.exit("the bare program's check failed:\n" + out)
    return wall * 1e3, ru.ru_maxrss / 1024.0  # ms, MiB

once("hit"); once("driver")  # untimed: the page cache
runs = {"hit": [], "driver": []}
for r in range(rounds):
    order = ("hit", "driver") if r % 2 == 0 else ("driver", "hit")
    for name in order:
        runs[name].append(once(name))

def med(name, i):
    return statistics.median(x[i] for x in runs[name])

targets = {"wall": 1.03, "rss": 1.05}
rows = [("whole process, wall", "ms", 0, "wall"), ("peak RSS", "MiB", 1, "rss")]
print(f"== {rounds} rounds, fresh processes, interleaved (medians)")
print("| metric | HIT process (sample) | driver only (bare) | ratio | target | |")
print("|---|---|---|---|---|---|")
metrics = []
ok_all = True
for label, unit, i, t in rows:
    h, d = med("hit", i), med("driver", i)
    ratio = h / d
    ok = ratio <= targets[t]
    ok_all &= ok
    print(f"| {label} | {h:.1f} {unit} | {d:.1f} {unit} | {ratio:.3f}x | {targets[t]:.2f}x | "
          f"{'met' if ok else 'NOT met'} |")
    metrics.append({"metric": label, "unit": unit, "hit": round(h, 2), "driver": round(d, 2),
                    "ratio": round(ratio, 4), "target": targets[t], "met": ok})
print("both targets met" if ok_all else "a target is not met")
if json_path:
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        gpu = "unknown (no nvidia-smi)"
    doc = {"schema": 1, "bench": "hit_vs_driver",
           "date": datetime.date.today().isoformat(),
           "time": datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%SZ"),
           "host": {"name": socket.gethostname(), "cpus": os.cpu_count()},
           "machine": gpu,
           "command": f"bench/run_hit_vs_driver.sh BUILD_DIR {rounds}",
           "results": {"cases": [{"case": "HIT process vs driver only, M=N=K=64, tile 16, relu",
                                  "runs": rounds, "metrics": metrics}]}}
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("JSON:", json_path)
PY
