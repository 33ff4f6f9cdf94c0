#!/usr/bin/env python3
"""`progcache key` from the command line: the cuda.core vectors through the
CLI, stdin, refusals (exit 2, option named on stderr), --digest-file digests
(checked against the recipe in docs/KEY.md), --help and usage errors.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(optional: without it the vector part is skipped, the rest still runs)."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
REF = os.environ.get("PROGCACHE_REFERENCE_DIR")


def run(args, stdin=None, env=None):
    full = dict(os.environ, **env) if env else None
    p = subprocess.run([BIN, "key"] + args, input=stdin, capture_output=True, env=full)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def is_key(text):
    return len(text) == 65 and text.endswith("\n") and all(c in "0123456789abcdef" for c in text[:64])


def vector_args(v, src_path):
    args = ["--target", v["target"], "--name", v["options_name"], "--nvrtc-version", "13.0"]
    tags = {n[:2] for n in v["name_expressions"]}
    assert len(tags) <= 1, "mixed tags cannot be expressed"
    for n in v["name_expressions"]:
        args += ["--name-expression", n[2:]]
    if tags == {"b:"}:
        args.append("--name-expressions-bytes")
    if v["extra_digest_hex"] is not None:
        args += ["--extra-digest", v["extra_digest_hex"]]
    return args + [src_path, "--"] + v["nvrtc_argv"]


def test_vectors(tmp):
    if not REF or not os.path.exists(os.path.join(REF, "cuda-core-key-vectors.jsonl")):
        print("SKIPPED part: no reference vectors (PROGCACHE_REFERENCE_DIR)")
        return
    n = 0
    with open(os.path.join(REF, "cuda-core-key-vectors.jsonl"), encoding="utf-8") as f:
        for line in f:
            v = json.loads(line)
            if "key_hex" not in v:
                continue
            src = os.path.join(tmp, "vec%d.cu" % n)
            with open(src, "wb") as s:
                s.write(v["code"].encode("utf-8"))
            rc, out, err = run(vector_args(v, src))
            check(rc == 0 and out == v["key_hex"] + "\n",
                  "vector %d (%s): rc=%d out=%r err=%r" % (n, v["options_in"], rc, out, err))
            # The same through stdin.
            args = vector_args(v, "-")
            rc, out2, err = run(args, stdin=v["code"].encode("utf-8"))
            check(rc == 0 and out2 == out, "vector %d via stdin: %r %r" % (n, out2, err))
            n += 1
    check(n >= 10, "read %d vectors" % n)
    print("%d vectors reproduced through the CLI" % n)


def frame(label, payload):
    return label.encode() + len(payload).to_bytes(8, "big") + payload


def test_headers(tmp):
    a = os.path.join(tmp, "a.h")
    b = os.path.join(tmp, "b.h")
    src = os.path.join(tmp, "k.cu")
    with open(a, "wb") as f:
        f.write(b"#define A 1\n")
    with open(b, "wb") as f:
        f.write("// \u00e9\n#define B 2\n".encode())
    with open(src, "wb") as f:
        f.write(b'#include "a.h"\n__global__ void k() {}\n')
    # The digest over files, from the recipe in docs/KEY.md.
    h = hashlib.sha256()
    h.update(frame("digest_files", b"1") + frame("file_count", b"2"))
    for p in (a, b):
        h.update(frame("path", p.encode()) + frame("bytes", open(p, "rb").read()))
    digest = h.hexdigest()
    opts = ["--", "-arch=sm_90", "-I" + tmp]
    rc, via_header, err = run(["--nvrtc-version", "13.0", "--digest-file", a, "--digest-file", b, src] + opts)
    check(rc == 0 and is_key(via_header), "--digest-file: rc=%d %r" % (rc, err))
    rc, via_digest, err = run(["--nvrtc-version", "13.0", "--extra-digest", digest, src] + opts)
    check(rc == 0 and via_digest == via_header, "--digest-file equals --extra-digest of the recipe")
    rc, swapped, err = run(["--nvrtc-version", "13.0", "--digest-file", b, "--digest-file", a, src] + opts)
    check(rc == 0 and swapped != via_header, "file order changes the key")
    rc, out, err = run(["--digest-file", a, "--extra-digest", digest, src])
    check(rc == 2 and "--digest-file" in err and "--extra-digest" in err,
          "--digest-file with --extra-digest: %r" % err)
    missing = os.path.join(tmp, "missing.h")
    rc, out, err = run(["--digest-file", missing, src] + opts)
    check(rc == 3 and missing in err and out == "", "--digest-file of a missing file: rc=%d %r" % (rc, err))
    # --header is now a header in memory, NAME=FILE; a bare FILE says so.
    rc, out, err = run(["--header", a, src] + opts)
    check(rc == 2 and "NAME=FILE" in err and "--digest-file" in err, "--header FILE: %r" % err)


def test_refusals(tmp):
    src = os.path.join(tmp, "r.cu")
    with open(src, "wb") as f:
        f.write(b"__global__ void k() {}\n")
    # Precompiled headers: only a digest covers them.
    for opts in (["--pch"], ["--use-pch=x.pch"], ["-pch-dir=d"]):
        rc, out, err = run([src, "--", "-arch=sm_90"] + opts)
        check(rc == 2 and out == "" and err.startswith("progcache key: ")
              and '"%s"' % opts[0] in err and "extra digest" in err,
              "refusal of %s: rc=%d %r" % (opts, rc, err))
        rc, out, err = run(["--extra-digest", "00ff", src, "--", "-arch=sm_90"] + opts)
        check(rc == 0 and is_key(out), "%s accepted with a digest: %r" % (opts, err))
    # Include paths and pre-includes: the headers they reach are found and
    # covered (tests/headers/test_tool_headers.py); a pre-include that is
    # nowhere is refused, naming it.
    rc, plain, err = run([src, "--", "-arch=sm_90"])
    for opts in (["--include-path=/usr/include"], ["-I", "/usr/include"]):
        rc, out, err = run([src, "--", "-arch=sm_90"] + opts)
        check(rc == 0 and is_key(out) and out != plain, "%s covered: rc=%d %r" % (opts, rc, err))
    for opts in (["--pre-include=a.h"], ["-include", "a.h"]):
        rc, out, err = run([src, "--", "-arch=sm_90"] + opts)
        check(rc == 2 and out == "" and '"a.h"' in err and "extra digest" in err,
              "missing pre-include %s refused: rc=%d %r" % (opts, rc, err))
        rc, out, err = run(["--extra-digest", "00ff", src, "--", "-arch=sm_90"] + opts)
        check(rc == 0 and is_key(out), "%s accepted with a digest: %r" % (opts, err))
    for opt in ("--create-pch=x.pch", "-time=t.csv", "--fdevice-time-trace=t.json"):
        rc, out, err = run(["--extra-digest", "00ff", src, "--", "-arch=sm_90", opt])
        check(rc == 2 and '"%s"' % opt in err and "side effect" in err,
              "side effect %s refused even with a digest: %r" % (opt, err))
    for opt in ("--pch-verbose=true", "--pch-messages=false", "--instantiate-templates-in-pch=true"):
        rc, out, err = run([src, "--", "-arch=sm_90", opt])
        check(rc == 0 and is_key(out), "%s accepted: %r" % (opt, err))
    # A name with a directory part: "quoted" includes are resolved from
    # there, and covered; without any, the headers digest of nothing.
    rc, out, err = run(["--name", "dir/k.cu", src])
    check(rc == 0 and is_key(out), "name with a directory covered: %r" % err)
    rc, out, err = run(["--name", "dir/k.cu", "--extra-digest", "", src])
    check(rc == 0 and is_key(out), "name with a directory and an (empty) digest: %r" % err)


def test_record(tmp):
    """On a node without NVRTC, the cache's record of the NVRTC its entries
    were compiled with (what `progcache import` brings with a bundle) gives
    the version, as it does for compile-or-load: --nvrtc-version is not
    needed (issue 35)."""
    src = os.path.join(tmp, "rec.cu")
    with open(src, "w") as f:
        f.write('extern "C" __global__ void k(float *a) { a[0] = 1; }\n')
    cache = os.path.join(tmp, "bundle-cache")
    os.makedirs(os.path.join(cache, "progcache"))
    record = os.path.join(cache, "progcache", "nvrtc-%d" % os.getuid())
    with open(record, "w") as f:  # the line an exporter's NVRTC 12.9 left
        f.write("12.9 1000 1700000000.000000000 /opt/cuda-12.9/lib/libnvrtc.so.12\n")
    os.chmod(record, 0o644)
    none = {"PROGCACHE_NVRTC_LIBRARY": os.path.join(tmp, "no-such-libnvrtc.so"),
            "PROGCACHE_NVRTC_VERSION": "", "PROGCACHE_DIR": os.path.join(tmp, "nowhere")}
    opts = [src, "--", "-arch=sm_90"]
    rc, want, err = run(["--nvrtc-version", "12.9"] + opts)
    check(rc == 0 and is_key(want), "key for 12.9: %r" % err)
    rc, out, err = run(["-d", cache] + opts, env=none)
    check(rc == 0 and out == want, "no NVRTC: the record's 12.9 keys, -d DIR: %r" % err)
    rc, out, err = run(opts, env=dict(none, PROGCACHE_DIR=cache))
    check(rc == 0 and out == want, "no NVRTC: the default directory's record: %r" % err)
    # Without a record nothing is guessed: the message says what to do.
    rc, out, err = run(opts, env=none)
    check(rc == 3 and "PROGCACHE_NVRTC_VERSION" in err, "no NVRTC, no record: 3: %r" % err)
    check(not os.path.exists(os.path.join(tmp, "nowhere")), "key creates no cache directory")
    # A FIFO as the NVRTC library: refused at once, never opened to wait
    # for a writer (dlopen opens without O_NONBLOCK).
    fifo = os.path.join(tmp, "libnvrtc-fifo.so")
    os.mkfifo(fifo)
    try:
        p = subprocess.run([BIN, "key"] + opts, capture_output=True, timeout=20,
                           env=dict(os.environ, **dict(none, PROGCACHE_NVRTC_LIBRARY=fifo)))
        err = p.stderr.decode("utf-8", "replace")
        check(p.returncode == 3 and "not a regular file (a FIFO)" in err,
              "a FIFO as NVRTC: refused, said: %r" % err)
    except subprocess.TimeoutExpired:
        check(False, "a FIFO as NVRTC: progcache key waited for a writer")


def test_stdin(tmp):
    # Large, binary, with NUL bytes: read whole, as bytes.
    data = bytes((i * 131 + 7) % 256 for i in range(3 * 1024 * 1024 + 5))
    path = os.path.join(tmp, "big.cu")
    with open(path, "wb") as f:
        f.write(data)
    rc1, out1, err1 = run(["--nvrtc-version", "13.0", path])
    rc2, out2, err2 = run(["--nvrtc-version", "13.0", "-"], stdin=data)
    check(rc1 == 0 and rc2 == 0 and out1 == out2 and is_key(out1), "stdin equals file: %r %r" % (err1, err2))
    rc3, out3, _ = run(["--nvrtc-version", "13.0", "-"], stdin=data[:-1])
    check(rc3 == 0 and out3 != out1, "last byte of stdin counts")
    rc, out, err = run(["--nvrtc-version", "13.0", "-"], stdin=b"")
    check(rc == 0 and is_key(out), "empty stdin: %r" % err)


def test_usage(tmp):
    src = os.path.join(tmp, "u.cu")
    with open(src, "wb") as f:
        f.write(b"__global__ void k() {}\n")
    p = subprocess.run([BIN, "key", "--help"], capture_output=True, text=True)
    check(p.returncode == 0 and "usage: progcache key" in p.stdout and "--nvrtc-version" in p.stdout
          and p.stderr == "", "--help")
    cases = [
        (["--target", "fatbin", src], "fatbin"),
        (["--target"], "--target needs a value"),
        ([], "SOURCE_FILE"),
        (["--bogus", src], "--bogus"),
        ([src, src], "more than one source"),
        (["--extra-digest", "xyz", src], "not hex"),
        (["--extra-digest", "abc", src], "not hex"),
        (["--nvrtc-version", "13", src], "MAJOR.MINOR"),
        (["--nvrtc-version", "0.0", src], "MAJOR.MINOR"),
        (["--nvrtc-version", "13.-1", src], "MAJOR.MINOR"),
    ]
    for args, needle in cases:
        rc, out, err = run(args)
        check(rc == 2 and out == "" and err.startswith("progcache key: ") and needle in err,
              "usage error %s: rc=%d %r" % (args, rc, err))
    rc, out, err = run([os.path.join(tmp, "nope.cu")])
    check(rc == 3 and "nope.cu" in err, "missing source: rc=%d %r" % (rc, err))
    # Defaults: cubin, default_program, the loaded NVRTC.
    rc, plain, _ = run([src, "--", "-arch=sm_90"])
    rc2, explicit, _ = run(["--target", "cubin", "--name", "default_program", src, "--", "-arch=sm_90"])
    rc3, ptx, _ = run(["--target=ptx", src, "--", "-arch=sm_90"])
    check(rc == 0 and rc2 == 0 and plain == explicit and is_key(plain), "defaults")
    check(rc3 == 0 and ptx != plain, "--target=ptx form")
    # Flags may follow SOURCE_FILE; after "--" everything is an NVRTC option.
    rc, after, _ = run([src, "--target", "cubin", "--", "-arch=sm_90"])
    check(rc == 0 and after == plain, "flags after SOURCE_FILE")
    rc, dashdash, err = run([src, "--", "--target", "ptx"])
    check(rc == 0 and dashdash != ptx and is_key(dashdash), "options after -- are NVRTC's: %r" % err)


def main():
    if not BIN or not os.path.exists(BIN):
        print("PROGCACHE_BIN is not set to the progcache tool")
        return 1
    with tempfile.TemporaryDirectory(prefix="progcache-tool-key-") as tmp:
        test_vectors(tmp)
        test_headers(tmp)
        test_refusals(tmp)
        test_stdin(tmp)
        test_usage(tmp)
        test_record(tmp)
    return pt.finish("test_tool_key")


if __name__ == "__main__":
    sys.exit(main())
