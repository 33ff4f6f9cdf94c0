#!/usr/bin/env python3
"""The progcache admin subcommands through the real binary: each one's
output parsed and its effect on a real cache directory checked.

stats, ls, verify, prune, clear, get, put, export, import, warm; --dir
defaults from the environment; --help and usage errors (exit 2) for all.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(the cuda.core reference data; copied before use, never modified)."""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

BIN = os.environ.get("PROGCACHE_BIN")
REF = os.environ.get("PROGCACHE_REFERENCE_DIR")
failures = []

REF_KERNELS = {"scale", "axpy", "fill"}
SCALE_CUBIN_KEY = "59bcff4260892d4dc837f7f50b9a5d418cbdc5901e53c093c52aef55316be2c1"


def run(args, env=None, stdin=None):
    e = dict(os.environ)
    e.pop("PROGCACHE_DIR", None)
    if env:
        e.update(env)
    p = subprocess.run([BIN] + args, capture_output=True, env=e, input=stdin)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print("FAIL:", what, detail)


def entry_files(cache):
    out = {}
    root = os.path.join(cache, "entries")
    if not os.path.isdir(root):
        return out
    for shard in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, shard))):
            with open(os.path.join(root, shard, name), "rb") as f:
                out[shard + name] = f.read()
    return out


def entry_path(cache, name):
    return os.path.join(cache, "entries", name[:2], name[2:])


def copy_reference(tmp, name):
    dst = os.path.join(tmp, name)
    shutil.copytree(os.path.join(REF, "cuda-core-cache"), dst)
    for root, dirs, files in os.walk(dst):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


def ls_json(cache):
    rc, out, err = run(["ls", "--dir", cache, "--json"])
    check(rc == 0, "ls --json exit 0", err)
    listing = json.loads(out)
    check(listing["schema"] == 1 and listing["dir"] == cache, "ls --json: schema and dir", listing)
    return listing["entries"]


# ---------------------------------------------------------------------------

def test_ls(tmp):
    cache = copy_reference(tmp, "ls")
    rc, out, err = run(["ls", "--dir", cache])
    check(rc == 0, "ls exit 0", err)
    lines = [l.split() for l in out.splitlines()]
    check(len(lines) == 6, "ls: one line per entry", out)
    kinds = [l[4] for l in lines]
    check(kinds.count("CUBIN") == 3 and kinds.count("PTX") == 3, "ls: 3 CUBIN and 3 PTX", out)
    for l in lines:
        check(len(l[0]) == 64 and all(c in "0123456789abcdef" for c in l[0]), "ls: name is 64 hex", l)
        check(l[5] == "sm_90", "ls: architecture sm_90", l)
        check(l[6] in REF_KERNELS, "ls: kernel name", l)
        check(os.path.exists(entry_path(cache, l[0])), "ls: the name is the entry file", l)
    cubin_kernels = {l[6] for l in lines if l[4] == "CUBIN"}
    ptx_kernels = {l[6] for l in lines if l[4] == "PTX"}
    check(cubin_kernels == REF_KERNELS and ptx_kernels == REF_KERNELS, "ls: scale, axpy, fill", out)

    entries = ls_json(cache)
    check(len(entries) == 6, "ls --json: 6 entries")
    by_name = {e["name"]: e for e in entries}
    files = entry_files(cache)
    for name, data in files.items():
        e = by_name.get(name)
        check(e is not None and e["size"] == len(data), "ls --json: size of " + name)
        check(e["valid"] and e["arch"] == "sm_90", "ls --json: valid, sm_90", e)
        check(len(e["kernels"]) == 1 and e["kernels"][0] in REF_KERNELS, "ls --json: kernels", e)
        check(e["kind"] == ("CUBIN" if data[:4] == b"\x7fELF" else "PTX"), "ls --json: kind", e)

    # --sort size: largest first; --sort lru: least recently used first.
    sizes = [e["size"] for e in json.loads(run(["ls", "--dir", cache, "--json", "--sort", "size"])[1])["entries"]]
    check(sizes == sorted(sizes, reverse=True), "ls --sort size", sizes)
    names = sorted(files)
    now = time.time()
    for i, name in enumerate(names):
        os.utime(entry_path(cache, name), (now - 1000 * (i + 1), now - 10))
    lru = [e["name"] for e in json.loads(run(["ls", "--dir", cache, "--json", "--sort", "lru"])[1])["entries"]]
    check(lru == list(reversed(names)), "ls --sort lru: oldest use first", lru)
    rc, out, _ = run(["ls", "--dir", cache, "--sort", "lru"])
    check(out.split()[0] == names[-1], "ls --sort lru (text)")
    # ls does not count as a use.
    check(int(os.stat(entry_path(cache, names[0])).st_atime) == int(now - 1000),
          "ls leaves atime alone")
    check(run(["ls", "--dir", cache, "--sort", "color"])[0] == 2, "ls --sort bad: exit 2")
    rc, _, err = run(["ls", "--dir", os.path.join(tmp, "nope")])
    check(rc == 3 and "nope" in err, "ls on a missing directory: exit 3 naming it", err)


