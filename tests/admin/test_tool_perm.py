#!/usr/bin/env python3
"""Team caches, other users and root (issue 20, items 5, 6 and 10), through
the real binary, with real users made for the test (useradd, groupadd) and
run as them (runuser), under umasks 000, 022 and 077:

- a private cache is owner-only whatever the umask (directories 0700, files
  0600), and one of ours found loose (0777, 0666) is tightened;
- another user's settings file planted in a loose progcache/ (max_size =
  1K) is refused with a message naming it, never honoured: no entry is
  evicted; root's settings file is honoured;
- root, and another user, running on a user's cache write nothing there:
  put, clear, config and warm are refused or do not store (one warning),
  and afterwards the owner's get, put and clear work; root does not create
  a cache inside another user's directory either;
- a group cache (--shared-group, PROGCACHE_SHARED_GROUP): whatever the
  umask of the member who made them, directories are 02770 of the group,
  entries 0640, state 0660; each member reads, replaces and clears what the
  other made, in the same shard; a member without the setting is a reader;
  a directory of another group, or an unknown group, is refused.

Needs root (it makes users); skips (77) otherwise. Users and groups are
removed whatever happens. Environment: PROGCACHE_BIN."""

import json
import os
import pwd
import grp
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
SUFFIX = "%05d" % (os.getpid() % 100000)
TEAM = "pcteam" + SUFFIX
ALICE, BOB, CAROL = "pca" + SUFFIX, "pcb" + SUFFIX, "pcc" + SUFFIX  # CAROL: not in TEAM
KEY1 = "00ff"
KEY2 = "0011"


def run(args, user=None, umask=0o022, env=None, stdin=None, timeout=120):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("PROGCACHE_") and k not in ("HOME", "XDG_CACHE_HOME")}
    e["HOME"] = "/nonexistent"
    e.update(env or {})
    cmd = [BIN] + args
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd

    def pre():
        os.umask(umask)

    p = subprocess.run(cmd, capture_output=True, env=e, timeout=timeout, preexec_fn=pre,
                       input=stdin)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def stats(cache, user):
    rc, out, err = run(["stats", "--json", "-d", cache], user=user)
    return json.loads(out) if rc == 0 else {}


def walk(root):
    """(path, mode, uid, gid) of root and everything below it."""
    out = []
    for d, dirs, files in os.walk(root):
        for name in [""] + dirs + files:
            p = os.path.join(d, name) if name else d
            if name == "" and d != root:
                continue
            st = os.lstat(p)
            out.append((p, st.st_mode, st.st_uid, st.st_gid))
    return out


def modes_private(cache, owner, what):
    uid = pwd.getpwnam(owner).pw_uid
    for p, mode, u, _ in walk(cache):
        want = 0o700 if stat.S_ISDIR(mode) else 0o600
        check(u == uid, "%s: %s is %s's" % (what, p, owner), u)
        check(stat.S_IMODE(mode) & ~0o2000 == want,
              "%s: %s is mode %o (want %o)" % (what, p, stat.S_IMODE(mode), want))


def modes_group(cache, what):
    gid = grp.getgrnam(TEAM).gr_gid
    for p, mode, _, g in walk(cache):
        rel = os.path.relpath(p, cache)
        if stat.S_ISDIR(mode):
            if rel.startswith("progcache/pch-"):
                continue  # a user's own PCH directory, private by design
            want = 0o2770
        elif rel.startswith("entries/"):
            want = 0o640
        elif rel.startswith("progcache/nvrtc-"):
            want = 0o600  # a user's own record of NVRTC versions, read by that user only
        else:
            want = 0o660
        check(g == gid, "%s: %s is of the team's group" % (what, p), g)
        check(stat.S_IMODE(mode) == want,
              "%s: %s is mode %o (want %o)" % (what, p, stat.S_IMODE(mode), want))


def artifact(base, name, data):
    p = os.path.join(base, name)
    with open(p, "wb") as f:
        f.write(data)
    os.chmod(p, 0o644)
    return p


def kernel_manifest(base):
    src = artifact(base, "k.cu", b'extern "C" __global__ void k(float *a){ a[0] = 1; }\n')
    return artifact(base, "m.txt", (os.path.basename(src) + "\n").encode())


def user_dir(base, name, owner):
    p = os.path.join(base, name)
    os.mkdir(p)
    shutil.chown(p, owner)
    os.chmod(p, 0o755)
    return p


