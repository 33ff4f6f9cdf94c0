#!/usr/bin/env python3
"""progcache warm through the real binary: a manifest of kernels compiled
into a cache, keys equal to cuda.core's, progress on a terminal, bad
manifests and arguments.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(the cuda.core reference data; copied before use, never modified)."""

import json
import os
import sys

import tool_admin_fixture as fx
from tool_admin_fixture import SCALE_CUBIN_KEY, check, ls_json, run, run_on_tty


KERNELS = {
    "a.cu": 'extern "C" __global__ void scale(float *a, float s, int n)'
            '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] *= s; }\n',
    "b.cu": 'extern "C" __global__ void axpy(const float *x, float *y, float a, int n)'
            '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) y[i] += a*x[i]; }\n',
    "sub/c.cu": 'template <typename T> __global__ void fill(T *a, T v, int n)'
                '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] = v; }\n',
}


def test_warm(tmp):
    src = os.path.join(tmp, "warm-src")
    manifest = fx.pt.write_programs(src, KERNELS,
                                   "# three programs for the cluster\n\n"
                                   "a.cu -- --std=c++17\n"
                                   "b.cu --target ptx   # PTX for the JIT\n"
                                   "sub/c.cu --name 'fill prog' --name-expression \"fill<float>\""
                                   " -- -DWIDTH=4\n")
    cache = os.path.join(tmp, "warm-cache")
    rc, out, err = run(["warm", "--arch", "sm_90", manifest, "--dir", cache, "--json", "--jobs", "2"])
    check(rc == 0, "warm exit 0", err)
    w = json.loads(out)
    check(w["compiled"] == 3 and w["cached"] == 0 and w["failed"] == 0, "warm compiles 3", w)
    progs = w["programs"]
    check([p["options"][0] for p in progs] == ["-arch=sm_90"] * 3, "warm puts -arch first", progs)
    # The keys are those `progcache key` derives for the same compile.
    expect = [
        run(["key", os.path.join(src, "a.cu"), "--", "-arch=sm_90", "--std=c++17"])[1].strip(),
        run(["key", "--target", "ptx", os.path.join(src, "b.cu"), "--", "-arch=sm_90"])[1].strip(),
        run(["key", "--name", "fill prog", "--name-expression", "fill<float>",
             os.path.join(src, "sub/c.cu"), "--", "-arch=sm_90", "-DWIDTH=4"])[1].strip(),
    ]
    check([p["key"] for p in progs] == expect, "warm keys == progcache key", (progs, expect))
    # a.cu with those options is the reference vector cuda.core keyed.
    check(progs[0]["key"] == SCALE_CUBIN_KEY, "warm key matches cuda.core's", progs[0])
    for p in progs:
        rc, _, err = run(["get", p["key"], "--dir", cache, "-o", os.path.join(tmp, "w.out")])
        check(rc == 0, "warmed entry is a hit: " + p["source"], err)
    kinds = sorted(e["kind"] for e in ls_json(cache))
    check(kinds == ["CUBIN", "CUBIN", "PTX"], "warm: two CUBINs and a PTX", kinds)

    rc, out, err = run(["warm", "--arch", "sm_90", manifest, "--dir", cache])
    check(rc == 0, "second warm exit 0", err)
    check("0 compiled, 3 already cached, 0 failed" in out, "second warm: all cached", out)
    check(sum(1 for l in out.splitlines() if l.startswith("cached ")) == 3, "second warm lines", out)

    # On a terminal: a progress bar on standard error, ending at 3/3.
    progress = run_on_tty(["warm", "--arch", "sm_90", manifest, "--dir", cache])
    check("\r[" in progress and "3/3" in progress and "cached 3" in progress,
          "warm draws a progress bar on a terminal", repr(progress))

    # A line with its own -arch keeps it.
    own = os.path.join(src, "own.txt")
    with open(own, "w") as f:
        f.write("a.cu -- -arch=sm_80\n")
    w = json.loads(run(["warm", "--arch", "sm_90", own, "--dir", cache, "--json"])[1])
    check(w["programs"][0]["options"] == ["-arch=sm_80"], "a line's own -arch wins", w)

    # Failures: a compile error names the program, exit 1; the others still go in.
    broken = os.path.join(src, "broken.cu")
    with open(broken, "w") as f:
        f.write("__global__ void oops( { }\n")
    mixed = os.path.join(src, "mixed.txt")
    with open(mixed, "w") as f:
        f.write("broken.cu\nb.cu --target cubin\n")
    rc, out, err = run(["warm", "--arch", "sm_90", mixed, "--dir", cache])
    check(rc == 1 and "broken.cu" in err and "1 failed" in out and "1 compiled" in out,
          "warm with a compile error: exit 1, named", out + err)

    for text, what in (("a.cu --bogus\n", "unknown option"), ("a.cu --name 'open\n", "quote"),
                       ("a.cu --target sass\n", "--target"), ("# nothing\n", "no program")):
        bad = os.path.join(src, "bad.txt")
        with open(bad, "w") as f:
            f.write(text)
        rc, _, err = run(["warm", "--arch", "sm_90", bad, "--dir", cache])
        check(rc == 2 and what in err, "malformed manifest (%s): exit 2" % what, err)
    missing = os.path.join(src, "missing.txt")
    with open(missing, "w") as f:
        f.write("a.cu\nnot-there.cu\n")
    rc, out, err = run(["warm", "--arch", "sm_90", missing, "--dir", cache])
    # One bad line costs its line only (issue 35): named, skipped, the rest
    # compiled, exit 1 at the end.
    check(rc == 1 and "not-there.cu" in err and "missing.txt:2: skipped" in err
          and "1 manifest line skipped" in out and "missing.txt:1 a.cu" in out,
          "missing source: named and skipped, the rest compiled, exit 1", out + err)
    with open(missing, "w") as f:
        f.write("not-there.cu\n")
    rc, _, err = run(["warm", "--arch", "sm_90", missing, "--dir", cache])
    check(rc == 3 and "no line of manifest" in err, "no source readable: exit 3", err)
    # A cap smaller than what is warmed: one line for the evictions, not one
    # per pass, and it counts what remains (issue 35); not every program is in
    # the cache, so exit 1.
    many = {"k%d.cu" % i: 'extern "C" __global__ void k%d(float *a) { a[threadIdx.x] *= %d.0f; }\n'
            % (i, i) for i in range(8)}
    small = fx.pt.write_programs(os.path.join(tmp, "many"), many,
                                 "".join("k%d.cu\n" % i for i in range(8)))
    capped = os.path.join(tmp, "capped")
    rc, out, err = run(["warm", "--arch", "sm_90", small, "--dir", capped, "--jobs", "2"],
                       env={"PROGCACHE_MAX_SIZE": "8K"})
    left = len(ls_json(capped))
    evict_lines = [l for l in (out + err).splitlines() if "evicted" in l]
    check(rc == 1 and len(evict_lines) == 1 and "8 compiled" in out
          and ": %d of the 8 warmed remain in the cache" % left in evict_lines[0] and left < 8,
          "warm into a small cap: one eviction line counting what remains, exit 1", out + err)
    w = json.loads(run(["warm", "--arch", "sm_90", small, "--dir", capped, "--json"],
                       env={"PROGCACHE_MAX_SIZE": "8K"})[1])
    check(w["evicted"] > 0 and w["remaining"] == len(ls_json(capped)), "--json: evicted, remaining", w)
    check(run(["warm", "--arch", "90", manifest, "--dir", cache])[0] == 2, "warm bad --arch: exit 2")
    check(run(["warm", "--jobs", "0", manifest, "--dir", cache])[0] == 2, "warm bad --jobs: exit 2")
    check(run(["warm", "--dir", cache])[0] == 2, "warm without MANIFEST: exit 2")


if __name__ == "__main__":
    sys.exit(fx.main((test_warm,), "test_tool_admin_warm"))
