#!/usr/bin/env python3
"""Headers through the progcache command (docs/KEY.md, docs/CLI.md):

- the headers digest recipe computed here in Python, as a cuda.core program
  would, gives the key `progcache key` prints for headers in memory
  (--header NAME=FILE) and for a header file read from the working
  directory;
- `progcache key` and `progcache warm` derive the same key for the same
  inputs: headers in memory, and header files included quoted from the
  working directory, through -I, by absolute path and pre-included;
- `progcache warm` run twice after a header edit reports `compiled`, then
  `cached`, under a new key; never `cached` under the old one;
- a computed include is refused by both, naming it and its file;
- `progcache ls` lists a templated kernel's name expression with its
  lowered name (text and --json), and the header manifest as a manifest;
  an entry without name expressions listed right after one with them shows
  none (it showed the names of the entry before, issue 24).
"""

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


def run(args, cwd=None):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, cwd=cwd, timeout=300)
    return p.returncode, p.stdout, p.stderr


# ---- the recipe (docs/KEY.md, "The headers digest") -----------------------

def frame(label, payload):
    return label.encode() + len(payload).to_bytes(8, "big") + payload


def headers_digest(memory=(), files=(), toolkit=b"", extra=None):
    """memory: (name, bytes) pairs; files: (path, bytes) pairs in the order
    the scanner finds them; toolkit: the identity, or b"" without one."""
    h = hashlib.sha256(frame("headers", b"1"))
    h.update(frame("memory_count", str(len(memory)).encode()))
    for name, content in sorted(memory, key=lambda m: m[0].encode()):
        h.update(frame("memory_name", name.encode()) + frame("memory_bytes", content))
    h.update(frame("file_count", str(len(files)).encode()))
    for path, content in files:
        h.update(frame("file_path", path.encode()) + frame("file_sha256", hashlib.sha256(content).digest()))
    h.update(frame("toolkit", toolkit))
    if extra is not None:
        h.update(frame("extra_digest", extra))
    return h.digest()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def key(args, cwd):
    rc, out, err = run(["key", "--nvrtc-version", "13.0"] + args, cwd=cwd)
    check(rc == 0, "key %r: rc=%d %s" % (args, rc, err))
    return out.strip()


def test_recipe(tmp):
    write(os.path.join(tmp, "tile.h"), "constexpr int TILE = 16;\n")
    write(os.path.join(tmp, "act.h"), "#pragma once\n")
    write(os.path.join(tmp, "k.cu"), '#include "tile.h"\n#include <act.h>\n__global__ void k() {}\n')
    opts = ["--", "-arch=sm_90"]
    got = key(["--header", "tile.h=tile.h", "--header", "act.h=act.h", "k.cu"] + opts, tmp)
    digest = headers_digest(memory=[("tile.h", b"constexpr int TILE = 16;\n"),
                                    ("act.h", b"#pragma once\n")])
    want = key(["--extra-digest", digest.hex(), "k.cu"] + opts, tmp)
    check(got == want, "headers in memory: the Python recipe gives the key (%s, %s)" % (got, want))
    # A header file from the working directory: path and SHA-256.
    write(os.path.join(tmp, "d.cu"), '#include "disk.h"\n__global__ void k() {}\n')
    write(os.path.join(tmp, "disk.h"), "#define D 1\n")
    got = key(["d.cu"] + opts, tmp)
    digest = headers_digest(files=[("disk.h", b"#define D 1\n")])
    want = key(["--extra-digest", digest.hex(), "d.cu"] + opts, tmp)
    check(got == want, "a header file: the Python recipe gives the key (%s, %s)" % (got, want))


def test_combination(tmp):
    """--header with --extra-digest: the caller's digest is the recipe's
    last field. Checked against a source without includes, whose plain key
    with the combined digest is computable here."""
    write(os.path.join(tmp, "m.h"), "// m\n")
    write(os.path.join(tmp, "n.cu"), "__global__ void k() {}\n")
    opts = ["--", "-arch=sm_90"]
    got = key(["--header", "m.h=m.h", "--extra-digest", "abcd", "n.cu"] + opts, tmp)
    digest = headers_digest(memory=[("m.h", b"// m\n")], extra=bytes.fromhex("abcd"))
    want = key(["--extra-digest", digest.hex(), "n.cu"] + opts, tmp)
    check(got == want, "headers in memory and --extra-digest combine as documented")


