#!/usr/bin/env python3
"""progcache exec's stand-in for libnvrtc.so.13 (docs/INTERCEPT.md, "The
stand-in"): a HIT answered without mapping NVRTC at all.

Each client runs plain, then twice in fresh processes under `progcache
exec`: a MISS (stored), then a HIT with no real compile, every answer byte
for byte the plain run's, and the process's own /proc/self/maps without
the real NVRTC file (its device and inode) but with the stand-in: linked
with -lnvrtc (RUNPATH and DT_RPATH builds), dlopen by soname and by
absolute path. Then, as a control that the maps check can fail, the same
HIT with PROGCACHE_INTERCEPT_STANDIN=off: still a HIT (the key is the same
on both routes), but NVRTC is mapped, and the refusal is counted and said.

Also: a linked program that calls functions the interceptor leaves to
NVRTC (nvrtcGetSupportedArchs) after a HIT: NVRTC is loaded behind the
stand-in, the answers are the plain run's, and the load is counted; a
program that looks up a function its NVRTC lacks (nvrtcGetTileIRSize of
13.5, with 13.0) gets NULL as without progcache (the stand-in exports
exactly its NVRTC's list).

Run with PROGCACHE_INTERCEPT_STANDIN=off in the environment, every client
check fails (NVRTC mapped on the HIT): the test can fail."""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402
import test_intercept as ti  # noqa: E402

STANDIN = ("intercept_standin_hits", "intercept_standin_loads",
           "intercept_standin_version_loads", "intercept_standin_refused")


def counters(cache):
    rc, out, err = pt.run(["stats", "--json", "-d", cache])
    s = json.loads(out) if rc == 0 else {}
    return {c: s.get(c, 0) for c in ti.COUNTERS + STANDIN}


def mapped(outdir, lib):
    """Whether the process that wrote outdir/maps mapped the file lib."""
    st = os.stat(lib)
    for line in pt.read(os.path.join(outdir, "maps")).decode().splitlines():
        f = line.split()
        if len(f) >= 6 and int(f[4]) == st.st_ino and \
                os.major(st.st_dev) == int(f[3].split(":")[0], 16) and \
                os.minor(st.st_dev) == int(f[3].split(":")[1], 16):
            return True
    return False


def standin_mapped(outdir):
    return "/progcache-nvrtc-13." in pt.read(os.path.join(outdir, "maps")).decode()


def run_exec(cache, argv, log, env=None):
    """ti.run_exec, keeping PROGCACHE_INTERCEPT_STANDIN from the test's own
    environment unless env sets it (the test's can-fail switch)."""
    extra = dict(env or {})
    if "PROGCACHE_INTERCEPT_STANDIN" in os.environ:
        extra.setdefault("PROGCACHE_INTERCEPT_STANDIN", os.environ["PROGCACHE_INTERCEPT_STANDIN"])
    return ti.run_exec(cache, argv, log, extra)


def miss_hit_unmapped(tmp, label, argv, lib, env=None):
    """plain, MISS, HIT (NVRTC not mapped), then the control HIT with the
    stand-in off (NVRTC mapped). argv[1] is replaced by each run's OUTDIR."""
    cache = os.path.join(tmp, "cache-" + label)
    log = os.path.join(tmp, label + ".log")
    outs = {k: os.path.join(tmp, "%s-%s" % (label, k)) for k in ("plain", "miss", "hit", "off")}

    def argv_for(k):
        a = list(argv)
        a[1] = outs[k]
        return a

    rc, err = ti.run_plain(argv_for("plain"), env)
    check(rc == 0, label + ": the plain program runs", err)
    rc, err = run_exec(cache, argv_for("miss"), log, env)
    check(rc == 0, label + ": the MISS run", err)
    c = counters(cache)
    check(c["intercept_misses"] == 1 and c["stores"] >= 1, label + ": a MISS, stored", c)
    rc, err = run_exec(cache, argv_for("hit"), log, env)
    check(rc == 0, label + ": the HIT run", err)
    c = counters(cache)
    check(c["intercept_hits"] == 1 and c["intercept_misses"] == 1 and
          c["intercept_real_programs"] == 0, label + ": a HIT without a real compile", c)
    check(not mapped(outs["hit"], lib), label + ": the HIT never mapped " + lib)
    check(standin_mapped(outs["hit"]), label + ": the HIT ran on the stand-in")
    check(c["intercept_standin_hits"] == 1 and c["intercept_standin_version_loads"] == 1,
          label + ": counted: one HIT without NVRTC, one load for the version (the MISS)", c)
    text = pt.read(log).decode()
    check("through the stand-in" in text and "version from the cache's record" in text and
          "NVRTC not mapped (stand-in)" in text, label + ": the log names the route", text)
    ti.same_outputs(outs["plain"], outs["miss"], label + " (MISS)")
    ti.same_outputs(outs["plain"], outs["hit"], label + " (HIT)")
    # The control: the stand-in off, the same HIT maps NVRTC.
    rc, err = ti.run_exec(cache, argv_for("off"), log,
                          dict(env or {}, PROGCACHE_INTERCEPT_STANDIN="off"))
    c = counters(cache)
    check(rc == 0 and c["intercept_hits"] == 2 and c["intercept_standin_refused"] == 1,
          label + ": stand-in off: still a HIT, the refusal counted", (c, err))
    check(mapped(outs["off"], lib) and not standin_mapped(outs["off"]),
          label + ": stand-in off: the program maps NVRTC (the check sees it)")
    check("no stand-in, PROGCACHE_INTERCEPT_STANDIN=off" in pt.read(log).decode(),
          label + ": the log says why there was no stand-in")
    ti.same_outputs(outs["plain"], outs["off"], label + " (stand-in off)")
    return cache