def test_stats_get_put(tmp):
    cache = copy_reference(tmp, "stats")
    rc, out, err = run(["stats", "--dir", cache, "--json"])
    check(rc == 0, "stats --json exit 0", err)
    s = json.loads(out)
    check(s["entries"] == 6 and s["total_size"] == sum(map(len, entry_files(cache).values())),
          "stats: entries and size of the reference cache", s)
    check(s["available"] is False and s["hits"] == 0, "stats: no counters before progcache wrote", s)

    # get: a hit (a reference entry, by the key cuda.core derived) and a miss.
    out_file = os.path.join(tmp, "scale.cubin")
    rc, _, err = run(["get", SCALE_CUBIN_KEY, "--dir", cache, "-o", out_file])
    check(rc == 0, "get hit exit 0", err)
    name = hashlib.sha256(bytes.fromhex(SCALE_CUBIN_KEY)).hexdigest()
    with open(out_file, "rb") as f, open(entry_path(cache, name), "rb") as g:
        check(f.read() == g.read(), "get -o writes the entry's bytes")
    rc, _, err = run(["get", "00" * 32, "--dir", cache])
    check(rc == 1 and "miss" in err, "get miss: exit 1 with a message", err)
    # put then get to stdout: a round trip.
    payload = os.path.join(tmp, "payload.bin")
    with open(payload, "wb") as f:
        f.write(bytes(range(256)) * 5)
    rc, _, err = run(["put", "abcd" * 16, payload, "--dir", cache])
    check(rc == 0, "put exit 0", err)
    rc, out_bytes, _ = run(["get", "abcd" * 16, "--dir", cache])
    p = subprocess.run([BIN, "get", "abcd" * 16, "--dir", cache], capture_output=True)
    check(p.returncode == 0 and p.stdout == bytes(range(256)) * 5, "put/get round trip to stdout")
    check(os.path.exists(entry_path(cache, hashlib.sha256(bytes.fromhex("abcd" * 16)).hexdigest())),
          "put: entry at entries/<sha256(key)>")
    rc, _, err = run(["put", "abcd" * 16, os.path.join(tmp, "missing.bin"), "--dir", cache])
    check(rc == 3 and "missing.bin" in err, "put of a missing file: exit 3 naming it", err)
    rc, _, err = run(["put", "xyz", payload, "--dir", cache])
    check(rc == 2 and "xyz" in err, "put bad hex: exit 2", err)
    check(run(["get", "--dir", cache])[0] == 2, "get without a key: exit 2")
    check(run(["get", "abc", "--dir", cache])[0] == 2, "get odd hex: exit 2")
    # get --entry by file name (not counted).
    p = subprocess.run([BIN, "get", "--entry", name, "--dir", cache], capture_output=True)
    check(p.returncode == 0 and p.stdout[:4] == b"\x7fELF", "get --entry NAME")

    rc, out, err = run(["stats", "--dir", cache, "--json"])
    s = json.loads(out)
    # 3 gets hit (reference entry, then abcd twice), 1 missed, 1 put.
    check(s["available"] and s["hits"] == 3 and s["misses"] == 1 and s["stores"] == 1,
          "stats: counters after get/put", s)
    check(abs(s["hit_rate"] - 0.75) < 1e-6 and s["entries"] == 7, "stats: hit rate, entries", s)
    rc, out, err = run(["stats", "--dir", cache])
    check(rc == 0 and "hits" in out and "75.0 %" in out and "misses" in out, "stats text", out)
    rc, out, err = run(["stats", "--dir", cache, "--zero"])
    check(rc == 0 and "zeroed" in out, "stats --zero", out + err)
    s = json.loads(run(["stats", "--dir", cache, "--json"])[1])
    check(s["hits"] == 0 and s["misses"] == 0 and s["stores"] == 0 and s["entries"] == 7,
          "stats --zero resets counters, keeps entries", s)
    check(run(["stats", "--dir", cache, "--bogus"])[0] == 2, "stats bad option: exit 2")