def warm(tmp, cache, lines):
    manifest = os.path.join(tmp, "manifest.txt")
    write(manifest, "\n".join(lines) + "\n")
    rc, out, err = run(["warm", "--dir", cache, "--jobs", "2", "--json", manifest], cwd=tmp)
    check(rc == 0, "warm: rc=%d %s" % (rc, err))
    try:
        return [(p["status"], p["key"]) for p in json.loads(out)["programs"]]
    except ValueError:
        check(False, "warm --json output: %r" % out)
        return []


def test_key_equals_warm(tmp):
    cache = os.path.join(tmp, "cache")
    os.mkdir(os.path.join(tmp, "inc"))
    body = "extern \"C\" __global__ void k(int *a) { a[0] = V; }\n"
    write(os.path.join(tmp, "cwd.h"), "#define V 1\n")
    write(os.path.join(tmp, "inc", "i.h"), "#define V 2\n")
    write(os.path.join(tmp, "abs.h"), "#define V 3\n")
    write(os.path.join(tmp, "pre.h"), "#define V 4\n")
    write(os.path.join(tmp, "mem.h"), "#define V 5\n")
    abs_h = os.path.join(tmp, "abs.h")
    write(os.path.join(tmp, "a.cu"), '#include "cwd.h"\n' + body)
    write(os.path.join(tmp, "b.cu"), "#include <i.h>\n" + body)
    write(os.path.join(tmp, "c.cu"), '#include "%s"\n' % abs_h + body)
    write(os.path.join(tmp, "d.cu"), body)
    write(os.path.join(tmp, "e.cu"), '#include "mem.h"\n' + body)
    programs = [
        ("a.cu", [], ["-arch=sm_90"], "cwd.h"),
        ("b.cu", [], ["-arch=sm_90", "-Iinc"], os.path.join("inc", "i.h")),
        ("c.cu", [], ["-arch=sm_90"], "abs.h"),
        ("d.cu", [], ["-arch=sm_90", "--pre-include=pre.h"], "pre.h"),
        ("e.cu", ["--header", "mem.h=mem.h"], ["-arch=sm_90"], "mem.h"),
    ]
    lines = ["%s %s -- %s" % (src, " ".join(extra), " ".join(opts)) for src, extra, opts, _ in programs]
    keys = []
    for src, extra, opts, _ in programs:
        rc, out, err = run(["key"] + extra + [src, "--"] + opts, cwd=tmp)
        check(rc == 0, "key %s: %s" % (src, err))
        keys.append(out.strip())
    first = warm(tmp, cache, lines)
    check([s for s, _ in first] == ["compiled"] * 5, "warm: all compiled %r" % first)
    check([k for _, k in first] == keys, "warm's keys are progcache key's: %r %r" % (first, keys))
    again = warm(tmp, cache, lines)
    check([s for s, _ in again] == ["cached"] * 5, "warm again: all cached %r" % again)
    # Edit each header: warm compiles each program again, under a new key
    # equal to progcache key's, then finds it cached.
    for n, (src, extra, opts, header) in enumerate(programs):
        write(os.path.join(tmp, header), "#define V %d\n" % (10 + n))
    edited = warm(tmp, cache, lines)
    check([s for s, _ in edited] == ["compiled"] * 5, "warm after the edits: compiled %r" % edited)
    check(all(e[1] != f[1] for e, f in zip(edited, first)), "new keys after the edits")
    for n, (src, extra, opts, _) in enumerate(programs):
        rc, out, err = run(["key"] + extra + [src, "--"] + opts, cwd=tmp)
        check(out.strip() == edited[n][1], "key after the edit equals warm's for %s" % src)
    settled = warm(tmp, cache, lines)
    check([s for s, _ in settled] == ["cached"] * 5, "warm twice after the edits: cached %r" % settled)
    return cache


