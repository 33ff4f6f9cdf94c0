#!/usr/bin/env python3
"""progcache exec with cuda.core from PyPI (docs/INTERCEPT.md): a Python
program that compiles with cuda.core's Program (which finds NVRTC through
cuda-pathfinder and cuda-bindings: a dlopen and dlsym), unchanged, run
plain, then twice under `progcache exec`: a MISS, then a HIT with no real
compile and the same CUBIN and lowered name as the plain run, and without
NVRTC mapped (the stand-in, docs/INTERCEPT.md). Then, when
pip can fetch the nvidia-cuda-nvrtc wheel (another NVRTC version), the C
client opens that library by path: a MISS (another version, another key)
with that library's own bytes, then a HIT that never mapped it (the 13.5
stand-in).

The virtual environment is tests/key/test_cuda_core_diff.py's (--venv, made
once); without a package index the test is skipped."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
sys.path.insert(0, os.path.join(HERE, "..", "key"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402
import test_cuda_core_diff as diff  # noqa: E402
import test_intercept as ti  # noqa: E402
import test_intercept_standin as ts  # noqa: E402


def wheel_nvrtc(venv):
    """libnvrtc.so.13 of the nvidia-cuda-nvrtc wheel, installed (once) in a
    folder of the venv that cuda.core does not search; None without it."""
    target = os.path.join(venv, "nvrtc-wheel")
    lib = os.path.join(target, "nvidia", "cu13", "lib", "libnvrtc.so.13")
    if not os.path.exists(lib):
        try:
            subprocess.run([diff.venv_python(venv), "-m", "pip", "install", "-q", "--no-deps",
                            "--disable-pip-version-check", "--timeout", "30", "--target", target,
                            "nvidia-cuda-nvrtc==13.*"], capture_output=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None
    return lib if os.path.exists(lib) else None


def test_cuda_core(tmp, py):
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    prog = [py, os.path.join(HERE, "cuda_core_program.py")]
    rc, err = ti.run_plain(prog + [os.path.join(tmp, "plain")])
    check(rc == 0, "cuda.core runs plain", err)
    for run in ("miss", "hit"):
        rc, err = ti.run_exec(cache, prog + [os.path.join(tmp, run)], log)
        check(rc == 0, "cuda.core under exec: " + run, err)
    c = ti.counters(cache)
    check(c["intercept_misses"] == 1 and c["intercept_hits"] == 1 and
          c["intercept_real_programs"] == 0, "cuda.core: a MISS, then a HIT", c)
    for name in ("cubin", "lowered"):
        plain = pt.read(os.path.join(tmp, "plain", name))
        check(plain and pt.read(os.path.join(tmp, "hit", name)) == plain,
              "cuda.core: the HIT's %s is the plain run's" % name)
    # The stand-in (docs/INTERCEPT.md): the NVRTC the plain run mapped is
    # not mapped by the HIT.
    libs = [ln.split()[5] for ln in pt.read(os.path.join(tmp, "plain", "maps")).decode()
            .splitlines() if len(ln.split()) >= 6 and
            os.path.basename(ln.split()[5]).startswith("libnvrtc.so")]
    check(libs, "cuda.core's plain run mapped NVRTC")
    check(libs and not ts.mapped(os.path.join(tmp, "hit"), libs[0]) and
          ts.standin_mapped(os.path.join(tmp, "hit")),
          "cuda.core: the HIT ran on the stand-in and never mapped " + (libs or ["NVRTC"])[0])
    c = ts.counters(cache)
    check(c["intercept_standin_hits"] == 1, "cuda.core: a HIT without NVRTC, counted", c)


def test_wheel_version(tmp, venv):
    lib = wheel_nvrtc(venv)
    if not lib:
        print("no nvidia-cuda-nvrtc wheel (no package index?): its run is left out")
        return
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    toolkit = os.path.realpath(os.path.join(ti.NVRTC_DIR, "libnvrtc.so.13"))
    for i, path in enumerate((toolkit, lib, lib)):
        rc, err = ti.run_exec(cache, [ti.client("dlopen"), os.path.join(tmp, "o%d" % i),
                                      "--lib", path, "--maps", "1"], log)
        check(rc == 0, "the client with %s" % path, err)
    rc, err = ti.run_plain([ti.client("dlopen"), os.path.join(tmp, "plain"), "--lib", lib])
    c = ti.counters(cache)
    check(c["intercept_misses"] == 2 and c["intercept_hits"] == 1,
          "the wheel's NVRTC is another key than the toolkit's", c)
    text = pt.read(log).decode()
    check("NVRTC 13.0 " in text and "NVRTC 13.5 " in text,
          "the log names both NVRTC versions", text)
    ti.same_outputs(os.path.join(tmp, "plain"), os.path.join(tmp, "o2"), "the wheel's HIT")
    ti.same_outputs(os.path.join(tmp, "plain"), os.path.join(tmp, "o1"), "the wheel's MISS")
    check(pt.read(os.path.join(tmp, "o1", "ptx")) != pt.read(os.path.join(tmp, "o0", "ptx")),
          "the wheel's MISS has its own bytes, not the toolkit's")
    # Behind the stand-in (the wheel's export list, 13.5's): a HIT that
    # never mapped the wheel's NVRTC, its version from the cache's record.
    check(not ts.mapped(os.path.join(tmp, "o2"), lib) and
          ts.standin_mapped(os.path.join(tmp, "o2")), "the wheel's HIT never mapped " + lib)
    check("NVRTC 13.5 " in text and "progcache-nvrtc-13.5" in
          pt.read(os.path.join(tmp, "o2", "maps")).decode(),
          "the wheel's NVRTC got the 13.5 stand-in", text)
    check(ts.counters(cache)["intercept_standin_hits"] == 1, "the wheel's HIT counted")
    # A function the interceptor does not implement (13.5's
    # nvrtcGetTileIRSize), called after a HIT: NVRTC gets a real program,
    # made and compiled first, never one of ours; its answer is the plain
    # run's.
    before = ti.counters(cache)
    rc, err = ti.run_exec(cache, [ti.client("dlopen"), os.path.join(tmp, "tile"), "--lib", lib,
                                  "--extra", "nvrtcGetTileIRSize"], log)
    ti.run_plain([ti.client("dlopen"), os.path.join(tmp, "tile-plain"), "--lib", lib,
                  "--extra", "nvrtcGetTileIRSize"])
    c = ti.counters(cache)
    c = ts.counters(cache)
    check(rc == 0 and c["intercept_hits"] == before["intercept_hits"] + 1 and
          c["intercept_real_programs"] == before["intercept_real_programs"] + 1 and
          c["intercept_standin_loads"] == 1,
          "an unimplemented function after a HIT gets a real program (NVRTC loaded behind "
          "the stand-in, counted)", (c, err))
    rcs = pt.read(os.path.join(tmp, "tile", "rc.txt"))
    check(b"nvrtcGetTileIRSize" in rcs and
          rcs == pt.read(os.path.join(tmp, "tile-plain", "rc.txt")),
          "nvrtcGetTileIRSize answers as without progcache", rcs)
    ti.same_outputs(os.path.join(tmp, "tile-plain"), os.path.join(tmp, "tile"), "after TileIR")


def main():
    pt.need_bin()
    if not os.path.exists(ti.client("dlopen")):
        pt.skip("the NVRTC clients are not built")
    venv = os.path.abspath(os.environ.get("PROGCACHE_VENV") or "cuda-core-venv")
    py = diff.ensure_venv(venv)  # exits 77 when cuda-core cannot be installed
    import tempfile
    with tempfile.TemporaryDirectory(prefix="progcache-intercept-cc-") as tmp:
        for name, test in (("cc", lambda d: test_cuda_core(d, py)),
                           ("wheel", lambda d: test_wheel_version(d, venv))):
            sub = os.path.join(tmp, name)
            os.makedirs(sub)
            test(sub)
    return pt.finish("test_intercept_cuda_core")


if __name__ == "__main__":
    sys.exit(main())