def run_on_tty(args):
    """Run with standard error on a pseudo-terminal; return what it wrote there."""
    import pty
    master, slave = pty.openpty()
    e = dict(os.environ)
    e.pop("PROGCACHE_DIR", None)
    p = subprocess.Popen([BIN] + args, stdout=subprocess.DEVNULL, stderr=slave, env=e)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait()
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def flip_bit(path, offset, bit=0):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def test_verify(tmp):
    cache = copy_reference(tmp, "verify")
    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 0 and "0 bad" in out, "verify: the reference cache is clean", out + err)
    entries = ls_json(cache)
    cubins = sorted(e["name"] for e in entries if e["kind"] == "CUBIN")
    # Truncated CUBIN; a CUBIN with a flipped bit in its section table
    # offset (cuda.core entries carry no digest: the structure check must
    # catch it); bytes of no known kind, put by progcache put (not damage:
    # kept unless --fix-unknown), and the same sealed and then flipped
    # (damage: its seal says so); and an entry progcache stored, flipped
    # where only the recorded SHA-256 can tell.
    with open(entry_path(cache, cubins[0]), "r+b") as f:
        f.truncate(os.path.getsize(entry_path(cache, cubins[0])) - 100)
    flip_bit(entry_path(cache, cubins[1]), 0x28 + 3, 4)  # e_shoff
    garbage = os.path.join(tmp, "garbage.bin")
    with open(garbage, "wb") as f:
        f.write(b"this is not a compiled program\n")
    check(run(["put", "11" * 32, garbage, "--dir", cache])[0] == 0, "put garbage")
    check(run(["put", "33" * 32, garbage, "--dir", cache])[0] == 0, "put garbage again")
    flipped_garbage = hashlib.sha256(bytes.fromhex("33" * 32)).hexdigest()
    flip_bit(entry_path(cache, flipped_garbage), 3, 1)
    with open(entry_path(cache, cubins[2]), "rb") as f:
        good_cubin = f.read()
    with open(garbage, "wb") as f:
        f.write(good_cubin)
    check(run(["put", "22" * 32, garbage, "--dir", cache])[0] == 0, "put a CUBIN")
    stored = hashlib.sha256(bytes.fromhex("22" * 32)).hexdigest()
    flip_bit(entry_path(cache, stored), len(good_cubin) // 2, 0)
    bad = {cubins[0], cubins[1], stored, flipped_garbage}
    unknown = {hashlib.sha256(bytes.fromhex("11" * 32)).hexdigest()}
    try:
        # The seal: format 2, flags, the name's first 8 bytes, the SHA-256
        # (docs/FORMAT.md).
        seal = os.getxattr(entry_path(cache, stored), "user.progcache.sha256")
        digests = len(seal) == 42 and seal[0] == 2 and seal[1] == 1  # a whole CUBIN when put
    except OSError:
        digests = False
    if not digests:
        print("verify by SHA-256: skipped (no user xattrs on this file system)")
        bad.discard(stored)
        bad.discard(flipped_garbage)
        unknown.add(flipped_garbage)

    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 1, "verify with problems: exit 1", out + err)
    reported = {l.split()[1] for l in out.splitlines() if l.startswith("bad ")}
    check(reported == bad, "verify names the bad entries", out)
    said_unknown = {l.split()[1].rstrip(":") for l in out.splitlines() if l.startswith("unknown ")}
    check(said_unknown == unknown, "verify names the entries of no known kind", out)
    check(("SHA-256" in out or not digests) and "kept (--fix-unknown removes it)" in out,
          "verify says why", out)
    rc, out, err = run(["verify", "--dir", cache, "--json"])
    v = json.loads(out)
    check(rc == 1 and v["checked"] == 9 and v["bad"] == len(bad) and v["removed"] == 0 and
          v["unknown"] == len(unknown), "verify --json", v)
    check({p["name"] for p in v["problems"] if not p["unknown"]} == bad and
          {p["name"] for p in v["problems"] if p["unknown"]} == unknown,
          "verify --json problems", v)
    for n in bad | unknown:
        check(os.path.exists(entry_path(cache, n)), "verify without --fix keeps entries")

    rc, out, err = run(["verify", "--dir", cache, "--fix"])
    check(rc == 1 and "%d removed" % len(bad) in out, "verify --fix removes and still reports: exit 1",
          out + err)
    for n in bad:
        check(not os.path.exists(entry_path(cache, n)), "verify --fix removed " + n)
    for n in unknown:
        check(os.path.exists(entry_path(cache, n)), "verify --fix keeps what is of no known kind")
    check(len(entry_files(cache)) == 9 - len(bad), "verify --fix keeps the good ones")
    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 0 and "checked %d entries" % (9 - len(bad)) in out, "verify after --fix: clean, exit 0",
          out + err)
    s = json.loads(run(["stats", "--dir", cache, "--json"])[1])
    check(s["corrupt_removed"] == len(bad), "stats: corrupt removed", s)
    # Asked for exactly that: the entries of no known kind go too.
    rc, out, err = run(["verify", "--dir", cache, "--fix-unknown"])
    check(rc == 0 and "%d of them removed" % len(unknown) in out, "verify --fix-unknown", out + err)
    for n in unknown:
        check(not os.path.exists(entry_path(cache, n)), "verify --fix-unknown removed " + n)
    check(len(entry_files(cache)) == 9 - len(bad) - len(unknown), "and nothing else")


