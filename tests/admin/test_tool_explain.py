#!/usr/bin/env python3
"""Issue 35 through the real binary:

- `progcache explain`: HIT (exit 0) for stored inputs; a MISS (exit 1)
  naming exactly the option whose value changed, an added option, the
  NVRTC version and the source; nothing similar for another program; a
  directory that does not exist (exit 3); `PROGCACHE_EXPLAIN=1` counted;
- `progcache clear` removes the explain index with the entries;
- `progcache verify` names the entries a `cp -r` copy left without their
  seals, `verify --seal` seals the user's own (counted, and the next verify
  names none), and an entry of another user is named, not sealed (root);
- `progcache doctor --json`: one object whose checks are the text's lines,
  a FAIL's fix apart, "ok" and the exit status agreeing;
- `progcache config --list-settings --all` lists the switches with their
  variables and where each comes from; plain `--list-settings` does not
  (the settings file cannot hold them).
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

SRC = 'extern "C" __global__ void axpy(float a, float *x) { x[threadIdx.x] *= a * TILE; }\n'


def run(args, env=None):
    return pt.run(args, env, timeout=300, drop=("PROGCACHE_DIR", "PROGCACHE_REMOTE",
                                                 "PROGCACHE_EXPLAIN"))


def warm(cache, tmp, options):
    manifest = os.path.join(tmp, "m.txt")
    pt.write(manifest, "k.cu --target ptx --name axpy.cu -- %s\n" % " ".join(options))
    rc, out, err = run(["-d", cache, "warm", "-q", manifest])
    check(rc == 0, "warm " + " ".join(options), out + err)


def explain(cache, tmp, options, extra=()):
    return run(["-d", cache, "explain", "--target", "ptx", "--name", "axpy.cu"] + list(extra)
               + [os.path.join(tmp, "k.cu"), "--"] + options)


def counters(cache):
    rc, out, err = run(["-d", cache, "stats", "--json"])
    check(rc == 0, "stats --json", err)
    return json.loads(out) if rc == 0 else {}


def index_files(cache):
    root = os.path.join(cache, "progcache", "explain")
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def test_explain(tmp):
    cache = os.path.join(tmp, "cache")
    pt.write(os.path.join(tmp, "k.cu"), SRC)
    tile16 = ["-arch=compute_90", "-DTILE=16"]
    warm(cache, tmp, tile16)
    check(len(index_files(cache)) == 2, "two index files", str(index_files(cache)))
    check(counters(cache).get("explain_records") == 2, "explain_records counted")

    rc, out, err = explain(cache, tmp, tile16)
    check(rc == 0 and out.startswith("HIT "), "stored inputs: HIT, exit 0", out + err)

    rc, out, err = explain(cache, tmp, ["-arch=compute_90", "-DTILE=32"])
    lines = out.splitlines()
    check(rc == 1 and lines[0].startswith("MISS ") and 'program "axpy.cu"' in lines[0],
          "changed option: MISS, exit 1", out + err)
    check(len(lines) == 2 and lines[1].endswith(" ago: option -DTILE=32 was -DTILE=16"),
          "exactly the option that changed", out)

    rc, out, err = explain(cache, tmp, tile16 + ["-lineinfo"])
    check(rc == 1 and out.splitlines()[-1].endswith(" ago: option -lineinfo added"),
          "an added option", out + err)

    rc, out, err = explain(cache, tmp, tile16, ["--nvrtc-version", "12.9"])
    check(rc == 1 and " ago: NVRTC 12.9 was " in out and "option" not in out,
          "another NVRTC version", out + err)

    pt.write(os.path.join(tmp, "k.cu"), SRC + "// changed\n")
    rc, out, err = explain(cache, tmp, tile16)
    check(rc == 1 and out.splitlines()[-1].endswith(" ago: source changed"),
          "a changed source", out + err)
    pt.write(os.path.join(tmp, "k.cu"), SRC)

    rc, out, err = run(["-d", cache, "explain", "--name", "other.cu",
                        os.path.join(tmp, "k.cu"), "--"] + tile16)
    check(rc == 1 and "nothing similar is recorded" in out, "another program: nothing similar",
          out + err)

    rc, out, err = run(["-d", os.path.join(tmp, "none"), "explain",
                        os.path.join(tmp, "k.cu"), "--"] + tile16)
    check(rc == 3 and "no cache directory" in err and not os.path.exists(
        os.path.join(tmp, "none")), "a missing directory: exit 3, not made", out + err)

    # PROGCACHE_EXPLAIN=1 on a warm that misses: counted in the directory.
    made = counters(cache).get("explain_made", 0)
    manifest = os.path.join(tmp, "m2.txt")
    pt.write(manifest, "k.cu --target ptx --name axpy.cu -- -arch=compute_90 -DTILE=8\n")
    rc, out, err = run(["-d", cache, "warm", "-q", manifest], {"PROGCACHE_EXPLAIN": "1"})
    check(rc == 0 and counters(cache).get("explain_made") == made + 1,
          "PROGCACHE_EXPLAIN=1: the miss explained", out + err)
    check("progcache warm: MISS " in err and " ago: option -DTILE=8 was -DTILE=16" in err,
          "PROGCACHE_EXPLAIN=1: warm prints the explanation", err)

    rc, out, err = run(["-d", cache, "clear"])
    check(rc == 0 and index_files(cache) == [], "clear removes the index", str(index_files(cache)))


def test_verify_seal(tmp):
    cache = os.path.join(tmp, "cache")
    pt.write(os.path.join(tmp, "k.cu"), SRC)
    warm(cache, tmp, ["-arch=compute_90", "-DTILE=1"])
    warm(cache, tmp, ["-arch=compute_90", "-DTILE=2"])
    rc, out, err = run(["-d", cache, "verify"])
    check(rc == 0 and "unsealed" not in out and "without a seal" not in out,
          "progcache's own entries are sealed", out + err)

    copy = os.path.join(tmp, "copy")
    subprocess.run(["cp", "-r", cache, copy], check=True)  # no --preserve=xattr
    rc, out, err = run(["-d", copy, "verify"])
    named = [l for l in out.splitlines() if l.startswith("unsealed ")]
    check(rc == 0 and len(named) == 2 and "2 without a seal" in out,
          "the copy's entries named as unsealed, not bad", out + err)

    others = os.geteuid() == 0
    if others:  # one entry another user's: named, not sealed
        name = named[0].split()[1]
        os.chown(pt.entry_path(copy, name), 65534, 65534)
    rc, out, err = run(["-d", copy, "verify", "--seal"])
    sealed = [l for l in out.splitlines() if l.endswith(": sealed now")]
    check(rc == 0 and len(sealed) == (1 if others else 2), "--seal seals the user's own",
          out + err)
    if others:
        check(any(l.startswith("unsealed " + name) and "another user's" in l
                  for l in out.splitlines()), "another user's entry named, not sealed", out)
    check(counters(copy).get("entries_resealed") == len(sealed), "entries_resealed counted")
    rc, out, err = run(["-d", copy, "verify", "--json"])
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("unsealed") == (1 if others else 0) and doc.get("bad") == 0,
          "after --seal only another user's entry is without a seal", out + err)

    rc, out, err = run(["verify", "--seal", "--remote", "redis://127.0.0.1:1"])
    check(rc == 2, "--seal with --remote: bad usage", out + err)


def test_verify_seal_sidecar(tmp):
    """Without user xattrs (the noxattr shim): the seals are sidecar files,
    which a copy of entries/ alone loses; --seal writes them again."""
    shim = os.environ.get("PROGCACHE_NOXATTR", "")
    if not os.path.exists(shim):
        print("note: PROGCACHE_NOXATTR is not set; the sidecar case is not run")
        return
    env = {"LD_PRELOAD": shim}
    cache = os.path.join(tmp, "cache")
    pt.write(os.path.join(tmp, "k.cu"), SRC)
    manifest = os.path.join(tmp, "m.txt")
    pt.write(manifest, "k.cu --target ptx --name axpy.cu -- -arch=compute_90 -DTILE=3\n")
    rc, out, err = run(["-d", cache, "warm", "-q", manifest], env)
    seals = os.path.join(cache, "progcache", "seals")
    check(rc == 0 and os.path.isdir(seals), "warm seals in sidecars", out + err)
    shutil.rmtree(seals)  # the seals lost, the entries made plain again (0600)
    for name in pt.entry_files(cache):
        os.chmod(pt.entry_path(cache, name), 0o600)
    rc, out, err = run(["-d", cache, "verify"], env)
    check(rc == 0 and "1 without a seal" in out, "sidecar: the unsealed entry named", out + err)
    rc, out, err = run(["-d", cache, "verify", "--seal"], env)
    check(rc == 0 and ": sealed now" in out and os.path.isdir(seals),
          "sidecar: --seal writes the seal", out + err)
    rc, out, err = run(["-d", cache, "verify"], env)
    check(rc == 0 and "without a seal" not in out and "bad" in out and " 0 bad" in out,
          "sidecar: sealed, and good", out + err)


def test_list_settings(tmp):
    rc, out, err = run(["config", "--list-settings", "--all"])
    rows = {l.split()[0]: l for l in out.splitlines() if l.strip()}
    for name, var in (("disable", "PROGCACHE_DISABLE"), ("readonly", "PROGCACHE_READONLY"),
                      ("recache", "PROGCACHE_RECACHE"), ("explain", "PROGCACHE_EXPLAIN")):
        check(name in rows and var in rows[name] and rows[name].endswith("environment only"),
              "--list-settings --all: " + name, out + err)
    check(rows.get("max_size", "").endswith("settings file, environment"),
          "--list-settings --all: a file setting", out)
    rc, out, err = run(["config", "--list-settings"])
    check(rc == 0 and "max_size" in out.split() and "disable" not in out.split(),
          "--list-settings alone: the settings file's names only", out + err)


def test_doctor_json(tmp):
    cache = os.path.join(tmp, "cache")
    pt.write(os.path.join(tmp, "k.cu"), SRC)
    warm(cache, tmp, ["-arch=compute_90", "-DTILE=1"])
    rc, out, err = run(["-d", cache, "doctor", "--json"])
    doc = json.loads(out) if out.startswith("{") else {}
    check(rc == 0 and doc.get("ok") is True and doc.get("dir") == cache,
          "doctor --json on a good cache", out + err)
    rc, text, err = run(["-d", cache, "doctor"])
    check(len(doc.get("checks", [])) == len(text.splitlines()) - 1,
          "one object a line of the text", out + text)
    os.chmod(cache, 0o777)
    rc, out, err = run(["-d", cache, "doctor", "--json"])
    os.chmod(cache, 0o700)
    doc = json.loads(out) if out.startswith("{") else {}
    fails = [c for c in doc.get("checks", []) if c["status"] == "FAIL"]
    check(rc == 1 and doc.get("ok") is False and len(fails) == 1 and
          fails[0]["what"] == "modes" and fails[0]["fix"] == "chmod o-rwx " + cache and
          "fix" not in fails[0]["message"], "doctor --json: a FAIL with its fix", out + err)


if __name__ == "__main__":
    pt.need_bin()
    sys.exit(pt.run_tests((test_explain, test_verify_seal, test_verify_seal_sidecar,
                           test_list_settings, test_doctor_json),
                          "test_tool_explain", "progcache-tool-explain-"))