def real_nvrtc():
    return os.path.realpath(os.path.join(ti.NVRTC_DIR, "libnvrtc.so.13"))


def test_linked(tmp):
    for kind in ("runpath", "rpath", "now"):
        miss_hit_unmapped(tmp, kind, [ti.client(kind), None, "--maps", "1"], real_nvrtc())


def test_dlopen(tmp):
    miss_hit_unmapped(tmp, "soname", [ti.client("dlopen"), None, "--maps", "1"], real_nvrtc(),
                      {"LD_LIBRARY_PATH": ti.NVRTC_DIR})
    miss_hit_unmapped(tmp, "path", [ti.client("dlopen"), None, "--lib", real_nvrtc(),
                                    "--maps", "1"], real_nvrtc())
    # The file by the name it has where the toolkit installs the soname as a
    # link (libnvrtc.so.13 -> libnvrtc.so.13.0.88, as on the GPU machine):
    # a program that resolved the link dlopens that name.
    versioned = os.path.join(tmp, "libnvrtc.so.13.0.99")
    os.symlink(real_nvrtc(), versioned)
    miss_hit_unmapped(tmp, "versioned", [ti.client("dlopen"), None, "--lib", versioned,
                                         "--maps", "1"], real_nvrtc())


def test_calls_left_to_nvrtc(tmp):
    """A HIT, then nvrtcGetNumSupportedArchs/nvrtcGetSupportedArchs (which
    the interceptor leaves to NVRTC): the stand-in loads NVRTC for them,
    they answer as without progcache, and the load is counted."""
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    argv = [ti.client("runpath"), None, "--archs", "1", "--maps", "1"]
    for out in ("miss", "hit"):
        argv[1] = os.path.join(tmp, out)
        rc, err = run_exec(cache, argv, log)
        check(rc == 0, "archs: the %s run" % out, err)
    argv[1] = os.path.join(tmp, "plain")
    ti.run_plain(argv)
    ti.same_outputs(os.path.join(tmp, "plain"), os.path.join(tmp, "hit"), "archs HIT")
    rcs = pt.read(os.path.join(tmp, "hit", "rc.txt")).decode()
    check("archs 0 0 " in rcs, "nvrtcGetSupportedArchs answered", rcs)
    c = counters(cache)
    check(c["intercept_hits"] == 1 and c["intercept_standin_hits"] == 1 and
          c["intercept_standin_loads"] == 1 and c["intercept_real_programs"] == 0,
          "the HIT was answered without NVRTC, which a later call then loaded", c)
    check(mapped(os.path.join(tmp, "hit"), real_nvrtc()), "NVRTC loaded for those calls")
    check("loaded behind the stand-in by a call to nvrtcGetNumSupportedArchs" in
          pt.read(log).decode(), "the log names the call that loaded NVRTC")


def test_missing_function(tmp):
    """With NVRTC 13.0, dlsym of 13.5's nvrtcGetTileIRSize is NULL, as
    without progcache: the stand-in exports exactly its NVRTC's list."""
    cache = os.path.join(tmp, "cache")
    for out in ("a", "b"):
        argv = [ti.client("dlopen"), os.path.join(tmp, out), "--lib", real_nvrtc(),
                "--extra", "nvrtcGetTileIRSize", "--maps", "1"]
        rc, err = run_exec(cache, argv, os.path.join(tmp, "log"))
        check(rc == 0, "the client asking for nvrtcGetTileIRSize", err)
    argv[1] = os.path.join(tmp, "plain")
    ti.run_plain(argv)
    rcs = pt.read(os.path.join(tmp, "b", "rc.txt"))
    check(b"nvrtcGetTileIRSize 11 0" in rcs and rcs == pt.read(os.path.join(tmp, "plain",
                                                                            "rc.txt")),
          "a function NVRTC 13.0 lacks is missing behind the stand-in too", rcs)
    check(standin_mapped(os.path.join(tmp, "b")) and
          not mapped(os.path.join(tmp, "b"), real_nvrtc()), "and that HIT mapped no NVRTC")