def test_private(base, art):
    for umask in (0o000, 0o022, 0o077):
        home = user_dir(base, "private-%03o" % umask, ALICE)
        cache = os.path.join(home, "cache")
        rc, _, err = run(["put", "-d", cache, KEY1, art], ALICE, umask)
        check(rc == 0, "umask %03o: put into a new private cache" % umask, err)
        rc, _, err = run(["config", "-d", cache, "max_size", "1G"], ALICE, umask)
        check(rc == 0, "umask %03o: config" % umask, err)
        rc, out, err = run(["warm", "-a", "sm_90", "-d", cache, kernel_manifest(home)],
                           ALICE, umask)
        check(rc == 0, "umask %03o: warm" % umask, (out, err))
        check(os.path.exists(os.path.join(cache, "progcache", "flight")),
              "umask %03o: warm made progcache/flight" % umask)
        modes_private(cache, ALICE, "private, umask %03o" % umask)

    # Ours, found loose (an older version under umask 000): tightened.
    cache = os.path.join(base, "private-000", "cache")
    for p, mode, _, _ in walk(cache):
        os.chmod(p, 0o777 if stat.S_ISDIR(mode) else 0o666)
    # A settings file every user could write is refused, not tightened: its
    # values may not be the owner's (tested in test_tool_cli); keep it out.
    os.chmod(os.path.join(cache, "progcache", "config"), 0o600)
    rc, _, err = run(["put", "-d", cache, KEY2, art], ALICE, 0o000)
    check(rc == 0, "put into a loose private cache", err)
    rc, out, err = run(["warm", "-a", "sm_90", "-d", cache, kernel_manifest(base)], ALICE, 0o000)
    check(rc == 0, "warm in a loose private cache (progcache/flight)", (out, err))
    # Entries are not re-checked (the hit path stays as it is): only the
    # directories and state files are; put the loose entry files back.
    for p, mode, _, _ in walk(cache):
        if p.count("/entries/") and not stat.S_ISDIR(mode):
            os.chmod(p, 0o600)
    modes_private(cache, ALICE, "loose private cache after one put")
    check(stats(cache, ALICE).get("modes_fixed", 0) >= 5, "modes_fixed counts the fixes",
          stats(cache, ALICE))


def test_planted_config(base, art):
    home = user_dir(base, "planted", ALICE)
    cache = os.path.join(home, "cache")
    for k in ("01", "02", "03"):
        check(run(["put", "-d", cache, k, art], ALICE)[0] == 0, "put " + k)
    # An older version's cache under umask 000: progcache/ writable by all;
    # carol plants a settings file of her own there.
    os.chmod(os.path.join(cache, "progcache"), 0o777)
    os.chmod(cache, 0o777)
    config = os.path.join(cache, "progcache", "config")
    subprocess.run(["runuser", "-u", CAROL, "--", "sh", "-c",
                    "umask 022; printf 'max_size = 1K\\n' > '%s'" % config], check=True)
    rc, _, err = run(["put", "-d", cache, "04", art], ALICE, 0o000)
    check(rc == 3 and config in err and CAROL in err and "refused" in err,
          "a settings file of another user is refused, named", (rc, err))
    os.unlink(config)
    for k in ("01", "02", "03"):
        rc, _, err = run(["get", "-d", cache, k], ALICE)
        check(rc == 0, "entry %s is still there (the 1K cap was never honoured)" % k, err)
    check(stat.S_IMODE(os.stat(os.path.join(cache, "progcache")).st_mode) == 0o700
          and stat.S_IMODE(os.stat(cache).st_mode) == 0o700,
          "the loose directories of ours were tightened at the next open")
    # root's settings file is honoured.
    with open(config, "w") as f:
        f.write("max_size = 123M\n")
    os.chmod(config, 0o644)
    rc, out, err = run(["config", "-d", cache], ALICE)
    check(rc == 0 and "123M" in out.replace(" ", "").replace("MiB", "M"),
          "root's settings file is honoured", (rc, out, err))
    os.unlink(config)


def foreign_files(cache, owner):
    uid = pwd.getpwnam(owner).pw_uid
    return [p for p, _, u, _ in walk(cache) if u != uid]