def test_prune_clear(tmp):
    cache = copy_reference(tmp, "prune")
    files = entry_files(cache)
    names = sorted(files)
    now = time.time()
    # Last use: names[0] 10 days ago, names[1] 8 days, the rest today.
    for i, name in enumerate(names):
        age = {0: 10 * 86400, 1: 8 * 86400}.get(i, 60 * i)
        os.utime(entry_path(cache, name), (now - age, now - age))
    rc, out, err = run(["prune", "--dir", cache, "--older-than", "7d"])
    check(rc == 0 and "removed 2 entries" in out, "prune --older-than 7d", out + err)
    left = entry_files(cache)
    check(set(left) == set(names[2:]), "prune by age removed the two old ones")

    # By size: LRU first. Keep room for the two most recently used.
    recent = sorted(names[2:], key=lambda n: os.stat(entry_path(cache, n)).st_atime)
    keep = recent[-2:]
    limit = sum(len(files[n]) for n in keep)
    rc, out, err = run(["prune", "--dir", cache, "--max-size", str(limit), "--json"])
    p = json.loads(out)
    check(rc == 0 and p["removed"] == 2 and p["total_size"] <= limit, "prune --max-size", p)
    check(set(entry_files(cache)) == set(keep), "prune by size keeps the most recent")
    rc, out, err = run(["prune", "--dir", cache, "--max-size", "1K"])
    check(rc == 0, "prune --max-size 1K", err)
    check(sum(map(len, entry_files(cache).values())) <= 1024, "prune 1K: within 1 KiB")
    s = json.loads(run(["stats", "--dir", cache, "--json"])[1])
    check(s["evictions"] >= 4, "stats: prunes counted as evictions", s)

    for bad in (["--max-size", "12X"], ["--max-size", "-5"], ["--max-size", ""],
                ["--older-than", "7"], ["--older-than", "abc"], ["--older-than", "5y"],
                ["--max-size", "99999999999999999999"], ["--max-size", "0"]):
        rc, _, err = run(["prune", "--dir", cache] + bad)
        check(rc == 2 and err.strip(), "prune %s: exit 2 with a message" % bad, err)
    rc, _, err = run(["prune", "--dir", cache, "--max-size", "12X"])
    check("12X" in err, "prune names the bad size", err)
    # Bare: trims to the directory's cap (test_tool_habits checks the amounts).
    for good in ([], ["--max-size", "512M"], ["--max-size", "2G"], ["--max-size", "100K"],
                 ["--older-than", "12h"], ["--older-than", "30m"], ["--older-than", "45s"]):
        check(run(["prune", "--dir", cache] + good)[0] == 0, "prune %s accepted" % good)

    cache2 = copy_reference(tmp, "clear")
    rc, out, err = run(["clear", "--dir", cache2])
    check(rc == 0 and "removed 6 entries" in out, "clear", out + err)
    check(entry_files(cache2) == {}, "clear: no entries left")
    s = json.loads(run(["stats", "--dir", cache2, "--json"])[1])
    check(s["entries"] == 0 and s["total_size"] == 0, "stats after clear", s)
    rc, _, err = run(["clear", "--dir", os.path.join(tmp, "never")])
    check(rc == 3 and "never" in err and not os.path.exists(os.path.join(tmp, "never")),
          "clear of a missing directory: exit 3, nothing created", err)


