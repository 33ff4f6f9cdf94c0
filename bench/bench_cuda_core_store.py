#!/usr/bin/env python3
"""The same measurements as bench_store_file.c, on cuda.core's own
FileStreamProgramCache, for a side-by-side table in one run.

    python3 bench/bench_cuda_core_store.py [--sizes 10,1000,100000]
        [--samples N] [--cap-sizes 1000,20000] [--cap-seconds S]

Needs cuda.core (1.2) importable. Prints a markdown table. Figures are
medians of per-call times (time.perf_counter_ns)."""
import argparse
import os
import random
import statistics
import sys
import tempfile
import time

try:  # --help needs no cuda.core; a run says that it is missing
    from cuda.core.utils import FileStreamProgramCache
    MISSING = None
except ImportError as e:
    MISSING = e

VALUE_SIZE = 5734  # 5.6 KiB, as in bench_store_file.c


def key_of(i, salt):
    # 32-byte keys, like make_program_cache_key's; content only needs to differ.
    x = ((i + 1) * 0x9E3779B97F4A7C15) ^ ((salt + 1) * 0xBF58476D1CE4E5B9)
    return (x % (1 << 256)).to_bytes(32, "little")


def timed(fn, n):
    out = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(i)
        out.append((time.perf_counter_ns() - t0) / 1000.0)
    return out


def measure(root, n, samples, value):
    cache = FileStreamProgramCache(root)
    for i in range(n):
        cache[key_of(i, 0)] = value
    rng = random.Random(1)
    for i in range(n):
        cache[key_of(i, 0)]
    hit = timed(lambda i: cache[key_of(rng.randrange(n), 0)], samples)

    def miss(i):
        try:
            cache[key_of(i, 77)]
        except KeyError:
            return
        raise AssertionError("unexpected hit")

    miss_t = timed(miss, samples)
    puts = max(1, samples // 4)

    def put(i):
        cache[key_of(i, 99)] = value

    put_t = timed(put, puts)
    return statistics.median(hit), sorted(hit)[int(0.99 * (len(hit) - 1))], statistics.median(miss_t), \
        statistics.median(put_t)


def capped(root, n, seconds, value):
    cache = FileStreamProgramCache(root, max_size_bytes=n * VALUE_SIZE)
    for i in range(n):
        cache[key_of(i, 5)] = value
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        cache[key_of(done, 6)] = value
        done += 1
    return done / (time.perf_counter() - t0), done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,1000,100000")
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--cap-sizes", default="1000,20000,100000")
    ap.add_argument("--cap-seconds", type=float, default=10.0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None, help="also write the figures to this file "
                    "(what scripts/plot_perf.py reads)")
    args = ap.parse_args()
    if MISSING:
        print("bench_cuda_core_store.py: needs cuda.core: %s" % MISSING, file=sys.stderr)
        return 3
    results = {"value_size": VALUE_SIZE, "samples": args.samples, "sizes": [], "capped": []}
    base = args.dir or tempfile.mkdtemp(prefix="bench-cudacore-")
    value = bytes((i * 31 + 7) & 0xFF for i in range(VALUE_SIZE))
    print(f"cuda.core FileStreamProgramCache, {VALUE_SIZE}-byte values, {args.samples} samples, dir {base}\n")
    print("| entries | get hit median (µs) | get hit p99 (µs) | get miss median (µs) | put median (µs) |")
    print("|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in args.sizes.split(",") if x]:
        h, h99, m, p = measure(os.path.join(base, f"n{n}"), n, args.samples, value)
        print(f"| {n} | {h:.1f} | {h99:.1f} | {m:.1f} | {p:.0f} |", flush=True)
        results["sizes"].append({"entries": n, "hit_median_us": round(h, 2), "hit_p99_us": round(h99, 2),
                                 "miss_median_us": round(m, 2), "put_median_us": round(p, 1)})
    print()
    for n in [int(x) for x in args.cap_sizes.split(",") if x]:
        rate, done = capped(os.path.join(base, f"cap{n}"), n, args.cap_seconds, value)
        print(f"puts with the cap full at {n} entries: {rate:.1f} puts/s ({done} puts in {args.cap_seconds:.0f} s)",
              flush=True)
        results["capped"].append({"entries": n, "puts_per_s": round(rate, 1)})
    if args.json:
        import datetime, json, socket
        now = datetime.datetime.now(datetime.timezone.utc)
        with open(args.json, "w") as f:
            json.dump({"schema": 1, "bench": "cuda_core_store", "date": now.strftime("%Y-%m-%d"),
                       "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "host": {"name": socket.gethostname(), "cpus": os.cpu_count()},
                       "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                       "results": results}, f)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