def test_other_users(base, art):
    home = user_dir(base, "owner", ALICE)
    cache = os.path.join(home, "cache")
    check(run(["put", "-d", cache, KEY1, art], ALICE)[0] == 0, "alice's put")
    # Her settings file is hers to decide: others reading her cache honour
    # it (and write nothing).
    check(run(["config", "-d", cache, "max_size", "1G"], ALICE)[0] == 0, "alice's config")
    for who in ("root", CAROL):
        user = None if who == "root" else who
        rc, _, err = run(["put", "-d", cache, KEY2, art], user, 0o000)
        check(rc == 3, "%s's put into alice's cache fails" % who, (rc, err))
        if who == "root":
            check("belongs to " + ALICE in err and "never writes" in err,
                  "root's put says whose cache it is", err)
            check(err.count("warning:") == 1, "one warning", err)
            rc, _, err = run(["get", "-d", cache, KEY1], user)
            check(rc == 1, "root does not load alice's entry (a miss)", (rc, err))
            rc, _, err = run(["clear", "-d", cache], user)
            check(rc == 3 and "never writes" in err, "root's clear is refused", (rc, err))
            rc, _, err = run(["config", "-d", cache, "max_size", "1K"], user)
            check(rc == 3 and "never writes" in err, "root's config is refused", (rc, err))
            rc, out, err = run(["warm", "-a", "sm_90", "-d", cache, kernel_manifest(base)],
                               user)
            check(rc != 0 and "not stored" in (out + err), "root's warm does not store",
                  (rc, out, err))
        check(foreign_files(cache, ALICE) == [], "nothing of %s's in alice's cache" % who,
              foreign_files(cache, ALICE))
        rc, out, err = run(["get", "-d", cache, KEY1], ALICE)
        check(rc == 0 and out == "hello\n", "alice's get after %s ran" % who, (rc, err))
        rc, _, err = run(["put", "-d", cache, KEY2, art], ALICE)
        check(rc == 0, "alice's put after %s ran" % who, err)
        rc, _, err = run(["clear", "-d", cache], ALICE)
        check(rc == 0, "alice's clear after %s ran" % who, err)
        check(run(["put", "-d", cache, KEY1, art], ALICE)[0] == 0, "alice's put again")
    # root with alice's HOME (sudo without -H) and no cache yet: not made.
    fresh = user_dir(base, "fresh", ALICE)
    rc, _, err = run(["put", KEY1, art], None, env={"HOME": fresh})
    check(rc == 3 and "never writes into another user's directory" in err
          and os.listdir(fresh) == [], "root makes no cache in alice's home", (rc, err))


