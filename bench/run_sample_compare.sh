#!/usr/bin/env bash
# Side by side: the C persistentProgramCache sample (progcache) and the same
# flow in Python on cuda.core 1.2 + CuPy + NumPy
# (bench/persistent_program_cache_cudacore.py). Needs a GPU and cuda.core.
#
#   bench/run_sample_compare.sh BUILD_DIR [RUNS]
#   (JSON=FILE: the timing tables also as JSON, for scripts/plot_perf.py)
#
# 1. Interop: the key of the C sample's --print-source output from cuda.core's
#    make_program_cache_key equals progcache's (`progcache key`) and the
#    sample's printed key; an entry cuda.core wrote is a HIT for the C
#    sample; an entry the C sample wrote is returned byte-identical by
#    cuda.core's FileStreamProgramCache.
# 2. Timings: RUNS (default 7) runs of each program per case, interleaved,
#    reporting medians of host prep (HIT and MISS, as each program prints
#    it), whole-process wall time and peak RSS (/usr/bin/time -v when
#    present, else the child's rusage from wait4), as a markdown table.
# 3. Steady state: the hit path repeated in one process (key, lookup, load,
#    kernel), C through progcache_compile_or_load, Python through
#    make_program_cache_key + FileStreamProgramCache.get +
#    ObjectCode.from_cubin + get_kernel: what a long-running program pays
#    per program after its first.

# --help: the comment above, at once.
case ${1:-} in
-h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
set -euo pipefail

BUILD=${1:?usage: $0 BUILD_DIR [RUNS]}
RUNS=${2:-7}
HERE=$(cd "$(dirname "$0")" && pwd)
C_SAMPLE=$(cd "$BUILD" && pwd)/bin/persistentProgramCache
TOOL=$(cd "$BUILD" && pwd)/bin/progcache
PY_SAMPLE=$HERE/persistent_program_cache_cudacore.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sample-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== machine"
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
nproc
python3 -c 'import cuda.core, cupy, numpy; print("cuda.core", cuda.core.__version__, "cupy", cupy.__version__, "numpy", numpy.__version__)'

echo "== interop"
"$C_SAMPLE" --print-source > "$WORK/source.cu"
python3 - "$WORK/source.cu" "$TOOL" "$C_SAMPLE" "$PY_SAMPLE" "$WORK" <<'PY'
import hashlib, os, subprocess, sys
from cuda.core import Device, ProgramOptions
from cuda.core.utils import FileStreamProgramCache, make_program_cache_key

source_path, tool, c_sample, py_sample, work = sys.argv[1:]
source = open(source_path, encoding="utf-8").read()
dev = Device(0)
dev.set_current()
cc = dev.compute_capability
arch = f"sm_{cc.major}{cc.minor}"
options = ProgramOptions(arch=arch, std="c++17")
argv = [o.decode() if isinstance(o, bytes) else o for o in options.as_bytes("nvrtc", "cubin")]
key = make_program_cache_key(code=source, code_type="c++", options=options, target_type="cubin")
tool_key = subprocess.run([tool, "key", source_path, "--", *argv], check=True,
                          capture_output=True, text=True).stdout.split()[0]

def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    fields = {}
    for ln in r.stdout.splitlines():
        if len(ln) > 20 and ln[19] == " " and ":" in ln[:20]:
            fields[ln[:20].strip()] = ln[20:]
    return r.returncode, fields, r

def entry(root, k):
    h = hashlib.sha256(k).hexdigest()
    return os.path.join(root, "entries", h[:2], h[2:])

ok = True
def check(what, cond):
    global ok
    print(("PASS  " if cond else "FAIL  ") + what)
    ok = ok and cond

print("nvrtc argv from cuda.core:", argv)
print("cuda.core key:", key.hex())
print("progcache key:", tool_key)
check("make_program_cache_key == progcache key", key.hex() == tool_key)
check("NVRTC options are the C sample's", argv == [f"-arch={arch}", "--std=c++17"])

# cuda.core writes, C reads.
d1 = os.path.join(work, "interop-py-first")
rc, f, r = run([sys.executable, py_sample, "--cache-dir", d1])
check("python sample MISS run passes", rc == 0 and f.get("Cache status:") == "MISS")
rc, f, r = run([c_sample, "--cache-dir", d1])
check("cuda.core's entry is a HIT for the C sample", rc == 0 and f.get("Cache status:") == "HIT")
check("C sample prints the same key prefix", f.get("Cache key:", "")[:24] == key.hex()[:24])
check("C sample validation PASSED on cuda.core's entry", f.get("Validation:") == "PASSED")

# C writes, cuda.core reads.
d2 = os.path.join(work, "interop-c-first")
rc, f, r = run([c_sample, "--cache-dir", d2])
check("C sample MISS run passes", rc == 0 and f.get("Cache status:") == "MISS")
on_disk = open(entry(d2, key), "rb").read()
got = FileStreamProgramCache(d2).get(key)
check("cuda.core returns the C sample's entry byte-identical",
      got is not None and bytes(got) == on_disk)