def test_export_import(tmp):
    cache = copy_reference(tmp, "exp")
    archive = os.path.join(tmp, "cache.tar")
    rc, out, err = run(["export", "--dir", cache, archive])
    check(rc == 0 and "exported 6 entries" in out, "export", out + err)
    with tarfile.open(archive) as t:
        members = t.getmembers()
        check(len(members) == 6 and all(m.isfile() for m in members), "export: 6 regular files")
        check(all(m.name.startswith("entries/") and len(m.name) == 73 for m in members),
              "export: entries/<2>/<62> names")
    empty = os.path.join(tmp, "imp")
    rc, out, err = run(["import", "--dir", empty, archive])
    check(rc == 0 and "imported 6 entries" in out, "import", out + err)
    check(entry_files(empty) == entry_files(cache), "export/import: byte-identical entries")
    rc, _, err = run(["verify", "--dir", empty])
    check(rc == 0, "imported cache verifies", err)

    # An archive made with tar in a cuda.core directory imports too.
    tar_archive = os.path.join(tmp, "by-tar.tar")
    subprocess.run(["tar", "-cf", tar_archive, "entries"], cwd=cache, check=True)
    other = os.path.join(tmp, "imp-tar")
    rc, out, err = run(["import", "--dir", other, tar_archive])
    check(rc == 0 and "imported 6 entries" in out, "import of a tar-made archive", out + err)
    check(entry_files(other) == entry_files(cache), "tar-made archive: identical entries")
    # And the pax format (Python's default).
    pax_archive = os.path.join(tmp, "pax.tar")
    with tarfile.open(pax_archive, "w", format=tarfile.PAX_FORMAT) as t:
        t.add(os.path.join(cache, "entries"), arcname="entries")
    other = os.path.join(tmp, "imp-pax")
    rc, out, err = run(["import", "--dir", other, pax_archive])
    check(rc == 0 and entry_files(other) == entry_files(cache), "pax archive imports", err)

    # Hostile archives: refused, nothing imported, nothing written outside.
    data = b"//\n.version 8.0\n.target sm_90\n"
    good = "entries/ab/" + "0" * 62

    def hostile(name, build):
        path = os.path.join(tmp, name + ".tar")
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
            info = tarfile.TarInfo(good)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
            build(t)
        target = os.path.join(tmp, "victim-" + name)
        before = sorted(os.listdir(tmp))
        rc, out, err = run(["import", "--dir", target, path])
        check(rc == 3, "hostile %s refused with exit 3" % name, out + err)
        check(entry_files(target) == {}, "hostile %s: nothing imported" % name)
        after = sorted(os.listdir(tmp))
        check(set(after) - set(before) <= {"victim-" + name}, "hostile %s: nothing written outside" % name,
              set(after) - set(before))
        check(not os.path.exists(os.path.join(tmp, "evil")), "hostile %s: no evil file" % name)
        return err

    def dotdot(t):
        info = tarfile.TarInfo("entries/../../evil")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))

    def symlink(t):
        info = tarfile.TarInfo("entries/ab/" + "1" * 62)
        info.type = tarfile.SYMTYPE
        info.linkname = "../../evil"
        t.addfile(info)

    def absolute(t):
        info = tarfile.TarInfo(os.path.join(tmp, "evil"))
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))

    def hardlink(t):
        info = tarfile.TarInfo("entries/ab/" + "2" * 62)
        info.type = tarfile.LNKTYPE
        info.linkname = "/etc/passwd"
        t.addfile(info)

    err = hostile("dotdot", dotdot)
    check("../../evil" in err, "dotdot: member named", err)
    err = hostile("symlink", symlink)
    check("symbolic link" in err, "symlink: said so", err)
    hostile("absolute", absolute)
    hostile("hardlink", hardlink)
    rc, _, err = run(["import", "--dir", os.path.join(tmp, "x"), os.path.join(tmp, "none.tar")])
    check(rc == 3 and "none.tar" in err, "import of a missing archive names it", err)
    check(run(["import", "--dir", empty])[0] == 2, "import without ARCHIVE: exit 2")
    check(run(["export", "--dir", cache])[0] == 2, "export without ARCHIVE: exit 2")


