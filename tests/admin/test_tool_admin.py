#!/usr/bin/env python3
"""The progcache admin subcommands on a cache's entries, through the real
binary: each one's output parsed and its effect on a real cache directory
checked. ls, stats, get, put, verify, prune, clear, export, import.
Usage errors, --dir defaults and an empty cache are in
test_tool_admin_usage.py, warm in test_tool_admin_warm.py.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(the cuda.core reference data; copied before use, never modified)."""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import tool_admin_fixture as fx
from tool_admin_fixture import (BIN, REF_KERNELS, SCALE_CUBIN_KEY, check, copy_reference, entry_files,
                                entry_path, flip_bit, ls_json, run)


# ---------------------------------------------------------------------------

def test_ls(tmp):
    cache = copy_reference(tmp, "ls")
    rc, out, err = run(["ls", "--dir", cache])
    check(rc == 0, "ls exit 0", err)
    header, *rest = out.splitlines()
    check(header.split() == ["NAME", "SIZE", "LAST-USE", "KIND", "ARCH", "KERNELS"],
          "ls: a header line names the columns, piped too", out)
    lines = [l.split() for l in rest]
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
    check(out.splitlines()[1].split()[0] == names[-1], "ls --sort lru (text)")
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

    def member(name, kind=tarfile.REGTYPE, linkname=""):
        """A builder adding one hostile member: a file holding "x", or a link."""
        def build(t):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, linkname
            info.size = 1 if kind == tarfile.REGTYPE else 0
            t.addfile(info, io.BytesIO(b"x") if kind == tarfile.REGTYPE else None)
        return build

    dotdot = member("entries/../../evil")
    symlink = member("entries/ab/" + "1" * 62, tarfile.SYMTYPE, "../../evil")
    absolute = member(os.path.join(tmp, "evil"))
    hardlink = member("entries/ab/" + "2" * 62, tarfile.LNKTYPE, "/etc/passwd")

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


if __name__ == "__main__":
    sys.exit(fx.main((test_ls, test_stats_get_put, test_verify, test_prune_clear, test_export_import), "test_tool_admin"))
