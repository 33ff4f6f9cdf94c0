#!/usr/bin/env python3
"""One warm, many GPUs (issue 23, item 3): `progcache warm --arch
sm_80,sm_90,sm_100` compiles every program for every architecture in one
pass: the counts per architecture, each key equal to `progcache key` for
that architecture and a hit afterwards, a line's own -arch compiled once,
one progress bar over every compile, a second warm all cached, and an
unknown or repeated architecture a clear usage error before anything is
compiled.

Environment: PROGCACHE_BIN (the progcache tool)."""

import json
import os
import sys
import tempfile

import tool_admin_fixture as fx  # with tests/helpers/progcache_test.py
from tool_admin_fixture import check, run, run_on_tty

pt = fx.pt
BIN = pt.BIN
ARCHS = ["sm_80", "sm_90", "sm_100"]

KERNELS = pt.KERNELS


def test_archs(tmp):
    manifest = pt.write_programs(os.path.join(tmp, "src"), KERNELS,
                                "a.cu -- --std=c++17\n"
                                "a.cu --target ptx\n"
                                "t.cu --name-expression 'fill<float>'\n"
                                "a.cu -- -arch=sm_75\n")
    cache = os.path.join(tmp, "cache")
    rc, out, err = run(["warm", "--arch", ",".join(ARCHS), "--jobs", "2", "--json", "--dir",
                        cache, manifest])
    if rc != 0 and "NVRTC" in err and "load" in err:
        return "skip"
    check(rc == 0, "warm --arch sm_80,sm_90,sm_100: exit 0", err)
    w = json.loads(out)
    check(w["compiled"] == 10 and w["cached"] == 0 and w["failed"] == 0,
          "3 programs x 3 architectures + one with its own -arch = 10 compiles", w)
    check([a["arch"] for a in w["archs"]] == ARCHS, "a summary per architecture, in order", w)
    for a in w["archs"]:
        check(a["compiled"] == 3 and a["cached"] == 0 and a["failed"] == 0,
              "3 compiles for " + a["arch"], a)
    rows = w["programs"]
    check(len(rows) == 10, "one row per compile", rows)
    own = [r for r in rows if r["arch"] is None]
    check(len(own) == 1 and own[0]["line"] == 4 and own[0]["options"] == ["-arch=sm_75"],
          "the line with its own -arch is compiled once, as given", own)
    keys = set()
    for r in rows:
        if r["arch"] is None:
            continue
        check(r["options"][0] == "-arch=" + r["arch"], "-arch first in the options", r)
        a = os.path.join(tmp, "src", "a.cu")
        t = os.path.join(tmp, "src", "t.cu")
        args = {1: ["key", a, "--", "-arch=" + r["arch"], "--std=c++17"],
                2: ["key", "--target", "ptx", a, "--", "-arch=" + r["arch"]],
                3: ["key", "--name-expression", "fill<float>", t, "--",
                    "-arch=" + r["arch"]]}[r["line"]]
        want = run(args)[1].strip()
        check(r["key"] == want, "key of line %d for %s == progcache key" % (r["line"], r["arch"]),
              (r, want))
        keys.add(r["key"])
        rc, _, err = run(["get", r["key"], "--dir", cache, "-o", os.path.join(tmp, "x.bin")])
        check(rc == 0, "the warmed entry is a hit: line %d %s" % (r["line"], r["arch"]), err)
    check(len(keys) == 9, "nine distinct keys", keys)
    ls = json.loads(run(["ls", "--dir", cache, "--json"])[1])["entries"]
    check(sorted(e["arch"] for e in ls if e["kind"] == "CUBIN").count("sm_100") == 2,
          "two sm_100 CUBINs in the cache", ls)

    # Text: a line per compile ending with its architecture, a summary per
    # architecture, the total.
    rc, out, err = run(["warm", "--arch", "sm_80,sm_90", "--arch", "sm_100", "--dir", cache,
                        manifest])
    check(rc == 0, "second warm (archs over two --arch): exit 0", err)
    lines = out.splitlines()
    check(sum(1 for l in lines if l.startswith("cached ")) == 10, "second warm: all cached", out)
    for a in ARCHS:
        check("  %s: 0 compiled, 3 already cached, 0 failed" % a in lines,
              "second warm: the summary of " + a, out)
    check(any(l.startswith("warmed ") and "0 compiled, 10 already cached, 0 failed" in l and
              "10 compiles of 4 programs" in l for l in lines), "second warm: the total", out)
    check(any(l.startswith("cached ") and l.endswith(" sm_100") for l in lines),
          "a line ends with its architecture", out)

    # One progress bar over every compile.
    progress = run_on_tty(["warm", "--arch", ",".join(ARCHS), "--dir", cache, manifest])
    check("10/10" in progress and "compiles" in progress and "cached 10" in progress,
          "one progress bar over the 10 compiles", repr(progress))

    # Bad lists: usage errors, nothing compiled, no cache created.
    fresh = os.path.join(tmp, "fresh")
    for value, what in (("sm_80,bogus", 'unknown architecture "bogus"'),
                        ("sm_80,,sm_90", "empty architecture"),
                        ("sm_80,", "empty architecture"),
                        ("90", 'unknown architecture "90"'),
                        ("sm_90,sm_90", "listed twice")):
        rc, out, err = run(["warm", "--arch", value, "--dir", fresh, manifest])
        check(rc == 2 and what in err and out == "", "warm --arch %s: exit 2 (%s)" % (value, what),
              (rc, out, err))
        check(not os.path.exists(fresh), "warm --arch %s: no cache created" % value)
    # An architecture of the right form that NVRTC does not know: each of
    # its compiles fails with NVRTC's word for it, named with the arch.
    rc, out, err = run(["warm", "--arch", "sm_80,sm_999", "--dir", cache, manifest])
    check(rc == 1 and "for sm_999 failed" in err and "gpu-architecture" in err and
          "  sm_999: 0 compiled, 0 already cached, 3 failed" in out and
          "  sm_80: 0 compiled, 3 already cached, 0 failed" in out,
          "an architecture NVRTC does not know: its compiles fail, named", out + err)


def main():
    pt.need_bin()
    with tempfile.TemporaryDirectory(prefix="progcache-warm-archs-") as tmp:
        if test_archs(tmp) == "skip":
            pt.skip("NVRTC cannot be loaded here")
    return pt.finish("test_tool_warm_archs")


if __name__ == "__main__":
    sys.exit(main())
