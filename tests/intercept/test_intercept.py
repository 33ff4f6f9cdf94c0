#!/usr/bin/env python3
"""progcache exec (docs/INTERCEPT.md): programs that call NVRTC themselves,
unmodified, each run twice in fresh processes under `progcache exec`: the
first compiles (a MISS, stored), the second is a HIT that runs no real
compile (the counters and the interceptor's log say so) and answers every
call byte for byte as the plain program run without progcache does:
return codes and sizes of every output, the log, PTX, CUBIN, the lowered
name.

Clients (tests/intercept/nvrtc_client.c): linked with -lnvrtc (a RUNPATH
build, a DT_RPATH build, one bound at start-up with -z now; one built with
-fno-plt, left to NVRTC), dlopen by soname and by absolute path, dlsym
with RTLD_DEFAULT, eight threads at once. Also: two NVRTC builds in turn
(the toolkit's libnvrtc.so.13 and libnvrtc.alt.so.13: different build IDs,
different keys); a header on disk edited between runs (a MISS with the new
bytes, never a stale HIT); a header in memory and NVRTC_APPEND_FLAGS in
the key; a damaged bundle never replayed; an option no key covers (--time,
which writes a file) or one the interceptor does not know passed through;
a failed compile (not stored); PROGCACHE_INTERCEPT=off; the command's exit
status.

The small kernel's outputs are the same bytes in every plain run, so a HIT
is compared with the plain program's; NVRTC is not deterministic for every
program (internal-linkage names carry a per-compile hash), which is why a
header-heavy CUB kernel is in bench/bench_exec, not here. Each kind of
compile (PTX only, LTO-IR, debug, another architecture) is replayed too."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

CLIENTS = os.environ.get("PROGCACHE_CLIENT_DIR", "")
NVRTC_DIR = os.environ.get("PROGCACHE_NVRTC_DIR", "")
OUTS = ("rc.txt", "log", "ptx", "cubin", "ltoir", "optixir", "lowered")
COUNTERS = ("intercept_compiles", "intercept_hits", "intercept_misses",
            "intercept_pass_options", "intercept_pass_headers", "intercept_pass_callback",
            "intercept_pass_other", "intercept_real_programs",
            "intercept_failed", "stores")


def client(kind):
    return os.path.join(CLIENTS, "nvrtc_client_" + kind)


def env_for(extra=None):
    e = pt.tool_env({"PROGCACHE_INTERCEPT": "", "LD_AUDIT": ""})
    e.pop("PROGCACHE_INTERCEPT")
    e.pop("LD_AUDIT")
    e.update(extra or {})
    return e


def run_plain(argv, env=None):
    p = subprocess.run(argv, capture_output=True, env=env_for(env), timeout=300)
    return p.returncode, p.stderr.decode("utf-8", "replace")


def run_exec(cache, argv, log, env=None):
    e = env_for(env)
    e["PROGCACHE_LOG"] = "info:" + log  # the interceptor says what it did at info
    p = subprocess.run([pt.BIN, "exec", "-d", cache, "--"] + argv, capture_output=True, env=e,
                       timeout=300)
    return p.returncode, p.stderr.decode("utf-8", "replace")


def counters(cache):
    rc, out, err = pt.run(["stats", "--json", "-d", cache])
    if rc != 0:
        return {c: 0 for c in COUNTERS}
    s = json.loads(out)
    return {c: s.get(c, 0) for c in COUNTERS}


def same_outputs(a, b, what):
    for name in OUTS:
        for sub in sorted(os.listdir(a)):
            if sub.startswith("t") and os.path.isdir(os.path.join(a, sub)):
                same_outputs(os.path.join(a, sub), os.path.join(b, sub), what + "/" + sub)
        pa, pb = os.path.join(a, name), os.path.join(b, name)
        if os.path.exists(pa) or os.path.exists(pb):
            check(os.path.exists(pa) and os.path.exists(pb) and pt.read(pa) == pt.read(pb),
                  "%s: %s as the plain program's" % (what, name))


def miss_then_hit(tmp, label, argv, env=None, compiles=1):
    """The plain program, then two runs under exec; every answer compared."""
    cache = os.path.join(tmp, "cache-" + label)
    log = os.path.join(tmp, label + ".log")
    plain, first, second = (os.path.join(tmp, label + s) for s in ("-plain", "-miss", "-hit"))
    rc, err = run_plain([argv[0], plain] + argv[1:], env)
    check(rc == 0, label + ": the plain program runs", err)
    rc, err = run_exec(cache, [argv[0], first] + argv[1:], log, env)
    check(rc == 0, label + ": the first run under exec", err)
    after_miss = counters(cache)
    check(after_miss["intercept_misses"] == 1 and after_miss["intercept_hits"] == compiles - 1
          and after_miss["stores"] >= 1,
          label + ": the first run is a MISS, stored", after_miss)
    rc, err = run_exec(cache, [argv[0], second] + argv[1:], log, env)
    check(rc == 0, label + ": the second run under exec", err)
    after_hit = counters(cache)
    check(after_hit["intercept_misses"] == 1 and
          after_hit["intercept_hits"] == after_miss["intercept_hits"] + compiles and
          after_hit["intercept_real_programs"] == 0,
          label + ": the second run is a HIT without a real compile", after_hit)
    text = pt.read(log).decode()
    check(text.count("(replayed)") == 2 * compiles - 1 and text.count("(compiled)") == 1,
          label + ": the log says one compile, the rest replayed", text)
    same_outputs(plain, first, label + " (MISS)")
    same_outputs(plain, second, label + " (HIT)")
    return cache, text


def test_linked(tmp):
    for kind, tag in (("runpath", "RUNPATH"), ("rpath", "RPATH"), ("now", "BIND_NOW")):
        dyn = subprocess.run(["readelf", "-d", client(kind)], capture_output=True).stdout.decode()
        check("(%s)" % tag in dyn or (tag == "BIND_NOW" and "NOW" in dyn),
              "the %s client is a %s build" % (kind, tag), dyn)
        cache, text = miss_then_hit(tmp, kind, [client(kind)])
        check("reached by linked (DT_NEEDED)" in text, kind + ": the route is logged", text)
        rc, out, err = pt.run(["ls", "-d", cache])
        check(rc == 0 and "bundle" in out and "bad" not in out, "ls lists a bundle", out + err)
        rc, out, err = pt.run(["verify", "-d", cache])
        check(rc == 0, "verify accepts a bundle", out + err)


def test_no_plt(tmp):
    """A program built with -fno-plt calls NVRTC through addresses the loader
    never reports: it runs on NVRTC, whole, never with a program of ours."""
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    for out in ("n0", "n1"):
        rc, err = run_exec(cache, [client("noplt"), os.path.join(tmp, out)], log)
        check(rc == 0, "the -fno-plt client under exec", err)
    run_plain([client("noplt"), os.path.join(tmp, "np")])
    same_outputs(os.path.join(tmp, "np"), os.path.join(tmp, "n1"), "-fno-plt")
    check(counters(cache)["intercept_compiles"] == 0, "-fno-plt: nothing intercepted")
    check("left to NVRTC" in pt.read(log).decode(), "-fno-plt: the log says why")


def test_dlopen(tmp):
    _, text = miss_then_hit(tmp, "soname", [client("dlopen")],
                            {"LD_LIBRARY_PATH": NVRTC_DIR})
    check("dlopen by name, dlsym" in text, "soname: the route is logged", text)
    path = os.path.realpath(os.path.join(NVRTC_DIR, "libnvrtc.so.13"))
    _, text = miss_then_hit(tmp, "path", [client("dlopen"), "--lib", path])
    check("dlopen by path, dlsym" in text, "path: the route is logged", text)
    # Loaded global, looked up with dlsym(RTLD_DEFAULT, ...) (cuda-bindings).
    _, text = miss_then_hit(tmp, "default", [client("dlopen"), "--lib", "default:" + path])
    check("dlsym" in text, "RTLD_DEFAULT: reached through dlsym", text)


def test_threads(tmp):
    # Eight threads compile one program at once: one compiles, seven wait
    # (single-flight) and replay; the next process replays all eight.
    miss_then_hit(tmp, "threads", [client("runpath"), "--threads", "8", "-arch=sm_80"],
                  compiles=8)


def test_option_variants(tmp):
    """What each kind of compile yields, replayed as NVRTC gives it: PTX only
    (compute_90: a CUBIN of size 0 with success), LTO-IR (-dlto), debug
    and relocatable code, another architecture with line info."""
    for i, opts in enumerate((["-arch=compute_90"], ["-arch=sm_90", "-dlto"],
                              ["-arch=sm_90", "-rdc=true", "-G"],
                              ["-arch=sm_86", "-lineinfo", "--use_fast_math"])):
        miss_then_hit(tmp, "v%d" % i, [client("runpath")] + opts)


def test_explained_miss(tmp):
    """PROGCACHE_EXPLAIN=1 under exec: a compile that differs from a stored
    bundle by one option is explained by that option (the bundle's inputs
    are in the explain index)."""
    cache = os.path.join(tmp, "cache-explain")
    log = os.path.join(tmp, "explain.log")
    argv = [client("runpath"), os.path.join(tmp, "e1"), "-arch=sm_90", "-DTILE=16"]
    rc, err = run_exec(cache, argv, log)
    check(rc == 0, "explain: first compile", err)
    argv[1:] = [os.path.join(tmp, "e2"), "-arch=sm_90", "-DTILE=32"]
    rc, err = run_exec(cache, argv, log, {"PROGCACHE_EXPLAIN": "1"})
    said = pt.read(log).decode() + err
    check(rc == 0 and "-DTILE=32 was -DTILE=16" in said, "explain: the option named", said)


def test_two_libraries(tmp):
    alt = os.path.join(NVRTC_DIR, "libnvrtc.alt.so.13")
    if not os.path.exists(alt):
        print("no %s: two builds of NVRTC not tried" % alt)
        return
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    main = os.path.realpath(os.path.join(NVRTC_DIR, "libnvrtc.so.13"))
    for i, lib in enumerate((main, alt, alt)):
        rc, err = run_exec(cache, [client("dlopen"), os.path.join(tmp, "o%d" % i), "--lib", lib],
                           log)
        check(rc == 0, "run %d with %s" % (i, lib), err)
    c = counters(cache)
    check(c["intercept_misses"] == 2 and c["intercept_hits"] == 1,
          "another NVRTC build is another key: not served the first build's bundle", c)
    rc, err = run_plain([client("dlopen"), os.path.join(tmp, "plain-alt"), "--lib", alt])
    same_outputs(os.path.join(tmp, "plain-alt"), os.path.join(tmp, "o2"), "alt HIT")


HEADER_SRC = ('#include "tile.h"\n'
              'extern "C" __global__ void k(float *x) { x[threadIdx.x] *= TILE; }\n'
              'template <typename T> __global__ void scale(T *x, T a) { x[0] *= a; }\n')


def test_header_on_disk(tmp):
    inc = os.path.join(tmp, "inc")
    os.makedirs(inc)
    src = os.path.join(tmp, "k.cu")
    pt.write(src, HEADER_SRC)
    hdr = os.path.join(inc, "tile.h")
    pt.write(hdr, "#define TILE 3.0f\n")
    argv = [client("runpath"), None, "--source", src, "-arch=sm_90", "-I" + inc]
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")

    def go(out, plain=False):
        a = list(argv)
        a[1] = os.path.join(tmp, out)
        rc, err = run_plain(a) if plain else run_exec(cache, a, log)
        check(rc == 0, "header run " + out, err)
        return os.path.join(tmp, out)

    go("p1", plain=True)
    go("m1")
    go("h1")
    c = counters(cache)
    check(c["intercept_misses"] == 1 and c["intercept_hits"] == 1, "a header: MISS then HIT", c)
    same_outputs(os.path.join(tmp, "p1"), os.path.join(tmp, "h1"), "header HIT")
    # Edited, same size, within the same second: never the stale bundle.
    pt.write(hdr, "#define TILE 5.0f\n")
    go("p2", plain=True)
    go("m2")
    c = counters(cache)
    check(c["intercept_misses"] == 2, "an edited header is a MISS", c)
    same_outputs(os.path.join(tmp, "p2"), os.path.join(tmp, "m2"), "edited header")
    check(pt.read(os.path.join(tmp, "m2", "ptx")) != pt.read(os.path.join(tmp, "h1", "ptx")),
          "the edit shows in the PTX")
    go("h2")
    same_outputs(os.path.join(tmp, "p2"), os.path.join(tmp, "h2"), "edited header HIT")


def test_quoted_include_search(tmp):
    """A quoted include without -I: NVRTC looks in the program name's
    directory, and for the default name in the working directory. An edit
    there is a MISS with the new bytes."""
    sub = os.path.join(tmp, "sub")
    os.makedirs(sub)
    src = os.path.join(tmp, "k.cu")
    pt.write(src, HEADER_SRC)
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    cases = (("named", ["--name", os.path.join(sub, "k.cu")], sub, None),
             ("default", ["--name", "-"], tmp, tmp))
    for label, name, where, cwd in cases:
        for step, value in (("1", "3.0f"), ("2", "3.0f"), ("3", "6.0f")):
            pt.write(os.path.join(where, "tile.h"), "#define TILE %s\n" % value)
            out = os.path.join(tmp, label + step)
            argv = [client("runpath"), out, "--source", src] + name + ["-arch=sm_90"]
            e = env_for({"PROGCACHE_LOG": "info:" + log})
            p = subprocess.run([pt.BIN, "exec", "-d", cache, "--"] + argv, capture_output=True,
                               env=e, cwd=cwd, timeout=300)
            check(p.returncode == 0, "%s run %s" % (label, step), p.stderr)
            subprocess.run(argv[:1] + [out + "p"] + argv[2:], capture_output=True,
                           env=env_for(), cwd=cwd, timeout=300)
            same_outputs(out + "p", out, "%s run %s" % (label, step))
    c = counters(cache)
    check(c["intercept_misses"] == 4 and c["intercept_hits"] == 2,
          "quoted includes found as NVRTC finds them: an edit is a MISS", c)


def test_memory_header_and_environment(tmp):
    """A header in memory is in the key (another text: a MISS with its
    bytes); so are the NVRTC_* variables (NVRTC_APPEND_FLAGS adds options)."""
    src = os.path.join(tmp, "k.cu")
    pt.write(src, HEADER_SRC)
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    runs = (("a", "#define TILE 2.0f\n", {}), ("a2", "#define TILE 2.0f\n", {}),
            ("b", "#define TILE 7.0f\n", {}),
            ("c", "#define TILE 7.0f\n", {"NVRTC_APPEND_FLAGS": "-DEXTRA=1"}))
    for out, text, env in runs:
        hdr = os.path.join(tmp, out + ".h")
        pt.write(hdr, text)
        argv = [client("runpath"), None, "--source", src, "--mem-header", "tile.h", hdr,
                "-arch=sm_90"]
        argv[1] = os.path.join(tmp, out)
        rc, err = run_exec(cache, argv, log, env)
        check(rc == 0, "memory header run " + out, err)
        argv[1] = os.path.join(tmp, out + "-plain")
        run_plain(argv, env)
        same_outputs(os.path.join(tmp, out + "-plain"), os.path.join(tmp, out), out)
    c = counters(cache)
    check(c["intercept_misses"] == 3 and c["intercept_hits"] == 1,
          "in-memory headers and NVRTC_APPEND_FLAGS are in the key", c)


def test_damaged_bundle(tmp):
    """A bundle whose bytes were damaged is never replayed: the compile runs
    again and the caller gets NVRTC's answers."""
    cache, _ = miss_then_hit(tmp, "dmg", [client("runpath")])
    entries = pt.entry_files(cache)
    for name, data in entries.items():
        if data[:8] == b"\x89PCBNDL\n":
            path = pt.entry_path(cache, name)
            os.chmod(path, 0o644)
            bad = bytearray(data)
            bad[len(bad) // 2] ^= 0xff
            pt.write(path, bytes(bad))
    rc, err = run_exec(cache, [client("runpath"), os.path.join(tmp, "after")],
                       os.path.join(tmp, "log2"))
    check(rc == 0, "a run over a damaged bundle", err)
    same_outputs(os.path.join(tmp, "dmg-plain"), os.path.join(tmp, "after"), "damaged bundle")
    c = counters(cache)
    check(c["intercept_misses"] == 2, "a damaged bundle is a MISS", c)


def test_pass_through(tmp):
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    for i in range(2):
        csv = os.path.join(tmp, "time%d.csv" % i)
        rc, err = run_exec(cache, [client("runpath"), os.path.join(tmp, "o%d" % i),
                                   "-arch=sm_90", "--time=" + csv], log)
        check(rc == 0 and os.path.exists(csv), "--time passes through and writes its file", err)
    rc, err = run_exec(cache, [client("runpath"), os.path.join(tmp, "u"), "-arch=sm_90",
                               "--an-option-nobody-knows"], log)
    c = counters(cache)
    check(c["intercept_pass_options"] == 3 and c["intercept_misses"] == 0 and
          c["stores"] == 0, "uncoverable options pass through, counted, nothing stored", c)
    rc, err = run_plain([client("runpath"), os.path.join(tmp, "up"), "-arch=sm_90",
                         "--an-option-nobody-knows"])
    same_outputs(os.path.join(tmp, "up"), os.path.join(tmp, "u"), "an unknown option")


def test_pass_callback_and_headers(tmp):
    """A flow callback watches a real compile: it passes through, every run,
    and the callback is called as without progcache. A computed #include
    the scanner cannot resolve passes through too."""
    cache = os.path.join(tmp, "cache")
    log = os.path.join(tmp, "log")
    for i in range(2):
        rc, err = run_exec(cache, [client("runpath"), os.path.join(tmp, "f%d" % i), "--flow", "1",
                                   "-arch=sm_90"], log)
        check(rc == 0, "a program with a flow callback", err)
    run_plain([client("runpath"), os.path.join(tmp, "fp"), "--flow", "1", "-arch=sm_90"])
    same_outputs(os.path.join(tmp, "fp"), os.path.join(tmp, "f1"), "a flow callback")
    src = os.path.join(tmp, "computed.cu")
    pt.write(src, '#define HDR "tile.h"\n#include HDR\n' + HEADER_SRC.split("\n", 1)[1])
    pt.write(os.path.join(tmp, "tile.h"), "#define TILE 4.0f\n")
    argv = [client("runpath"), None, "--source", src, "-arch=sm_90", "-I" + tmp]
    for out in ("c0", "c1"):
        argv[1] = os.path.join(tmp, out)
        rc, err = run_exec(cache, argv, log)
        check(rc == 0, "a computed include", err)
    argv[1] = os.path.join(tmp, "cp")
    run_plain(argv)
    same_outputs(os.path.join(tmp, "cp"), os.path.join(tmp, "c1"), "a computed include")
    c = counters(cache)
    check(c["intercept_pass_callback"] == 2 and c["intercept_pass_headers"] == 2 and
          c["intercept_misses"] == 0 and c["stores"] == 0,
          "a flow callback and a computed include pass through, counted", c)


def test_failed_compile(tmp):
    src = os.path.join(tmp, "bad.cu")
    pt.write(src, "__global__ void k() { this is not C++; }\n")
    cache = os.path.join(tmp, "cache")
    for i in range(2):
        rc, err = run_exec(cache, [client("runpath"), os.path.join(tmp, "o%d" % i),
                                   "--source", src], os.path.join(tmp, "log"))
    run_plain([client("runpath"), os.path.join(tmp, "p"), "--source", src])
    c = counters(cache)
    check(c["intercept_failed"] == 2 and c["intercept_misses"] == 2 and c["stores"] == 0,
          "a failed compile is not stored", c)
    same_outputs(os.path.join(tmp, "p"), os.path.join(tmp, "o1"), "a failed compile")


def test_off_and_status(tmp):
    cache = os.path.join(tmp, "cache")
    rc, err = run_exec(cache, [client("runpath"), os.path.join(tmp, "o")], "stderr",
                       {"PROGCACHE_INTERCEPT": "off"})
    c = counters(cache)
    check(rc == 0 and c["intercept_compiles"] == 0 and "progcache-intercept" not in err,
          "PROGCACHE_INTERCEPT=off: nothing intercepted", (c, err))
    rc, err = run_exec(cache, ["sh", "-c", "exit 7"], "")
    check(rc == 7, "the command's exit status is passed through", (rc, err))
    rc, err = run_exec(cache, [os.path.join(tmp, "no-such-program")], "")
    check(rc == 127 and "no-such-program" in err, "a command that cannot run: 127", (rc, err))
    rc, out, err = pt.run(["exec", "--where"])
    check(rc == 0 and out.strip().endswith("libprogcache-intercept.so"), "exec --where", err)


def main():
    pt.need_bin()
    if not os.path.exists(client("runpath")):
        pt.skip("the NVRTC clients are not built")
    if not os.path.exists(os.path.join(NVRTC_DIR, "libnvrtc.so.13")):
        pt.skip("no libnvrtc.so.13 in %r" % NVRTC_DIR)
    return pt.run_tests([test_linked, test_no_plt, test_dlopen, test_threads, test_option_variants,
                         test_explained_miss, test_two_libraries,
                         test_header_on_disk, test_quoted_include_search,
                         test_memory_header_and_environment,
                         test_damaged_bundle, test_pass_through, test_pass_callback_and_headers, test_failed_compile,
                         test_off_and_status], "test_intercept", prefix="progcache-intercept-")


if __name__ == "__main__":
    sys.exit(main())