check("the C sample's entry is a CUBIN", on_disk[:4] == b"\x7fELF")
rc, f, r = run([sys.executable, py_sample, "--cache-dir", d2])
check("the C sample's entry is a HIT for the python sample",
      rc == 0 and f.get("Cache status:") == "HIT" and f.get("Validation:") == "PASSED")
print("interop:", "ALL PASSED" if ok else "FAILURES")
sys.exit(0 if ok else 1)
PY

echo "== timings ($RUNS runs each, medians)"
python3 - "$C_SAMPLE" "$PY_SAMPLE" "$WORK" "$RUNS" "${JSON:-}" <<'PY'
import datetime, json, os, re, shutil, socket, statistics, subprocess, sys, time
json_path = sys.argv[5]
json_cases = []

c_sample, py_sample, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
print("peak RSS from", "/usr/bin/time -v" if TIME else "wait4 rusage",
      "; wall from time.perf_counter around the child")

def parse(stdout):
    fields = {}
    for ln in stdout.splitlines():
        if len(ln) > 20 and ln[19] == " " and ":" in ln[:20]:
            fields[ln[:20].strip()] = ln[20:]
    return fields

def ms(fields, label):
    v = fields.get(label, "")
    m = re.match(r"([0-9.]+) ms", v)
    return float(m.group(1)) if m else 0.0

