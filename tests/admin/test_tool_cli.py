#!/usr/bin/env python3
"""The conventions of the progcache command (issue 16), through the real
binary: getopt_long parsing (short forms, --opt=V, abbreviations,
permutation, "--"), global options before the subcommand, help CMD and
did-you-mean, the exit statuses (1: looked and the answer is no; 3: could
not look), '-' for standard input and output, progress bars on a
pseudo-terminal only, JSON integers JavaScript reads exactly, progcache
config (show, get, set, unset, precedence, errors), the settings' cap
honoured by put, import and warm, stats showing the cap in force and its
charts, and the bash completion against every subcommand's --help.

Environment: PROGCACHE_BIN (the progcache tool)."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check, tty_capture, write  # noqa: E402

BIN = pt.BIN
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTING_VARS = ["PROGCACHE_MAX_SIZE", "PROGCACHE_LOW_WATER_PERCENT", "PROGCACHE_MEMORY_SIZE",
                "PROGCACHE_MAX_ARTIFACT_SIZE", "PROGCACHE_NO_FSYNC", "PROGCACHE_DIR",
                "PROGCACHE_REMOTE"]


def env_with(extra=None):
    return pt.tool_env(extra, SETTING_VARS)


def run(args, env=None, stdin=None, timeout=60):
    return pt.run(args, env, stdin, timeout, SETTING_VARS)


def run_on_tty(args, env=None):
    """Run with standard error on a pseudo-terminal; return (status, what it wrote there)."""
    return tty_capture([BIN] + args, env_with(env), "stderr")


def run_stdout_on_tty(args, env=None):
    """Run with standard output on a pseudo-terminal; return what it wrote."""
    return tty_capture([BIN] + args, env_with(env), "stdout")[1]


def fill(cache, n, size=1000, tag=b""):
    keys = []
    for i in range(n):
        key = hashlib.sha256(tag + bytes([i])).hexdigest()
        value = os.path.join(os.path.dirname(cache), "value.bin")
        write(value, bytes([i % 251]) * size)
        rc, _, err = run(["put", key, value, "-d", cache])
        check(rc == 0, "fill: put", err)
        keys.append(key)
    return keys


def stats(cache, env=None):
    rc, out, err = run(["stats", "--json", "-d", cache], env=env)
    check(rc == 0, "stats --json", err)
    return json.loads(out) if rc == 0 else {}


# ---------------------------------------------------------------------------

def test_parsing(tmp):
    cache = os.path.join(tmp, "c")
    keys = fill(cache, 3)
    # Global options before the subcommand, the same as after it.
    a = run(["--dir", cache, "stats", "--json"])
    b = run(["stats", "--json", "--dir", cache])
    c = run(["-d", cache, "stats", "--json"])
    d = run(["stats", "--json", "--dir=" + cache])
    check(a[0] == 0 and json.loads(a[1])["dir"] == cache, "progcache --dir D stats", a)
    for other in (b, c, d):
        check(other[0] == 0 and json.loads(other[1])["entries"] == 3, "--dir forms agree", other)
    # The subcommand's --dir wins over the global one.
    rc, out, _ = run(["-d", os.path.join(tmp, "nowhere"), "ls", "--json", "-d", cache])
    check(rc == 0 and json.loads(out)["dir"] == cache, "the subcommand's -d overrides", out)
    # Short forms and abbreviations.
    rc, out, _ = run(["ls", "-d", cache, "-s", "size", "--js"])
    check(rc == 0 and len(json.loads(out)["entries"]) == 3, "ls -s size --js (abbreviated)", out)
    rc, out, err = run(["ls", "-d", cache, "--sort=lru"])
    check(rc == 0 and len(out.splitlines()) == 1 + 3, "--sort=lru (a header and 3 entries)", err)
    # Permutation: options after positional arguments, and between them.
    outf = os.path.join(tmp, "out.bin")
    rc, _, err = run(["get", keys[0], "-o", outf, "-d", cache])
    check(rc == 0 and os.path.getsize(outf) == 1000, "get KEY -o F -d D", err)
    rc, _, err = run(["-q", "get", "-d", cache, keys[1], "--output=" + outf])
    check(rc == 0 and open(outf, "rb").read() == bytes([1]) * 1000, "get -d D KEY --output=F", err)
    # "--" ends the options: a file named like an option.
    dash = os.path.join(tmp, "-dash.bin")
    write(dash, b"dash bytes")
    here = os.getcwd()
    os.chdir(tmp)
    try:
        rc, _, err = run(["put", "-d", cache, "ab" * 32, "--", "-dash.bin"])
        check(rc == 0, "put KEY -- -dash.bin", err)
        rc, _, err = run(["put", "-d", cache, "ab" * 32, "-dash.bin"])
        check(rc == 2, "without --, -dash.bin is options: a usage error", err)
    finally:
        os.chdir(here)
    rc, out, _ = run(["get", "-d", cache, "ab" * 32])
    check(rc == 0 and out == "dash bytes", "the -dash.bin bytes were stored", out)
    # key: what follows "--" goes to NVRTC, even things that look like ours.
    src = os.path.join(tmp, "k.cu")
    write(src, b'extern "C" __global__ void k(){}\n')
    k1 = run(["key", src, "--", "-arch=sm_90", "--dir"])
    k2 = run(["key", "-t", "cubin", "-n", "default_program", "--", "-arch=sm_90", "--dir"])
    check(k1[0] == 0 and len(k1[1].strip()) == 64, "key SRC -- ... --dir", k1)
    check(k2[0] == 2, "key without SOURCE before --: usage", k2)
    k3 = run(["key", "-t", "cubin", "-n", "default_program", src, "--", "-arch=sm_90", "--dir"])
    check(k3[1] == k1[1], "key -t/-n short forms give the same key", (k1, k3))
    rc, _, err = run(["key", src, "-arch=sm_90"])
    check(rc == 2 and "NVRTC options go after '--'" in err, "key: an NVRTC option before --", err)
    rc, _, err = run(["key", "--name-ex", "x", src])
    check(rc == 2 and "ambiguous" in err, "key --name-ex: ambiguous", err)
    # key --header NAME=FILE is read with the bound in force, wherever the
    # options stand: --max-artifact-size after it, or the setting of -d DIR.
    hsrc = os.path.join(tmp, "h.cu")
    write(hsrc, b'#include "h.h"\nextern "C" __global__ void k(){}\n')
    hdr = os.path.join(tmp, "h.h")
    write(hdr, b"#define TWELVE 12\n")
    ok = run(["key", "--header", "h.h=" + hdr, hsrc, "--", "-arch=sm_90"])
    check(ok[0] == 0 and len(ok[1].strip()) == 64, "key --header NAME=FILE", ok)
    rc, out, err = run(["key", "--header", "h.h=" + hdr, "--max-artifact-size", "8", hsrc])
    check(rc == 3 and out == "" and "8 bytes" in err, "key --header, then a bound below it: 3", err)
    small = os.path.join(tmp, "small")
    check(run(["config", "-d", small, "max_artifact_size", "8"])[0] == 0, "set a small bound")
    rc, out, err = run(["key", "-d", small, "--header", "h.h=" + hdr, hsrc])
    check(rc == 3 and out == "", "key -d DIR: the directory's max_artifact_size bounds headers",
          err)
    again = run(["key", hsrc, "--digest-file", hdr, "--header=h.h=" + hdr, "--", "-arch=sm_90"])
    check(again[0] == 0 and again[1] != ok[1], "key --digest-file with --header=NAME=FILE", again)
    # Errors.
    for args, needle in ((["ls", "--jsno", "-d", cache], 'did you mean "--json"'),
                         (["ls", "-d"], "-d needs a value"),
                         (["ls", "--dir"], "--dir needs a value"),
                         (["ls", "-x", "-d", cache], 'unknown option "-x"'),
                         (["stats", "-d", cache, "extra"], 'unexpected argument "extra"'),
                         (["--frob", "ls"], "unknown option"),
                         (["-d"], "needs a value")):
        rc, out, err = run(args)
        check(rc == 2 and needle in err, "usage error %s" % args, "%r %r" % (rc, err))


def test_help_and_suggestions(tmp):
    commands = ["stats", "ls", "verify", "prune", "clear", "get", "put", "export", "import",
                "warm", "key", "config"]
    for c in commands:
        a = run(["help", c])
        b = run([c, "--help"])
        h = run([c, "-h"])
        check(a[0] == 0 and a[1] == b[1] == h[1] and a[1].startswith("usage: progcache " + c),
              "help %s == %s --help == -h" % (c, c), a)
    rc, out, _ = run(["help"])
    check(rc == 0 and all(c in out for c in commands), "progcache help lists every command", out)
    rc, out, _ = run(["-h"])
    check(rc == 0 and "usage: progcache" in out, "progcache -h", out)
    rc, out, _ = run(["-V"])
    check(rc == 0 and out.startswith("progcache "), "progcache -V", out)
    for typo, want in (("stat", "stats"), ("sl", "ls"), ("veryfy", "verify"), ("imprt", "import"),
                       ("cofnig", "config")):
        rc, _, err = run([typo])
        check(rc == 2 and "did you mean '%s'?" % want in err, "did you mean for " + typo, err)
    rc, _, err = run(["help", "stat"])
    check(rc == 2 and "did you mean 'stats'?" in err, "help stat: did you mean", err)
    rc, _, err = run(["frobnicate"])
    check(rc == 2 and "did you mean" not in err and "unknown command" in err,
          "no suggestion for a word far from every command", err)


def test_exit_status(tmp):
    cache = os.path.join(tmp, "c")
    keys = fill(cache, 2, size=5000)
    # A miss: looked and did not find.
    rc, _, err = run(["get", "00" * 32, "-d", cache])
    check(rc == 1 and "a miss" in err, "get miss: 1", err)
    rc, _, err = run(["get", "-e", "0" * 64, "-d", cache])
    check(rc == 1 and "a miss" in err, "get --entry miss: 1", err)
    # Could not look: an entry larger than the reader's bound (not read).
    rc, _, err = run(["get", keys[0], "-d", cache, "--max-artifact-size", "1K"])
    check(rc == 3, "get of an entry it cannot read: 3", err)
    # Could not look: the directory is not a cache, or missing, or its
    # settings cannot be used; the bad usage stays 2.
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    write(os.path.join(home, ".profile"), b"mine\n")
    rc, _, err = run(["get", "00" * 32, "-d", home])
    check(rc == 3 and "not a cache directory" in err, "get on a non-cache directory: 3", err)
    rc, _, err = run(["get", "00" * 32, "-d", os.path.join(tmp, "missing")])
    check(rc == 3, "get on a missing directory: 3", err)
    # A malformed variable is said and ignored, as every one is (issue 35): the
    # cache is not turned off by it.
    rc, _, err = run(["get", "00" * 32, "-d", cache], env={"PROGCACHE_MAX_SIZE": "lots"})
    check(rc == 1 and 'warning: PROGCACHE_MAX_SIZE="lots": not a size' in err
          and "ignored (max_size stays 5GiB, from default)" in err,
          "get with a bad variable: warned, ignored, a miss", err)
    rc, _, err = run(["get", "zz", "-d", cache])
    check(rc == 2, "get with a bad KEYHEX: 2", err)
    # verify: entries of no known kind are not problems (0); damaged ones are (1).
    rc, _, _ = run(["verify", "-d", cache])
    check(rc == 0, "verify of non-artifact entries: 0 (kept, not problems)")
    victim = next(os.path.join(d, n) for d, _, ns in os.walk(os.path.join(cache, "entries"))
                  for n in ns)
    with open(victim, "r+b") as f:  # sealed by put: a changed byte is damage
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 1]))
    rc, _, _ = run(["verify", "-d", cache])
    check(rc == 1 or not hasattr(os, "getxattr") or not os.listxattr(victim),
          "verify of a damaged entry: 1 (problems found)")
    # stdout that cannot be written: 3.
    with open("/dev/full", "w") as full:
        p = subprocess.run([BIN, "ls", "-d", cache], stdout=full, stderr=subprocess.PIPE,
                           env=env_with())
    check(p.returncode == 3, "ls > /dev/full: 3", p.stderr)


def test_dash(tmp):
    cache = os.path.join(tmp, "c")
    rc, _, err = run(["put", "-d", cache, "cd" * 32, "-"], stdin=b"from stdin")
    check(rc == 0, "put KEY -: standard input", err)
    rc, out, _ = run(["get", "-d", cache, "cd" * 32, "-o", "-"])
    check(rc == 0 and out == "from stdin", "get -o -: standard output", out)
    p = subprocess.run([BIN, "export", "-d", cache, "-"], capture_output=True, env=env_with())
    check(p.returncode == 0 and len(p.stdout) >= 1024 and b"exported 1 entry" in p.stderr,
          "export -: the archive on stdout, the report on stderr", p.stderr)
    into = os.path.join(tmp, "into")
    rc, out, err = run(["import", "-d", into, "-"], stdin=p.stdout)
    check(rc == 0 and "imported 1 entry" in out, "import -: standard input", err)
    src = os.path.join(tmp, "k.cu")
    write(src, b'extern "C" __global__ void k(){}\n')
    a = run(["key", src, "--", "-arch=sm_90"])
    b = run(["key", "-", "--", "-arch=sm_90"], stdin=open(src, "rb").read())
    check(a[0] == 0 and a[1] == b[1], "key -: standard input", (a, b))
    # warm -: the manifest on standard input, sources relative to the
    # working directory.
    here = os.getcwd()
    os.chdir(tmp)
    try:
        rc, out, err = run(["warm", "-a", "sm_90", "-d", cache, "--json", "-"],
                           stdin=b"k.cu -- -arch=sm_90\n")
    finally:
        os.chdir(here)
    w = json.loads(out) if rc == 0 else {}
    check(rc == 0 and w.get("compiled") == 1 and w["programs"][0]["key"] == a[1].strip(),
          "warm -: the manifest from standard input", (rc, out, err))


def test_progress(tmp):
    cache = os.path.join(tmp, "c")
    fill(cache, 30, size=300)
    tar = os.path.join(tmp, "a.tar")
    cases = [
        (["export", "-d", cache, tar], "exporting"),
        (["import", "-d", os.path.join(tmp, "into"), tar], "importing"),
        (["verify", "-d", cache], "verifying"),
        (["prune", "-d", cache, "--max-size", "6K"], "removing"),
        (["clear", "-d", cache], "removing"),
    ]
    for args, word in cases:
        rc, seen = run_on_tty(args)
        check(rc in (0, 1) and "\r[" in seen and word in seen and "/s" in seen,
              "%s draws a progress bar with a rate on a terminal" % args[0], repr(seen[-300:]))
        rc, quiet = run_on_tty(["-q"] + args if args[0] != "import" else args + ["-q"])
        check("\r[" not in quiet, "%s --quiet: no bar" % args[0], repr(quiet[-200:]))
        fill(cache, 30, size=300)
    # import reports the bytes it checks, then the entries; ETA while going.
    rc, seen = run_on_tty(["import", "-d", os.path.join(tmp, "into2"), tar])
    check("checking" in seen and "importing" in seen and "30/30" in seen, "import: two phases",
          repr(seen[-300:]))
    # Not a terminal: nothing on stderr.
    rc, out, err = run(["export", "-d", cache, os.path.join(tmp, "b.tar")])
    check(rc == 0 and "\r" not in err and "exporting" not in err,
          "no bar when stderr is not a terminal", err[-300:])


def big_ints(value, path="$"):
    """Integers JavaScript cannot read exactly."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [path] if abs(value) > 2 ** 53 else []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in big_ints(v, path + "." + k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in big_ints(v, "%s[%d]" % (path, i))]
    return []