def test_refusals(tmp):
    write(os.path.join(tmp, "computed.cu"), '#define H "cwd.h"\n#include H\n')
    rc, out, err = run(["key", "computed.cu", "--", "-arch=sm_90"], cwd=tmp)
    check(rc == 2 and "computed.cu" not in err and "default_program:2: #include H" in err,
          "key: computed include refused, named: rc=%d %r" % (rc, err))
    manifest = os.path.join(tmp, "bad.txt")
    write(manifest, "computed.cu -- -arch=sm_90\n")
    rc, out, err = run(["warm", "--dir", os.path.join(tmp, "cache2"), manifest], cwd=tmp)
    check(rc == 1 and "failed" in out and "#include H" in err,
          "warm: computed include refused, named: rc=%d %r" % (rc, err))
    rc, out, err = run(["key", "--header", "x.h", "computed.cu"], cwd=tmp)
    check(rc == 2 and "NAME=FILE" in err, "--header without NAME=: %r" % err)


def test_ls(tmp, cache):
    write(os.path.join(tmp, "t.cu"),
          "template <int N, class T> __global__ void fill(T *a) { a[0] = T(N); }\n")
    warm(tmp, cache, ["t.cu --name-expression 'fill<3, int>' -- -arch=sm_90"])
    rc, out, err = run(["ls", "--dir", cache])
    check(rc == 0 and "names: fill<3, int> -> _Z4fillILi3EiEvPT0_" in out,
          "ls lists the name expression with its lowered name: %r" % out)
    check(" manifest " in out, "ls lists the header manifests as such: %r" % out)
    rc, out, err = run(["ls", "--dir", cache, "--json"])
    entries = json.loads(out)["entries"]
    names = [n for e in entries for n in e["names"]]
    check({"expression": "fill<3, int>", "bytes": False, "lowered": "_Z4fillILi3EiEvPT0_"} in names,
          "ls --json lists the names: %r" % names)
    check(any(e["kind"] == "manifest" and e["valid"] for e in entries), "ls --json: a valid manifest")
    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 0, "verify accepts manifests: %r %r" % (out, err))


def test_ls_names_not_carried(tmp):
    """An entry without name expressions, listed right after one with them
    (ls lists by name), shows no names, in text and in --json."""
    cache = os.path.join(tmp, "cache-names")
    write(os.path.join(tmp, "named.cu"),
          "template <class T> __global__ void put(T *a) { a[0] = T(1); }\n")
    warm(tmp, cache, ["named.cu --name-expression 'put<float>' -- -arch=sm_90"])
    # More entries without names until one sorts after the named one.
    for batch in range(8):
        lines = []
        for i in range(batch * 8, batch * 8 + 8):
            src = "plain%d.cu" % i
            write(os.path.join(tmp, src), 'extern "C" __global__ void k(int *a) { a[0] = %d; }\n' % i)
            lines.append(src + " -- -arch=sm_90")
        warm(tmp, cache, lines)
        rc, out, err = run(["ls", "--dir", cache, "--json"])
        entries = json.loads(out)["entries"]
        named = [i for i, e in enumerate(entries) if e["names"]]
        check(len(named) == 1, "ls --json: one entry has names: %r" % [e["names"] for e in entries])
        if named and named[0] + 1 < len(entries):
            break
    at = named[0] if named else 0
    check(at + 1 < len(entries), "an entry without names sorts after the named one")
    after = entries[at + 1:]
    check(all(e["names"] == [] for e in after),
          "ls --json: the entries after the named one have no names: %r" % [e["names"] for e in after])
    rc, out, err = run(["ls", "--dir", cache])
    rows = [l for l in out.splitlines() if not l.startswith("NAME")]
    with_names = [i for i, l in enumerate(rows) if "names: " in l]
    check(len(with_names) == 1 and rows[with_names[0]].startswith(entries[at]["name"]),
          "ls: names only on the named entry's line: %r" % rows)


def main():
    pt.need_bin()
    with tempfile.TemporaryDirectory(prefix="progcache-headers-") as tmp:
        test_recipe(tmp)
        test_combination(tmp)
        cache = test_key_equals_warm(tmp)
        test_refusals(tmp)
        test_ls(tmp, cache)
        test_ls_names_not_carried(tmp)
    return pt.finish("test_tool_headers")


if __name__ == "__main__":
    sys.exit(main())
