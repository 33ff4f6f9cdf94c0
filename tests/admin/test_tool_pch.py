#!/usr/bin/env python3
"""The PCH tier from the build tree, and loud when off (issue 23, item 6):
`progcache warm` run from the build directory finds the helper built
there (a PCH is made and used, no fallback), and when the tier is off for
a reason - the helper missing, the helper untrusted, the PCH directory
refused - the first compile that would have used it says why, in one line
on stderr, once, however many programs and threads.

Environment: PROGCACHE_BIN (the progcache tool of a build tree),
PROGCACHE_CUDA_INCLUDE (the toolkit's include directory)."""

import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
INCLUDE = os.environ.get("PROGCACHE_CUDA_INCLUDE", "/usr/local/cuda/include")


def run(args, env=None):
    e = {"PROGCACHE_PCH_MIN_MS": "0",  # every header prefix is worth a PCH here
         "PROGCACHE_PCH_CREATE": "detached"}  # the default (the tests' is inline)
    e.update(env or {})
    return pt.run(args, e, drop=("PROGCACHE_DIR", "PROGCACHE_PCH_HELPER", "PROGCACHE_PCH",
                                 "NVRTC_DISABLE_PCH"))


def stats(cache):
    rc, out, err = run(["stats", "--dir", cache, "--json"])
    return json.loads(out) if rc == 0 else {}


def wait_creations(cache):
    """Until no detached PCH creation runs in cache (two minutes at most)."""
    import glob
    import time
    pattern = os.path.join(cache, "progcache", "pch-*", "*.making")
    for _ in range(1200):
        if not glob.glob(pattern):
            return
        time.sleep(0.1)
    check(False, "a detached PCH creation ended", glob.glob(pattern))


def off_lines(err):
    return [l for l in err.splitlines() if "PCH tier is off" in l]


def main():
    pt.need_bin()
    if not os.path.exists(os.path.join(INCLUDE, "cuda_fp16.h")):
        pt.skip("no cuda_fp16.h in " + INCLUDE)
    with tempfile.TemporaryDirectory(prefix="progcache-tool-pch-") as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        lines = []
        for i in range(8):
            with open(os.path.join(src, "h%d.cu" % i), "w") as f:
                f.write('#include <cuda_fp16.h>\n'
                        'extern "C" __global__ void k%d(__half *x) { x[0] = __float2half(%d.0f); }\n'
                        % (i, i))
            lines.append("h%d.cu -- -I%s" % (i, INCLUDE))
        manifest = os.path.join(src, "m.txt")
        with open(manifest, "w") as f:
            f.write("\n".join(lines[:4]) + "\n")
        later = os.path.join(src, "later.txt")
        with open(later, "w") as f:
            f.write("\n".join(lines[4:]) + "\n")

        # From the build tree, with no setting: the build's helper is used.
        cache = os.path.join(tmp, "built")
        rc, out, err = run(["warm", "--arch", "sm_90", "-j", "1", "--dir", cache, manifest])
        if rc != 0 and "NVRTC" in err:
            pt.skip("NVRTC cannot compile here: " + err)
        check(rc == 0 and not off_lines(err), "warm from the build tree: no 'tier is off'", err)
        # The PCH is made after the first compile, by a helper nobody waits
        # for: wait for it (a bound, not a timing), then warm more variants.
        wait_creations(cache)
        rc, out, err = run(["warm", "--arch", "sm_90", "-j", "1", "--dir", cache, later])
        check(rc == 0 and not off_lines(err), "second warm from the build tree", err)
        wait_creations(cache)
        s = stats(cache)
        check(s.get("pch_deferred", 0) >= 1 and s.get("pch_created", 0) >= 1 and
              s.get("pch_hits", 0) >= 1 and s.get("pch_fallbacks", 1) == 0,
              "warm from the build tree finds the build's helper: a PCH made and used", s)

        # Off, for each reason: one line, naming the cause, with 2 threads
        # and 4 programs.
        bad = os.path.join(tmp, "open-helper")
        shutil.copy(BIN, bad)  # any executable: it is refused before it could run
        os.chmod(bad, 0o777)
        refused = os.path.join(tmp, "refused")
        os.makedirs(os.path.join(refused, "progcache"), mode=0o700)
        os.symlink(tmp, os.path.join(refused, "progcache", "pch-%d" % os.geteuid()))
        for label, cache, env, what in (
                ("the helper missing", os.path.join(tmp, "missing"),
                 {"PROGCACHE_PCH_HELPER": os.path.join(tmp, "no-such-helper")},
                 "no-such-helper: No such file"),
                ("the helper untrusted", os.path.join(tmp, "untrusted"),
                 {"PROGCACHE_PCH_HELPER": bad}, "writable by other users"),
                ("the directory refused", refused, {}, "off for this cache")):
            rc, out, err = run(["warm", "--arch", "sm_90", "-j", "2", "--dir", cache, manifest],
                               env)
            got = off_lines(err)
            check(rc == 0 and out.count("compiled ") == 4,
                  "%s: every program still compiled" % label, out + err)
            check(len(got) == 1 and what in got[0] and got[0].startswith("progcache warm: warning"),
                  "%s: one line on stderr saying why" % label, err)
            s = stats(cache)
            if label != "the directory refused":
                check(s.get("pch_fallbacks", 0) == 4 and s.get("pch_created", 1) == 0,
                      "%s: four fallbacks counted" % label, s)
        # A second warm over the same cache is a new process: it says it again.
        rc, out, err = run(["warm", "--arch", "sm_80", "--dir", os.path.join(tmp, "missing"),
                            manifest], {"PROGCACHE_PCH_HELPER": os.path.join(tmp, "nope")})
        check(len(off_lines(err)) == 1, "each process says it once", err)
    return pt.finish("test_tool_pch")


if __name__ == "__main__":
    sys.exit(main())
