#!/usr/bin/env python3
"""progcache exec with CuPy (cupy-cuda13x from PyPI, in a virtual
environment of its own; docs/INTERCEPT.md, "CuPy"). CuPy compiles without
a GPU once its device query for the architecture is answered
(tests/intercept/cupy_program.py).

- cache_in_memory=True (the program has NVRTC's default name): plain, then
  a MISS and a HIT under `progcache exec`, the HIT's CUBIN the plain run's,
  answered through the stand-in without NVRTC mapped.
- CuPy's default (the source in a fresh temporary directory, whose random
  path names the program; the name is in the key because NVRTC puts it in
  diagnostics, symbol names and, with -lineinfo or -G, the CUBIN): every
  run is a MISS, counted as one, with the plain run's CUBIN.

Skipped (77) when pip cannot install CuPy (no package index)."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402
import test_intercept as ti  # noqa: E402
import test_intercept_standin as ts  # noqa: E402

PACKAGE = "cupy-cuda13x==14.*"


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import cupy.cuda.compiler"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    p = subprocess.run([sys.executable, "-m", "venv", "--clear", venv], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pt.skip("cannot create a virtual environment: " + p.stderr[-300:])
    try:
        p = subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check",
                            "--no-input", "--timeout", "30", "--retries", "2", PACKAGE],
                           capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pt.skip("pip install %s took too long (no package index?)" % PACKAGE)
    if p.returncode != 0 or subprocess.run(probe, capture_output=True).returncode != 0:
        pt.skip("cannot install %s: %s" % (PACKAGE, (p.stderr or p.stdout)[-400:]))
    return py


def main():
    pt.need_bin()
    nvrtc = os.path.realpath(os.path.join(ti.NVRTC_DIR, "libnvrtc.so.13"))
    if not os.path.exists(nvrtc):
        pt.skip("no libnvrtc.so.13 in %r" % ti.NVRTC_DIR)
    py = ensure_venv(os.path.abspath(os.environ.get("PROGCACHE_CUPY_VENV") or "cupy-venv"))
    env = {"LD_LIBRARY_PATH": ti.NVRTC_DIR}  # CuPy finds the toolkit's NVRTC by soname
    prog = [py, os.path.join(HERE, "cupy_program.py")]
    import tempfile
    with tempfile.TemporaryDirectory(prefix="progcache-intercept-cupy-") as tmp:
        cache = os.path.join(tmp, "cache")
        log = os.path.join(tmp, "log")
        o = lambda name: os.path.join(tmp, name)  # noqa: E731
        rc, err = ti.run_plain(prog + [o("plain"), "memory"], env)
        check(rc == 0, "CuPy compiles plain, without a GPU", err)
        for run in ("miss", "hit"):
            rc, err = ti.run_exec(cache, prog + [o(run), "memory"], log, env)
            check(rc == 0, "CuPy under exec: " + run, err)
        c = ts.counters(cache)
        check(c["intercept_misses"] == 1 and c["intercept_hits"] == 1 and
              c["intercept_real_programs"] == 0 and c["intercept_standin_hits"] == 1,
              "CuPy (program in memory): a MISS, then a HIT without NVRTC", c)
        plain = pt.read(os.path.join(o("plain"), "cubin"))
        check(plain and pt.read(os.path.join(o("hit"), "cubin")) == plain,
              "CuPy: the HIT's CUBIN is the plain run's")
        check(not ts.mapped(o("hit"), nvrtc) and ts.standin_mapped(o("hit")),
              "CuPy: the HIT never mapped " + nvrtc)
        # CuPy's default: a random temporary path names each program.
        rc, err = ti.run_plain(prog + [o("plain-temp"), "temp"], env)
        for run in ("temp1", "temp2"):
            rc, err = ti.run_exec(cache, prog + [o(run), "temp"], log, env)
            check(rc == 0, "CuPy under exec (temporary file): " + run, err)
        c = ts.counters(cache)
        check(c["intercept_misses"] == 3 and c["intercept_hits"] == 1,
              "CuPy's randomly named programs are MISSes every time, counted", c)
        check(pt.read(os.path.join(o("temp2"), "cubin")) ==
              pt.read(os.path.join(o("plain-temp"), "cubin")),
              "CuPy (temporary file): the CUBIN is the plain run's")
    return pt.finish("test_intercept_cupy")


if __name__ == "__main__":
    sys.exit(main())