def test_json(tmp):
    cache = os.path.join(tmp, "c")
    keys = fill(cache, 2)
    outputs = {
        "stats": run(["stats", "--json", "-d", cache]),
        "ls": run(["ls", "--json", "-d", cache]),
        "verify": run(["verify", "--json", "-d", cache]),
        "config": run(["config", "--json", "-d", cache]),
        "config one": run(["config", "--json", "-d", cache, "max_size"]),
        "prune": run(["prune", "--json", "-d", cache, "--older-than", "9w"]),
        "clear": run(["clear", "--json", "-d", cache]),
        "stats --zero": run(["stats", "--json", "--zero", "-d", cache]),
    }
    src = os.path.join(tmp, "k.cu")
    write(src, b'extern "C" __global__ void k(){}\n')
    manifest = os.path.join(tmp, "m.txt")
    write(manifest, b"k.cu\n")
    outputs["warm"] = run(["warm", "--json", "-a", "sm_90", "-d", cache, manifest])
    for name, (rc, out, err) in outputs.items():
        try:
            obj = json.loads(out)
        except ValueError:
            check(False, name + " --json parses", out + err)
            continue
        check(list(obj)[0] == "schema" and obj["schema"] == 1, name + ": schema 1 first", obj)
        check(big_ints(obj) == [], name + ": no integer above 2^53", big_ints(obj))
    fill(cache, 1)
    e = json.loads(run(["ls", "--json", "-d", cache])[1])["entries"][0]
    check(isinstance(e["atime_ms"], int) and isinstance(e["atime_ns"], str)
          and int(e["atime_ns"]) // 1000000 == e["atime_ms"], "ls: times in ms, ns as strings", e)
    check(abs(e["mtime_ms"] / 1000 - os.path.getmtime(
        os.path.join(cache, "entries", e["name"][:2], e["name"][2:]))) < 1, "ls: mtime_ms", e)


def test_config(tmp):
    cache = os.path.join(tmp, "c")
    rc, out, err = run(["config", "-d", cache])
    check(rc == 0 and re.search(r"^max_size\s+5GiB\s+default$", out, re.M), "config: defaults",
          out + err)
    check(not os.path.exists(cache), "showing the settings creates nothing")
    rc, out, err = run(["config", "-d", cache, "max_size", "10G"])
    check(rc == 0 and "max_size = 10G" in out, "config max_size 10G", out + err)
    conf = os.path.join(cache, "progcache", "config")
    check(os.path.isfile(conf) and "max_size = 10G\n" in open(conf).read(), "the settings file")
    rc, out, _ = run(["config", "-d", cache, "max_size"])
    check(rc == 0 and out == "10G\n", "config max_size: the value alone", out)
    rc, out, _ = run(["config", "-d", cache])
    check(re.search(r"^max_size\s+10G\s+file .*/progcache/config:\d+$", out, re.M),
          "config: from the file, with its line", out)
    # The environment overrides the file; a set says so.
    env = {"PROGCACHE_MAX_SIZE": "2G"}
    rc, out, _ = run(["config", "-d", cache], env=env)
    check(re.search(r"^max_size\s+2G\s+environment PROGCACHE_MAX_SIZE$", out, re.M),
          "config: the environment over the file", out)
    # A variable that cannot be used: shown as ignored, the file's value in force.
    rc, out, err = run(["config", "-d", cache], env={"PROGCACHE_MAX_SIZE": "abc"})
    check(rc == 0 and re.search(r"^max_size\s+10G\s+file ", out, re.M)
          and 'warning: PROGCACHE_MAX_SIZE="abc" cannot be used' in err
          and "ignored (max_size stays 10G, from " in err, "config: a bad variable said", out + err)
    rc, out, err = run(["config", "-d", cache, "low_water_percent", "80"], env=env)
    check(rc == 0, "config low_water_percent 80", err)
    rc, out, err = run(["config", "-d", cache, "max_size", "3G"], env=env)
    check(rc == 0 and "PROGCACHE_MAX_SIZE=2G overrides it" in err, "set: the override noted", err)
    s = stats(cache, env=env)
    check(s.get("max_size") == 2 << 30 and s.get("max_size_source") == "environment",
          "stats: the cap in force from the environment", s)
    s = stats(cache)
    check(s.get("max_size") == 3 << 30 and s.get("max_size_source") == "file",
          "stats: the cap in force from the file", s)
    rc, out, _ = run(["stats", "-d", cache])
    check(re.search(r"size cap\s+3\.0 GiB \(3221225472 bytes; settings file .*config:\d+\)", out),
          "stats text: the cap and where it comes from", out)
    # JSON.
    j = json.loads(run(["config", "--json", "-d", cache])[1])
    byname = {x["name"]: x for x in j["settings"]}
    check(byname["max_size"]["number"] == 3 << 30 and byname["max_size"]["source"] == "file"
          and byname["low_water_percent"]["number"] == 80 and not byname["remote"]["in_file"],
          "config --json", j)
    # Unset.
    rc, out, _ = run(["config", "-d", cache, "--unset", "max_size"])
    check(rc == 0 and "removed" in out and "max_size" not in open(conf).read(), "--unset", out)
    check(stats(cache).get("max_size") == 5 << 30, "unset: the default again")
    # Errors: 2 for a name or value it does not take, 3 for a file it cannot read.
    for args, needle in ((["max_szie", "1G"], 'did you mean "max_size"'),
                         (["max_size", "1X"], 'max_size "1X": not a size'),
                         (["low_water_percent", "0"], "from 1 to 100"),
                         (["no_fsync", "maybe"], "true or false"),
                         (["remote", "redis://h"], "environment only"),
                         (["max_size", "1G", "extra"], "unexpected argument")):
        rc, out, err = run(["config", "-d", cache] + args)
        check(rc == 2 and needle in err, "config %s: 2" % args, err)
    with open(conf, "a") as f:
        f.write("max_size = plenty\n")
    for args in (["config"], ["stats"], ["ls"], ["put", "ef" * 32, conf]):
        rc, out, err = run(args + ["-d", cache])
        check(rc == 3 and re.search(r"config:\d+: max_size = \"plenty\": not a size", err),
              "%s with a bad settings file: 3, naming the line" % args[0], err)
    rc, out, err = run(["config", "-d", cache, "max_size", "1G"])
    check(rc == 0 and "plenty" not in open(conf).read(), "config mends a bad line", err)
    os.unlink(conf)
    os.mkfifo(conf)
    rc, out, err = run(["config", "-d", cache], timeout=20)
    check(rc == 3 and "FIFO" in err, "a FIFO as the settings file: 3 at once", err)
    os.unlink(conf)
    # A directory that is not a cache gets no settings file.
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    write(os.path.join(home, ".profile"), b"x")
    rc, _, err = run(["config", "-d", home, "max_size", "1G"])
    check(rc == 2 and "not a cache directory" in err and os.listdir(home) == [".profile"],
          "config on a non-cache directory: refused, nothing written", err)


def test_cap_honoured(tmp):
    # put: the directory's setting evicts.
    cache = os.path.join(tmp, "put")
    check(run(["config", "-d", cache, "max_size", "4K"])[0] == 0, "set a 4K cap")
    fill(cache, 10, size=1000)
    s = stats(cache)
    check(s.get("total_size", 1 << 30) <= 4096 and s.get("evictions", 0) > 0,
          "put honours the settings' cap", s)
    # The environment's cap, with no file.
    cache2 = os.path.join(tmp, "env")
    for i in range(6):
        value = os.path.join(tmp, "v.bin")
        write(value, bytes([i]) * 1000)
        run(["put", "%02x" % i, value, "-d", cache2], env={"PROGCACHE_MAX_SIZE": "3K"})
    s = stats(cache2, env={"PROGCACHE_MAX_SIZE": "3K"})
    check(s.get("total_size", 1 << 30) <= 3072 and s.get("evictions", 0) > 0,
          "put honours PROGCACHE_MAX_SIZE", s)
    # import: an archive of 10 entries into a 4K cache.
    src = os.path.join(tmp, "src")
    fill(src, 10, size=1000, tag=b"imp")
    tar = os.path.join(tmp, "a.tar")
    check(run(["export", "-d", src, tar])[0] == 0, "export for import")
    into = os.path.join(tmp, "into")
    check(run(["config", "-d", into, "max_size", "4K"])[0] == 0, "a 4K cap for import")
    rc, out, err = run(["import", "-d", into, tar])
    s = stats(into)
    check(rc == 0 and s.get("total_size", 1 << 30) <= 4096 and s.get("evictions", 0) > 0,
          "import honours the settings' cap", (out, err, s))
    # warm: a cap below one program evicts each as the next lands.
    wdir = os.path.join(tmp, "warm")
    check(run(["config", "-d", wdir, "max_size", "1K"])[0] == 0, "a 1K cap for warm")
    kernels = os.path.join(tmp, "kernels")
    os.makedirs(kernels)
    with open(os.path.join(kernels, "m.txt"), "w") as f:
        for i in range(3):
            name = "k%d.cu" % i
            write(os.path.join(kernels, name),
                  b'extern "C" __global__ void k%d(float *a){ a[0] = %d; }\n' % (i, i))
            f.write(name + "\n")
    rc, out, err = run(["warm", "-a", "sm_90", "-j", "1", "-d", wdir,
                        os.path.join(kernels, "m.txt")])
    s = stats(wdir)
    # Exit 1: the cap evicted warmed programs again, and one line says how
    # many remain (issue 35).
    check(rc == 1 and "3 compiled" in out and s.get("evictions", 0) >= 2
          and "of the 3 warmed remain in the cache" in out
          and s.get("total_size", 1 << 30) <= 1024 * 8, "warm honours the settings' cap",
          (out, err, s))


def test_stats_charts(tmp):
    cache = os.path.join(tmp, "c")
    fill(cache, 4, size=2000)
    fill(cache, 1, size=100000, tag=b"big")
    run(["get", "00" * 32, "-d", cache])
    rc, out, err = run(["stats", "-d", cache, "--charts"], env={"LANG": "C"})
    check(rc == 0 and "entries by last use" in out and "entries by size" in out,
          "stats --charts draws the charts", out + err)
    m = re.search(r"^  < 1 hour\s+5\s+\S+\s+#+$", out, re.M)
    check(m, "5 entries used within the hour", out)
    check(re.search(r"^  < 4 KiB\s+4 .*#", out, re.M)
          and re.search(r"^  64 KiB-1 MiB\s+1 ", out, re.M), "sizes bucketed", out)
    check(re.search(r"^hit rate\s+\[\.+\] 0\.0 %$", out, re.M), "hit rate gauge", out)
    check("size cap used" in out and "of 5.0G" in out, "cap gauge", out)
    rc, out, _ = run(["stats", "-d", cache])
    check("entries by last use" not in out, "no charts when stdout is not a terminal", out)
    # On a terminal they come by themselves; --no-charts turns them off.
    seen = run_stdout_on_tty(["stats", "-d", cache], {"LANG": "C"})
    check("entries by last use" in seen and "hit rate" in seen and "size cap used" in seen,
          "stats on a terminal draws the charts", seen[-500:])
    seen = run_stdout_on_tty(["stats", "-d", cache, "--no-charts"], {"LANG": "C"})
    check("entries by last use" not in seen and "size cap" in seen, "--no-charts", seen[-300:])
    rc, out, _ = run(["stats", "-d", cache, "--charts"], env={"LANG": "en_US.UTF-8"})
    check("\u2588" in out, "UTF-8 blocks in a UTF-8 locale", out)


def test_completion(tmp):
    script = os.path.join(SRC, "tools", "progcache.bash")
    if not shutil.which("bash"):
        print("note: no bash; completion not tested")
        return

    def complete(words):
        line = " ".join(words)
        code = ('source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _progcache; printf "%%s\\n" '
                '"${COMPREPLY[@]}"' % (script, " ".join("'%s'" % w for w in words),
                                        len(words) - 1))
        # "progcache" found on PATH, as in a shell: the build's binary.
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(BIN)) + os.pathsep +
                   os.environ.get("PATH", ""))
        p = subprocess.run(["bash", "-c", code], capture_output=True, text=True, env=env)
        check(p.returncode == 0, "completion runs: " + line, p.stderr)
        return set(x for x in p.stdout.split("\n") if x)

    check(complete(["progcache", "st"]) == {"stats"}, "complete a subcommand")
    check(complete(["progcache", "-d", "/tmp", "ver"]) == {"verify"}, "after -d DIR")
    check({"--json", "--zero", "--dir"} <= complete(["progcache", "stats", "--"]),
          "stats options")
    check(complete(["progcache", "ls", "--sort", ""]) == {"name", "size", "age", "lru"},
          "ls --sort values")
    check(complete(["progcache", "config", "max"]) == {"max_size", "max_artifact_size"},
          "config setting names")
    # From the command's table, never typed in the script: every setting a
    # file may hold, remote_min_rate included.
    check(complete(["progcache", "config", "--unset", ""]) ==
          set(run(["config", "--list-settings"])[1].split()), "config --unset NAME")
    check(complete(["progcache", "help", "imp"]) == {"import"}, "help CMD")
    # Every long option of every --help is completed, and nothing else.
    for cmd in ("stats", "ls", "verify", "prune", "clear", "get", "put", "export", "import",
                "warm", "key", "remote", "config"):
        # The option lines of the help ("  -d, --dir DIR  ..."), not the prose.
        lines = [l for l in run([cmd, "--help"])[1].splitlines() if re.match(r"^\s+-", l)]
        helped = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", "\n".join(lines)))
        completed = set(w for w in complete(["progcache", cmd, "--"]) if w.startswith("--"))
        check(helped == completed, "completion of %s matches its --help" % cmd,
              (sorted(helped - completed), sorted(completed - helped)))


def main():
    pt.need_bin()
    return pt.run_tests((test_parsing, test_help_and_suggestions, test_exit_status, test_dash,
                        test_progress, test_json, test_config, test_cap_honoured,
                        test_stats_charts, test_completion), "test_tool_cli", "progcache-tool-cli-")


if __name__ == "__main__":
    sys.exit(main())