def test_dir_defaults(tmp):
    cache = copy_reference(tmp, "envdir")
    rc, out, err = run(["ls"], env={"PROGCACHE_DIR": cache})
    check(rc == 0 and len(out.splitlines()) == 6, "PROGCACHE_DIR is the default --dir", err)
    xdg = os.path.join(tmp, "xdg")
    payload = os.path.join(tmp, "p.bin")
    with open(payload, "wb") as f:
        f.write(b"hello")
    rc, _, err = run(["put", "aa" * 32, payload], env={"XDG_CACHE_HOME": xdg})
    check(rc == 0, "put into the XDG default", err)
    default = os.path.join(xdg, "cuda-python", "program-cache")
    check(len(entry_files(default)) == 1, "XDG_CACHE_HOME/cuda-python/program-cache is cuda.core's default")
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    rc, _, err = run(["put", "aa" * 32, payload], env={"XDG_CACHE_HOME": "", "HOME": home})
    check(rc == 0 and len(entry_files(os.path.join(home, ".cache", "cuda-python", "program-cache"))) == 1,
          "HOME/.cache/cuda-python/program-cache without XDG_CACHE_HOME", err)
    # --dir wins over the environment.
    rc, out, err = run(["ls", "--dir", cache], env={"PROGCACHE_DIR": xdg})
    check(len(out.splitlines()) == 6, "--dir overrides PROGCACHE_DIR")


def test_usage(tmp):
    cmds = ["stats", "ls", "verify", "prune", "clear", "get", "put", "export", "import", "warm", "key"]
    for c in cmds:
        rc, out, err = run([c, "--help"])
        check(rc == 0 and out.startswith("usage: progcache " + c), c + " --help", out + err)
        rc, out, err = run([c, "--no-such-option"])
        check(rc == 2 and ("--no-such-option" in err or "no-such-option" in err), c + " bad option: exit 2", err)
    rc, out, err = run(["--help"])
    check(rc == 0 and all(c in out for c in cmds), "progcache --help lists every command", out)
    check(run(["frobnicate"])[0] == 2, "unknown command: exit 2")
    check(run([])[0] == 2, "no command: exit 2")
    check(run(["ls", "--dir"])[0] == 2, "--dir without a value: exit 2")
    check(run(["ls", "--dir="])[0] == 2, "--dir empty: exit 2")


