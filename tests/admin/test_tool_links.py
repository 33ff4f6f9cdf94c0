#!/usr/bin/env python3
"""Issue 29, cases 1 and 2: nothing inside a cache is reached through a
link (docs/SECURITY.md, "No symbolic links are followed"), through the real
binary, with and without user extended attributes (the noxattr shim of
tests/nfs/ forces the sidecar seals, as on sshfs or NFS).

- A symbolic link is planted at every directory the cache uses (a shard
  entries/<xx>, progcache/seals, progcache/seals/<xx>, progcache/tmp, tmp,
  progcache/flight.d, progcache/pch-<uid>) and at the record and state files
  (progcache/nvrtc-<uid>, config, state, stats, lock), each pointing to a
  directory (or file) outside the cache that holds bait: files named as the
  cache would delete them (its entries, seals, old temp files). Then get,
  put, a put over a small cap (eviction), prune, clear, verify --fix, the
  heal of a corrupt entry (get), import and an open (the temp sweep) run,
  one by one on a fresh copy. Nothing outside the cache is deleted,
  changed or created; a link where a directory belongs is counted
  (links_refused) and named.
- The issue's scenario 1, with two real users of a team group made by the
  test (needs root): in a group cache without xattrs, bob swaps
  progcache/seals for a link into alice's private cache (in a 0700 folder
  he cannot enter); alice's `progcache clear` of the team cache deletes
  nothing of her private cache.

Environment: PROGCACHE_BIN, PROGCACHE_NOXATTR (the shim)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
SHIM = os.environ.get("PROGCACHE_NOXATTR", "")
SUFFIX = "%05d" % (os.getpid() % 100000)
TEAM = "pclnk" + SUFFIX
ALICE, BOB = "pcla" + SUFFIX, "pclb" + SUFFIX
KEY1, KEY2, KEY3 = "00ff", "0011", "abcd"
NAMED = "where the cache keeps a directory"


def name_of(key):
    return hashlib.sha256(bytes.fromhex(key)).hexdigest()


def run(args, mode, user=None, env=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("PROGCACHE_") and k not in ("LD_PRELOAD",)}
    e["HOME"] = "/nonexistent"
    if mode == "sidecar":
        e["LD_PRELOAD"] = SHIM
    e.update(env or {})
    cmd = [BIN] + args
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    p = subprocess.run(cmd, capture_output=True, env=e, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def snapshot(root):
    """Everything under root (links not followed): type, size, times, bytes."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            digest = ""
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def links_refused(cache, mode):
    rc, out, err = run(["stats", "--json", "-d", cache], mode)
    try:
        return json.loads(out).get("links_refused", 0)
    except ValueError:
        return -1


def artifact(base, name, data):
    p = os.path.join(base, name)
    pt.write(p, data)
    return p


def make_cache(base, mode, art):
    cache = tempfile.mkdtemp(prefix="cache-", dir=base)
    os.rmdir(cache)
    for key in (KEY1, KEY2):
        rc, _, err = run(["put", "-d", cache, key, art], mode)
        check(rc == 0, "%s: put %s" % (mode, key), err)
    return cache


def old(path):
    t = time.time() - 7200
    os.utime(path, (t, t))