def test_group(base, art, art2):
    team = os.path.join(base, "team")
    os.mkdir(team)
    shutil.chown(team, "root", TEAM)
    os.chmod(team, 0o2770)
    for umask_a, umask_b in ((0o022, 0o077), (0o000, 0o022), (0o077, 0o000)):
        cache = os.path.join(team, "c%03o" % umask_a)
        opt = ["--shared-group", TEAM]
        rc, _, err = run(opt + ["put", "-d", cache, KEY1, art], ALICE, umask_a)
        check(rc == 0, "alice (umask %03o) makes the team's cache" % umask_a, err)
        rc, _, err = run(["config", "-d", cache, "max_size", "1G"], ALICE, umask_a,
                         env={"PROGCACHE_SHARED_GROUP": TEAM})
        check(rc == 0, "alice's config in the team's cache", err)
        rc, out, err = run(opt + ["warm", "-a", "sm_90", "-d", cache, kernel_manifest(base)],
                           ALICE, umask_a)
        check(rc == 0, "alice's warm in the team's cache", (out, err))
        env = {"PROGCACHE_SHARED_GROUP": TEAM}
        rc, out, err = run(["get", "-d", cache, KEY1], BOB, umask_b, env=env)
        check(rc == 0 and out == "hello\n", "bob (umask %03o) reads alice's entry" % umask_b,
              (rc, err))
        rc, out, err = run(["config", "-d", cache], BOB, umask_b, env=env)
        check(rc == 0 and "1G" in out.replace("GiB", "G").replace(" ", ""),
              "bob honours alice's settings file in the team's cache", (rc, out, err))
        # The same key: the same shard, made by alice under her umask.
        rc, _, err = run(["put", "-d", cache, KEY1, art2], BOB, umask_b, env=env)
        check(rc == 0, "bob replaces alice's entry in her shard", err)
        rc, _, err = run(["put", "-d", cache, KEY2, art2], BOB, umask_b, env=env)
        check(rc == 0, "bob puts a new entry", err)
        rc, out, err = run(opt + ["get", "-d", cache, KEY1], ALICE, umask_a)
        check(rc == 0 and out == "world\n", "alice reads bob's entry", (rc, err))
        rc, out, err = run(["warm", "-a", "sm_90", "-d", cache, kernel_manifest(base)], BOB,
                           umask_b, env=env)
        check(rc == 0 and "1 already cached" in out, "bob hits alice's warm", (rc, out, err))
        modes_group(cache, "group cache, umasks %03o/%03o" % (umask_a, umask_b))
        # Without the setting, bob is a reader of alice's directory.
        rc, _, err = run(["put", "-d", cache, "02", art], BOB, umask_b)
        check(rc == 3 and ("never writes" in err or "refused" in err),
              "bob without the setting does not write (nor honour alice's settings)", (rc, err))
        rc, out, err = run(opt + ["clear", "-d", cache], BOB, umask_b)
        check(rc == 0, "bob clears the team's cache (alice's entries too)", (rc, err))
        rc, _, _ = run(opt + ["get", "-d", cache, KEY2], ALICE, umask_a)
        check(rc == 1, "the clear emptied it")
    # The sample, as a member, on the team's cache: --shared-group.
    sample = os.environ.get("PROGCACHE_SAMPLE")
    if sample:
        cache = os.path.join(team, "sample")
        for user, umask in ((ALICE, 0o022), (BOB, 0o077)):
            cmd = ["runuser", "-u", user, "--", sample, "--arch", "sm_90", "--m", "32",
                   "--n", "32", "--k", "32", "--cache-dir", cache, "--shared-group", TEAM]
            p = subprocess.run(cmd, capture_output=True, timeout=300,
                               preexec_fn=lambda: os.umask(umask),
                               env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"})
            out = (p.stdout + p.stderr).decode("utf-8", "replace")
            check(p.returncode == 0, "the sample as %s on the team's cache" % user, out)
            if user == BOB:
                check("HIT" in out, "bob's sample run hits alice's entry", out)
        modes_group(cache, "the sample's team cache")
    # A directory of another group, an unknown group.
    other = user_dir(base, "notteam", ALICE)
    rc, _, err = run(["--shared-group", TEAM, "put", "-d", other, KEY1, art], ALICE)
    check(rc == 3 and TEAM in err and "chgrp" in err, "a directory of another group is refused",
          (rc, err))
    rc, _, err = run(["put", "--shared-group", "no-such-group-x", "-d", other, KEY1, art],
                     ALICE)
    check(rc == 3 and "PROGCACHE_SHARED_GROUP" in err and "no such group" in err,
          "an unknown group is refused", (rc, err))


def admin(cmd):
    """useradd/groupadd/userdel/groupdel, retried: tests running in parallel
    may hold the lock on /etc/passwd for a moment."""
    for _ in range(20):
        p = subprocess.run(cmd, capture_output=True)
        if p.returncode == 0:
            return True
        if b"lock" not in p.stderr:
            break
        time.sleep(0.25)
    print("%s failed: %s" % (" ".join(cmd), p.stderr.decode("utf-8", "replace")))
    return False


def main():
    pt.need_bin()
    if os.geteuid() != 0:
        pt.skip("needs root to make test users and groups (useradd, groupadd)")
    for tool in ("useradd", "userdel", "groupadd", "groupdel", "runuser"):
        if not shutil.which(tool):
            pt.skip("%s is not installed" % tool)
    made_group, made_users = False, []
    base = tempfile.mkdtemp(prefix="progcache-perm-")
    os.chmod(base, 0o755)
    try:
        if not admin(["groupadd", TEAM]):
            return 1
        made_group = True
        for user, groups in ((ALICE, TEAM), (BOB, TEAM), (CAROL, None)):
            cmd = ["useradd", "-M", "-N", "-d", "/nonexistent", "-s", "/bin/sh"]
            if groups:
                cmd += ["-G", groups]
            if not admin(cmd + [user]):
                return 1
            made_users.append(user)
        art = artifact(base, "art", b"hello\n")
        art2 = artifact(base, "art2", b"world\n")
        test_private(base, art)
        test_planted_config(base, art)
        test_other_users(base, art)
        test_group(base, art, art2)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for user in made_users:
            admin(["userdel", user])
        if made_group:
            admin(["groupdel", TEAM])
    return pt.finish("test_tool_perm")


if __name__ == "__main__":
    sys.exit(main())