def test_empty(tmp):
    cache = os.path.join(tmp, "empty")
    os.makedirs(cache)
    rc, out, err = run(["ls", "--dir", cache])
    check(rc == 0 and out == "", "ls of an empty cache: nothing", out + err)
    check(json.loads(run(["ls", "--dir", cache, "--json"])[1])["entries"] == [], "ls --json of an empty cache")
    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 0 and "checked 0 entries" in out, "verify of an empty cache", out + err)
    for args in (["--older-than", "1d"], ["--max-size", "1K"]):
        rc, out, err = run(["prune", "--dir", cache] + args)
        check(rc == 0 and "removed 0 entries" in out, "prune of an empty cache", out + err)
    archive = os.path.join(tmp, "empty.tar")
    rc, out, err = run(["export", "--dir", cache, archive])
    check(rc == 0 and "exported 0 entries" in out, "export of an empty cache", out + err)
    with tarfile.open(archive) as t:
        check(t.getmembers() == [], "empty archive has no members")
    rc, out, err = run(["import", "--dir", os.path.join(tmp, "empty2"), archive])
    check(rc == 0 and "imported 0 entries" in out, "import of an empty archive", out + err)
    rc, out, err = run(["clear", "--dir", cache])
    check(rc == 0 and "removed 0 entries" in out, "clear of an empty cache", out + err)
    s = json.loads(run(["stats", "--dir", cache, "--json"])[1])
    check(s["entries"] == 0 and s["hit_rate"] is None, "stats of an empty cache", s)


KERNELS = {
    "a.cu": 'extern "C" __global__ void scale(float *a, float s, int n)'
            '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] *= s; }\n',
    "b.cu": 'extern "C" __global__ void axpy(const float *x, float *y, float a, int n)'
            '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) y[i] += a*x[i]; }\n',
    "sub/c.cu": 'template <typename T> __global__ void fill(T *a, T v, int n)'
                '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] = v; }\n',
}