def bait_dir(base, place, files):
    """A directory outside the cache holding files (relative name: bytes)."""
    bait = tempfile.mkdtemp(prefix="bait-", dir=base)
    for rel, data in files.items():
        p = os.path.join(bait, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        pt.write(p, data)
        old(p)
    return bait


def plant(cache, base, place, mode):
    """Replace place with a link to bait that names what the cache would
    delete there; returns the bait's folder."""
    n1, n2 = name_of(KEY1), name_of(KEY2)
    shard = n1[:2]
    uid = os.geteuid()
    if place == "files":
        bait = bait_dir(base, place, {"record": b"bait record\n"})
        state = os.path.join(cache, "progcache")
        for f in ("nvrtc-%u" % uid, "config", "state", "stats", "lock"):
            p = os.path.join(state, f)
            if os.path.lexists(p):
                os.unlink(p)
            os.symlink(os.path.join(bait, "record"), p)
        return bait
    files = {
        "entries/" + shard: {n1[2:]: b"bait entry", n2[2:]: b"bait entry 2"},
        "progcache/seals": {shard + "/" + n1[2:]: b"bait seal", n2[:2] + "/" + n2[2:]: b"s"},
        "progcache/seals/" + shard: {n1[2:]: b"bait seal"},
        "progcache/tmp": {"entry-0123456789abcdef": b"t", "evict-0123456789abcdef": b"t",
                          "seal-0123456789abcdef": b"t"},
        "tmp": {"entry-abcd1234": b"t", "entry-0123456789abcdef": b"t"},
        "progcache/flight.d": {"0123456789abcdef.lock": b"1 host 1\n"},
        "progcache/pch-%u" % uid: {"lock": b"", "0123.pch": b"p", "0123.manifest": b"m"},
    }[place]
    bait = bait_dir(base, place, files)
    p = os.path.join(cache, place)
    if os.path.lexists(p):
        shutil.move(p, tempfile.mkdtemp(prefix="aside-", dir=base))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    os.symlink(bait, p)
    return bait


def corrupt(cache, key):
    p = pt.entry_path(cache, name_of(key))
    if os.path.isfile(p) and not os.path.islink(os.path.dirname(p)):
        with open(p, "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 1]))


def ops(base, mode, art, big, archive):
    """(name, what it does to a cache): every operation that may delete."""
    return [
        ("get", lambda c: run(["get", "-d", c, KEY1, "-o", os.path.join(base, "out")], mode)),
        ("put", lambda c: run(["put", "-d", c, KEY1, big], mode)),
        ("put new", lambda c: run(["put", "-d", c, KEY3, art], mode)),
        ("evict", lambda c: run(["put", "-d", c, KEY3, big], mode,
                                env={"PROGCACHE_MAX_SIZE": "3K"})),
        ("prune", lambda c: run(["prune", "-d", c, "-M", "1"], mode)),
        ("clear", lambda c: run(["clear", "-d", c], mode)),
        ("verify --fix", lambda c: (corrupt(c, KEY2), run(["verify", "--fix", "-d", c], mode))[1]),
        ("heal", lambda c: (corrupt(c, KEY1),
                            run(["get", "-d", c, KEY1, "-o", os.path.join(base, "out")], mode))[1]),
        ("import", lambda c: run(["import", "-d", c, archive], mode)),
        ("sweep", lambda c: run(["stats", "-d", c], mode)),
        ("config", lambda c: run(["config", "-d", c, "max_size", "1G"], mode)),
    ]


PLACES = ["entries/<shard>", "progcache/seals", "progcache/seals/<shard>", "progcache/tmp",
          "tmp", "progcache/flight.d", "progcache/pch-<uid>", "files"]


def test_links(base, mode):
    art = artifact(base, "art", b"hello\n" * 100)
    big = artifact(base, "big", b"x" * 2500)
    src = make_cache(base, mode, art)
    run(["put", "-d", src, KEY3, art], mode)
    archive = os.path.join(base, "bundle.tar")
    rc, _, err = run(["export", "-d", src, archive], mode)
    check(rc == 0, "%s: export" % mode, err)
    shard = name_of(KEY1)[:2]
    for place in PLACES:
        real = place.replace("<shard>", shard).replace("<uid>", str(os.geteuid()))
        named = 0
        refused = 0
        for what, op in ops(base, mode, art, big, archive):
            cache = make_cache(base, mode, art)
            bait = plant(cache, base, real, mode)
            before = snapshot(bait)
            rc, out, err = op(cache)
            after = snapshot(bait)
            check(before == after, "%s: %s with a link at %s touches nothing outside" %
                  (mode, what, place),
                  {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                   if before.get(k) != after.get(k)})
            named += NAMED in err
            refused += max(0, links_refused(cache, mode))
            if NAMED in err:
                check(real in err or place == "files", "%s: the message names %s" % (mode, real),
                      err)
        if place in ("files",):
            continue
        if place in ("progcache/flight.d", "progcache/pch-<uid>"):
            continue  # used by compiles only: test_links.c opens them
        if place == "tmp":
            continue  # cuda.core's: only listed and swept, never needed
        if mode == "xattr" and place.startswith("progcache/seals"):
            continue  # no sidecars with xattrs
        check(refused > 0, "%s: a link at %s is counted (links_refused)" % (mode, place))
        check(named > 0, "%s: a link at %s is named" % (mode, place))


def test_xattr(base):
    test_links(base, "xattr")


def test_sidecar(base):
    if not SHIM or not os.path.exists(SHIM):
        print("SKIP sidecar: PROGCACHE_NOXATTR is not set")
        return
    test_links(base, "sidecar")


def admin(cmd):
    """useradd/groupadd/userdel/groupdel, retried: parallel tests may hold
    the lock on /etc/passwd for a moment."""
    for _ in range(20):
        p = subprocess.run(cmd, capture_output=True)
        if p.returncode == 0:
            return True
        if b"lock" not in p.stderr:
            break
        time.sleep(0.25)
    print("%s failed: %s" % (" ".join(cmd), p.stderr.decode("utf-8", "replace")))
    return False


def scenario_one(base):
    """Issue 29, case 1, as it was reported."""
    art = artifact(base, "art1", b"alice's kernel\n")
    os.chmod(art, 0o644)
    home = os.path.join(base, "alice-home")
    os.mkdir(home)
    shutil.chown(home, ALICE, TEAM)
    os.chmod(home, 0o700)
    private = os.path.join(home, "cache")
    team = os.path.join(base, "team")
    os.mkdir(team)
    shutil.chown(team, ALICE, TEAM)
    os.chmod(team, 0o2770)
    rc, _, err = run(["put", "-d", private, KEY1, art], "sidecar", ALICE)
    check(rc == 0, "alice's private put", err)
    for cache in (team,):
        rc, _, err = run(["--shared-group", TEAM, "put", "-d", cache, KEY1, art], "sidecar", ALICE)
        check(rc == 0, "alice's put into the team cache", err)
    n = name_of(KEY1)
    seal = os.path.join(private, "progcache", "seals", n[:2], n[2:])
    check(os.path.isfile(seal), "alice's private entry is sealed in a sidecar")
    check(os.path.isfile(os.path.join(team, "progcache", "seals", n[:2], n[2:])),
          "the team entry is sealed in a sidecar")
    before = snapshot(private)
    # bob, a member: seals aside, a link into alice's private cache.
    seals = os.path.join(team, "progcache", "seals")
    target = os.path.join(private, "progcache", "seals")
    p = subprocess.run(["runuser", "-u", BOB, "--", "sh", "-c",
                        'mv "$1" "$1.old" && ln -s "$2" "$1"', "sh", seals, target],
                       capture_output=True)
    check(p.returncode == 0 and os.path.islink(seals), "bob swaps progcache/seals for a link",
          p.stderr)
    rc, _, err = run(["--shared-group", TEAM, "clear", "-d", team], "sidecar", ALICE)
    after = snapshot(private)
    check(before == after, "alice's clear of the team cache deletes nothing of her private cache",
          {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
           if before.get(k) != after.get(k)})
    check(NAMED in err and "progcache/seals" in err, "the link is named", (rc, err))
    check(not os.path.exists(pt.entry_path(team, n)), "the team entry is cleared")
    check(links_refused(team, "sidecar") > 0, "the link is counted (links_refused)")
    # Her puts say why they fail; her private cache still hits.
    rc, _, err = run(["--shared-group", TEAM, "put", "-d", team, KEY1, art], "sidecar", ALICE)
    check(rc == 3, "a put through the link fails", (rc, err))
    rc, out, err = run(["get", "-d", private, KEY1], "sidecar", ALICE)
    check(rc == 0 and out == "alice's kernel\n", "alice's private entry still hits", (rc, err))


def test_two_users(base):
    if os.geteuid() != 0:
        print("SKIP two users: needs root to make users (useradd, groupadd)")
        return
    if not SHIM or not os.path.exists(SHIM):
        print("SKIP two users: PROGCACHE_NOXATTR is not set")
        return
    for tool in ("useradd", "userdel", "groupadd", "groupdel", "runuser"):
        if not shutil.which(tool):
            print("SKIP two users: %s is not installed" % tool)
            return
    made_group, made_users = False, []
    base = tempfile.mkdtemp(prefix="progcache-links-")  # the runner's folder is root's, 0700
    os.chmod(base, 0o755)
    try:
        if not admin(["groupadd", TEAM]):
            check(False, "groupadd")
            return
        made_group = True
        for user in (ALICE, BOB):
            if not admin(["useradd", "-M", "-N", "-d", "/nonexistent", "-s", "/bin/sh", "-G", TEAM,
                          user]):
                check(False, "useradd")
                return
            made_users.append(user)
        scenario_one(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for user in made_users:
            admin(["userdel", user])
        if made_group:
            admin(["groupdel", TEAM])


def main():
    pt.need_bin()
    return pt.run_tests([test_xattr, test_sidecar, test_two_users], "test_tool_links")


if __name__ == "__main__":
    sys.exit(main())