def run(cmd):
    if TIME:
        t0 = time.perf_counter()
        r = subprocess.run([TIME, "-v", *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
        out, rc = r.stdout, r.returncode
    else:
        # Output to a file, not a pipe, so the child can be reaped with
        # wait4, which returns its own rusage (peak RSS of that child only).
        with open(os.path.join(work, "stdout.txt"), "w+") as so:
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdout=so, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            p.returncode = os.waitstatus_to_exitcode(status)
            so.seek(0)
            out = so.read()
        rc = p.returncode
        rss_kb = usage.ru_maxrss
    f = parse(out)
    if rc != 0 or f.get("Validation:") != "PASSED":
        sys.stderr.write(out)
        raise SystemExit(f"run failed: {cmd}")
    return f, wall, rss_kb

programs = {"C (progcache)": [c_sample], "Python (cuda.core)": [sys.executable, py_sample]}

def case(name, extra, fresh):
    results = {p: [] for p in programs}
    dirs = {p: os.path.join(work, f"{name}-{i}") for i, p in enumerate(programs)}
    if not fresh:  # warm each cache once, not counted
        for p, cmd in programs.items():
            run([*cmd, "--cache-dir", dirs[p], *extra])
    for _ in range(runs):
        for p, cmd in programs.items():
            if fresh:
                shutil.rmtree(dirs[p], ignore_errors=True)
            f, wall, rss = run([*cmd, "--cache-dir", dirs[p], *extra])
            want = "MISS" if fresh else "HIT"
            assert f["Cache status:"] == want, (p, f["Cache status:"])
            results[p].append({
                "prep": ms(f, "Host prep time:"), "lookup": ms(f, "Cache lookup:"),
                "compile": ms(f, "Compile time:"), "store": ms(f, "Cache store:"),
                "load": ms(f, "Module load:"), "kernel": ms(f, "Kernel time:"),
                "wall": wall, "rss": rss / 1024.0})
    return results

def med(rows, k):
    return statistics.median(r[k] for r in rows)

def table(title, results, keys):
    c, py = results["C (progcache)"], results["Python (cuda.core)"]
    json_cases.append({"case": title, "runs": len(c), "metrics": [
        {"metric": label, "unit": unit, "c": round(med(c, k), 4), "python": round(med(py, k), 4)}
        for k, label, unit, _ in keys]})
    print(f"\n### {title}\n")
    print("| metric | C (progcache) | Python (cuda.core) | C / Python |")
    print("| --- | ---: | ---: | ---: |")
    for k, label, unit, fmt in keys:
        a, b = med(c, k), med(py, k)
        ratio = f"{a / b:.3f}" if b else "-"
        print(f"| {label} | {a:{fmt}} {unit} | {b:{fmt}} {unit} | {ratio} |")
    for p, rows in results.items():
        print(f"\n{p} host prep per run (ms): " + ", ".join(f"{r['prep']:.3f}" for r in rows))
        print(f"{p} wall per run (s): " + ", ".join(f"{r['wall']:.3f}" for r in rows))

hit_keys = [("prep", "host prep", "ms", ".3f"), ("lookup", "cache lookup", "ms", ".3f"),
            ("load", "module load", "ms", ".3f"), ("kernel", "kernel time", "ms", ".3f"),
            ("wall", "whole process, wall", "s", ".3f"), ("rss", "peak RSS", "MiB", ".1f")]
miss_keys = [("prep", "host prep", "ms", ".3f"), ("compile", "compile", "ms", ".3f"),
             ("store", "cache store", "ms", ".3f"), ("load", "module load", "ms", ".3f"),
             ("wall", "whole process, wall", "s", ".3f"), ("rss", "peak RSS", "MiB", ".1f")]

table("HIT, M=N=K=512, tile 16, relu", case("hit", [], False), hit_keys)
table("MISS, M=N=K=512, tile 16, relu", case("miss", [], True), miss_keys)
runs = 3
table("HIT, M=N=K=4096, tile 32, relu", case("hit4096", ["--m", "4096", "--n", "4096", "--k", "4096", "--tile-size", "32"], False), hit_keys)
if json_path:
    now = datetime.datetime.now(datetime.timezone.utc)
    with open(json_path, "w") as f:
        json.dump({"schema": 1, "bench": "sample_compare", "date": now.strftime("%Y-%m-%d"),
                   "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                   "host": {"name": socket.gethostname(), "cpus": os.cpu_count()},
                   "command": "bench/run_sample_compare.sh BUILD_DIR %s" % sys.argv[4],
                   "results": {"cases": json_cases}}, f)
        f.write("\n")
PY

echo
echo "== steady state: the hit path repeated in one process"
REPO=$(cd "$HERE/.." && pwd)
cat > "$WORK/steady.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "progcache/cuda.h"
#include "progcache/progcache.h"
static double now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv)
{
    static char src[1 << 16];
    FILE *f = fopen(argv[2], "rb");
    src[fread(src, 1, sizeof src - 1, f)] = 0;
    fclose(f);
    const progcache_cuda_api *api;
    if (progcache_cuda_load(&api)) { fprintf(stderr, "%s\n", progcache_error_last()); return 1; }
    CUdevice d; CUcontext ctx; int major, minor;
    api->cuDeviceGet(&d, 0);
    api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    api->cuDevicePrimaryCtxRetain(&ctx, d);
    api->cuCtxSetCurrent(ctx);
    char arch[32]; snprintf(arch, sizeof arch, "-arch=sm_%d%d", major, minor);
    const char *opts[] = {arch, "--std=c++17"};
    progcache *cache;
    if (progcache_open(&cache, argv[1], NULL)) return 1;
    progcache_program p = PROGCACHE_PROGRAM_INIT;
    p.nvrtc.source = src; p.nvrtc.options = opts; p.nvrtc.num_options = 2;
    p.kernel = "matmul_epilogue";
    enum { N = 1000 };
    static double t[N];
    for (int i = -1; i < N; i++) {
        progcache_program_result r = PROGCACHE_PROGRAM_RESULT_INIT;
        double t0 = now_us();
        int rc = progcache_compile_or_load(&r, cache, &p);
        double t1 = now_us();
        if (rc || (i >= 0 && r.status != PROGCACHE_STATUS_HIT)) { fprintf(stderr, "%s\n", progcache_error_last()); return 1; }
        if (i >= 0) t[i] = t1 - t0;
        progcache_program_result_release(&r);
    }
    qsort(t, N, sizeof t[0], cmp);
    printf("C  compile_or_load hit, %d calls: median %.1f us, p10 %.1f us, p90 %.1f us\n", N, t[N / 2], t[N / 10], t[N * 9 / 10]);
    progcache_close(cache);
    return 0;
}
C
cc -O2 -std=c11 -D_GNU_SOURCE -I"$REPO/include" -I/usr/local/cuda/include "$WORK/steady.c" -o "$WORK/steady" \
  -L"$(cd "$BUILD" && pwd)/src" -lprogcache -Wl,-rpath,"$(cd "$BUILD" && pwd)/src"
"$C_SAMPLE" --cache-dir "$WORK/steady-cache" > /dev/null
"$WORK/steady" "$WORK/steady-cache" "$WORK/source.cu"
python3 - "$WORK/steady-cache" "$WORK/source.cu" <<'PY'
import statistics, sys, time
from cuda.core import Device, ObjectCode, ProgramOptions
from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
cache_dir, source_path = sys.argv[1:]
source = open(source_path, encoding="utf-8").read()
dev = Device(0)
dev.set_current()
cc = dev.compute_capability
options = ProgramOptions(arch=f"sm_{cc.major}{cc.minor}", std="c++17")
cache = FileStreamProgramCache(cache_dir)
times = []
for i in range(301):
    t0 = time.perf_counter()
    key = make_program_cache_key(code=source, code_type="c++", options=options, target_type="cubin")
    data = cache.get(key)
    kernel = ObjectCode.from_cubin(data).get_kernel("matmul_epilogue")
    t1 = time.perf_counter()
    assert data is not None
    if i:
        times.append((t1 - t0) * 1e6)
times.sort()
n = len(times)
print(f"Py key + get + from_cubin + get_kernel, {n} calls: median {times[n // 2]:.1f} us, "
      f"p10 {times[n // 10]:.1f} us, p90 {times[n * 9 // 10]:.1f} us")
PY