def test_warm(tmp):
    src = os.path.join(tmp, "warm-src")
    for name, text in KERNELS.items():
        os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    manifest = os.path.join(src, "programs.txt")
    with open(manifest, "w") as f:
        f.write("# three programs for the cluster\n\n"
                "a.cu -- --std=c++17\n"
                "b.cu --target ptx   # PTX for the JIT\n"
                "sub/c.cu --name 'fill prog' --name-expression \"fill<float>\" -- -DWIDTH=4\n")
    cache = os.path.join(tmp, "warm-cache")
    rc, out, err = run(["warm", "--arch", "sm_90", manifest, "--dir", cache, "--json", "--jobs", "2"])
    check(rc == 0, "warm exit 0", err)
    w = json.loads(out)
    check(w["compiled"] == 3 and w["cached"] == 0 and w["failed"] == 0, "warm compiles 3", w)
    progs = w["programs"]
    check([p["options"][0] for p in progs] == ["-arch=sm_90"] * 3, "warm puts -arch first", progs)
    # The keys are those `progcache key` derives for the same compile.
    expect = [
        run(["key", os.path.join(src, "a.cu"), "--", "-arch=sm_90", "--std=c++17"])[1].strip(),
        run(["key", "--target", "ptx", os.path.join(src, "b.cu"), "--", "-arch=sm_90"])[1].strip(),
        run(["key", "--name", "fill prog", "--name-expression", "fill<float>",
             os.path.join(src, "sub/c.cu"), "--", "-arch=sm_90", "-DWIDTH=4"])[1].strip(),
    ]
    check([p["key"] for p in progs] == expect, "warm keys == progcache key", (progs, expect))
    # a.cu with those options is the reference vector cuda.core keyed.
    check(progs[0]["key"] == SCALE_CUBIN_KEY, "warm key matches cuda.core's", progs[0])
    for p in progs:
        rc, _, err = run(["get", p["key"], "--dir", cache, "-o", os.path.join(tmp, "w.out")])
        check(rc == 0, "warmed entry is a hit: " + p["source"], err)
    kinds = sorted(e["kind"] for e in ls_json(cache))
    check(kinds == ["CUBIN", "CUBIN", "PTX"], "warm: two CUBINs and a PTX", kinds)

    rc, out, err = run(["warm", "--arch", "sm_90", manifest, "--dir", cache])
    check(rc == 0, "second warm exit 0", err)
    check("0 compiled, 3 already cached, 0 failed" in out, "second warm: all cached", out)
    check(sum(1 for l in out.splitlines() if l.startswith("cached ")) == 3, "second warm lines", out)

    # On a terminal: a progress bar on standard error, ending at 3/3.
    progress = run_on_tty(["warm", "--arch", "sm_90", manifest, "--dir", cache])
    check("\r[" in progress and "3/3" in progress and "cached 3" in progress,
          "warm draws a progress bar on a terminal", repr(progress))

    # A line with its own -arch keeps it.
    own = os.path.join(src, "own.txt")
    with open(own, "w") as f:
        f.write("a.cu -- -arch=sm_80\n")
    w = json.loads(run(["warm", "--arch", "sm_90", own, "--dir", cache, "--json"])[1])
    check(w["programs"][0]["options"] == ["-arch=sm_80"], "a line's own -arch wins", w)

    # Failures: a compile error names the program, exit 1; the others still go in.
    broken = os.path.join(src, "broken.cu")
    with open(broken, "w") as f:
        f.write("__global__ void oops( { }\n")
    mixed = os.path.join(src, "mixed.txt")
    with open(mixed, "w") as f:
        f.write("broken.cu\nb.cu --target cubin\n")
    rc, out, err = run(["warm", "--arch", "sm_90", mixed, "--dir", cache])
    check(rc == 1 and "broken.cu" in err and "1 failed" in out and "1 compiled" in out,
          "warm with a compile error: exit 1, named", out + err)

    for text, what in (("a.cu --bogus\n", "unknown option"), ("a.cu --name 'open\n", "quote"),
                       ("a.cu --target sass\n", "--target"), ("# nothing\n", "no program")):
        bad = os.path.join(src, "bad.txt")
        with open(bad, "w") as f:
            f.write(text)
        rc, _, err = run(["warm", "--arch", "sm_90", bad, "--dir", cache])
        check(rc == 2 and what in err, "malformed manifest (%s): exit 2" % what, err)
    missing = os.path.join(src, "missing.txt")
    with open(missing, "w") as f:
        f.write("a.cu\nnot-there.cu\n")
    rc, _, err = run(["warm", "--arch", "sm_90", missing, "--dir", cache])
    check(rc == 3 and "not-there.cu" in err and "missing.txt:2" in err, "missing source: exit 3, line named", err)
    check(run(["warm", "--arch", "90", manifest, "--dir", cache])[0] == 2, "warm bad --arch: exit 2")
    check(run(["warm", "--jobs", "0", manifest, "--dir", cache])[0] == 2, "warm bad --jobs: exit 2")
    check(run(["warm", "--dir", cache])[0] == 2, "warm without MANIFEST: exit 2")


def main():
    if not BIN:
        print("SKIPPED: PROGCACHE_BIN is not set")
        return 77
    if not REF or not os.path.isdir(os.path.join(REF, "cuda-core-cache")):
        # In the repository (tests/data): missing is a fault, not a skip.
        print("FAIL: no reference cache at PROGCACHE_REFERENCE_DIR=%r (tests/data)" % REF)
        return 1
    with tempfile.TemporaryDirectory(prefix="progcache-tool-admin-") as tmp:
        for test in (test_usage, test_empty, test_ls, test_stats_get_put, test_verify, test_prune_clear,
                     test_export_import, test_dir_defaults, test_warm):
            sub = os.path.join(tmp, test.__name__)
            os.makedirs(sub)
            test(sub)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("test_tool_admin: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
