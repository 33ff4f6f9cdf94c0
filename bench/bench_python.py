#!/usr/bin/env python3
"""progcache.ProgramCache against cuda.core's FileStreamProgramCache, side
by side, as a Python program sees them (docs/PERFORMANCE.md, "Python").

    python bench/bench_python.py [--sizes 10,1000,100000] [--samples N]
        [--procs 16] [--json FILE]

Run it in an environment with the progcache package and cuda.core 1.2
(tests/python/run_python_tests.py makes one: build/python-venv).

1. Get-hit latency at each size: one directory of N entries (5.6 KiB each,
   32-byte keys, as make_program_cache_key makes them), filled once through
   ProgramCache without fsync (progcache's fast path; the layout is
   cuda.core's, so both caches read the same files), then random hits
   through each cache in turn; medians and 99th percentiles of per-call
   times (perf_counter_ns).
2. The cold fleet: --procs processes start together on an empty cache and
   all need the same program (NVRTC, sm_90, no GPU needed): with
   FileStreamProgramCache as cuda.core's sample uses it (get, else compile
   and store), and with progcache.compile_or_load. Counts the NVRTC
   compiles and the time until every process has the artifact.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

VALUE_SIZE = 5734  # 5.6 KiB, as bench_store_file.c


def key_of(i):
    x = (i + 1) * 0x9E3779B97F4A7C15
    return (x % (1 << 256)).to_bytes(32, "little")


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def hit_latency(n, samples):
    import progcache
    from cuda.core.utils import FileStreamProgramCache

    value = os.urandom(VALUE_SIZE)
    with tempfile.TemporaryDirectory(prefix="bench-python-") as root:
        t0 = time.perf_counter()
        with progcache.ProgramCache(root, fsync=False, max_size_bytes=1 << 40) as pc:
            for i in range(n):
                pc[key_of(i)] = value
        fill_s = time.perf_counter() - t0
        out = {"entries": n, "fill_s": fill_s}
        caches = {"progcache": progcache.ProgramCache(root, max_size_bytes=1 << 40),
                  "cuda.core": FileStreamProgramCache(root)}
        rng = random.Random(n)
        picks = [key_of(rng.randrange(n)) for _ in range(samples)]
        for name, cache in caches.items():
            for k in picks[:min(samples, 1000)]:  # warm: the same pages for both
                cache[k]
        times = {name: [] for name in caches}
        for k in picks:  # interleaved, so that neither gets a quieter moment
            for name, cache in caches.items():
                t = time.perf_counter_ns()
                data = cache[k]
                times[name].append((time.perf_counter_ns() - t) / 1000.0)
                assert len(data) == VALUE_SIZE
        for name, cache in caches.items():
            out[name] = {"median_us": statistics.median(times[name]),
                         "p99_us": percentile(times[name], 99)}
            cache.close()
        return out


WORKER = r"""
import sys, time
mode, root = sys.argv[1], sys.argv[2]
from cuda.core import Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
import progcache
src = ('extern "C" __global__ void fleet(float *a, int n) { int i = blockIdx.x * blockDim.x'
       ' + threadIdx.x; if (i < n) a[i] = a[i] * 3.0f + 1.0f; }\n// ' + root + '\n')
options = ProgramOptions(arch="sm_90")
if mode == "progcache":
    cache = progcache.ProgramCache(root)
else:
    cache = FileStreamProgramCache(root)
    key = make_program_cache_key(code=src, code_type="c++", options=options,
                                 target_type="cubin")
print("ready", flush=True)
sys.stdin.readline()  # the parent releases every process at once
if mode == "progcache":
    r = progcache.compile_or_load(src, "cubin", options, cache=cache)
    compiled = r.status == "MISS"
else:
    data = cache.get(key)
    compiled = data is None
    if compiled:
        cache[key] = Program(src, "c++", options).compile("cubin")
print(int(compiled), time.time(), flush=True)
"""


def fleet(mode, procs):
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as root:
        ps = [subprocess.Popen([sys.executable, "-c", WORKER, mode, root],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
              for _ in range(procs)]
        for p in ps:  # every interpreter started, cuda.core imported, cache open
            if p.stdout.readline().strip() != "ready":
                raise SystemExit("a %s worker failed: %s" % (mode, p.stderr.read()[-2000:]))
        release = time.time()
        for p in ps:
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=600) for p in ps]
        for p, (o, e) in zip(ps, outs):
            if p.returncode:
                raise SystemExit("a %s worker failed: %s" % (mode, e[-2000:]))
        rows = [o.split() for o, _ in outs]
        return {"compiles": sum(int(r[0]) for r in rows),
                "all_done_ms": 1000.0 * (max(float(r[1]) for r in rows) - release)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,1000,100000")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--json")
    args = ap.parse_args()
    result = {"hits": [], "fleet": {}}
    print("| entries | ProgramCache median | p99 | FileStreamProgramCache median | p99 |"
          " fill (ProgramCache, no fsync) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",") if s):
        r = hit_latency(n, args.samples)
        result["hits"].append(r)
        print("| %d | %.1f us | %.1f us | %.1f us | %.1f us | %.1f s |" % (
            n, r["progcache"]["median_us"], r["progcache"]["p99_us"],
            r["cuda.core"]["median_us"], r["cuda.core"]["p99_us"], r["fill_s"]), flush=True)
    if args.procs:
        print("\n| %d processes, one cold program | NVRTC compiles | until all have it |"
              % args.procs)
        print("|---|---:|---:|")
        for mode, label in (("cuda.core", "FileStreamProgramCache (get, else compile, store)"),
                            ("progcache", "progcache.compile_or_load")):
            r = fleet(mode, args.procs)
            result["fleet"][mode] = r
            print("| %s | %d | %.0f ms |" % (label, r["compiles"], r["all_done_ms"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