def test_wrong_record(tmp):
    """A record that names the wrong version for the file (here edited in
    place): the HIT path trusts it for the key, but a MISS stores nothing
    unless the NVRTC that compiled answers the key's version, and the
    record is mended; the program still gets NVRTC's own answers."""
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    argv = [ti.client("runpath"), os.path.join(tmp, "a"), "-arch=sm_90"]
    rc, err = run_exec(cache, argv, log)
    check(rc == 0, "the first run", err)
    rec = os.path.join(cache, "progcache", "nvrtc-%d" % os.geteuid())
    text = pt.read(rec).decode()
    check(text.startswith("13.0 ") and real_nvrtc() in text, "the stand-in wrote the record",
          text)
    with open(rec, "r+b") as f:
        f.write(b"13.9")
    stores = counters(cache)["stores"]
    argv = [ti.client("runpath"), os.path.join(tmp, "b"), "-arch=sm_86"]
    rc, err = run_exec(cache, argv, log)
    argv[1] = os.path.join(tmp, "plain")
    ti.run_plain(argv)
    c = counters(cache)
    check(rc == 0 and c["intercept_misses"] == 2 and c["stores"] == stores,
          "a MISS under a wrong record is not stored", c)
    check("is NVRTC 13.0, not the 13.9 its record says" in pt.read(log).decode(),
          "the log says why")
    ti.same_outputs(os.path.join(tmp, "plain"), os.path.join(tmp, "b"), "wrong record")
    check(pt.read(rec).startswith(b"13.0 "), "the record is mended")
    for out in ("c", "d"):
        argv[1] = os.path.join(tmp, out)
        rc, err = run_exec(cache, argv, log)
    c = counters(cache)
    check(c["intercept_misses"] == 3 and c["intercept_hits"] == 1 and c["stores"] == stores + 1,
          "after the mend: a MISS stored, then a HIT", c)
    ti.same_outputs(os.path.join(tmp, "plain"), os.path.join(tmp, "d"), "after the mend")


GONE = """import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
os.unlink(sys.argv[1])  # the toolkit upgraded under the running program
n = ctypes.c_int(-1)
rc = lib.nvrtcGetNumSupportedArchs(ctypes.byref(n))
lib.nvrtcGetErrorString.restype = ctypes.c_char_p
says = lib.nvrtcGetErrorString(11).decode()
sys.exit(0 if rc == 11 and says == "NVRTC_ERROR_INTERNAL_ERROR" else 5)
"""


def test_real_gone(tmp):
    """NVRTC's file removed between the program's dlopen and its first call
    that needs it: the stand-in cannot load it, and the call fails with
    NVRTC_ERROR_INTERNAL_ERROR, said once; the program is not ended."""
    d = os.path.join(tmp, "gone")
    os.makedirs(d)
    lib = os.path.join(d, "libnvrtc.so.13")
    shutil.copyfile(real_nvrtc(), lib)
    log = os.path.join(tmp, "gone.log")
    rc, err = run_exec(os.path.join(tmp, "cache-gone"), [sys.executable, "-c", GONE, lib], log)
    out = (pt.read(log).decode() if os.path.exists(log) else "") + err
    check(rc == 0, "the program runs on: NVRTC_ERROR_INTERNAL_ERROR (exit 0; 127 before, 5: "
          "another answer)", (rc, out))
    check("cannot reach" in out and "NVRTC_ERROR_INTERNAL_ERROR" in out, "said once", out)


def main():
    pt.need_bin()
    if not os.path.exists(ti.client("runpath")):
        pt.skip("the NVRTC clients are not built")
    if not os.path.exists(os.path.join(ti.NVRTC_DIR, "libnvrtc.so.13")):
        pt.skip("no libnvrtc.so.13 in %r" % ti.NVRTC_DIR)
    return pt.run_tests([test_linked, test_dlopen, test_calls_left_to_nvrtc,
                         test_missing_function, test_wrong_record, test_real_gone],
                        "test_intercept_standin",
                        prefix="progcache-standin-")


if __name__ == "__main__":
    sys.exit(main())
