#!/usr/bin/env python3
"""A hostile member of the team (issue 29, cases 3 and 4), through the real
binary, with real users and a group made for the test (useradd, groupadd;
run as them with runuser). In a team's cache every member may write the
state files (progcache/lock is 0660): bob fills alice's lock file and
renames it where alice's trust goes.

- Case 3, a forged NVRTC record: bob's line "12.9 <alice's NVRTC>" renamed
  to progcache/nvrtc-<alice's uid>. Alice's next warm still hits her entry
  (the record, writable by the group, is ignored and counted:
  records_untrusted), never "fix or unset PROGCACHE_NVRTC_VERSION".
  A record of alice's own that names the wrong version (0600, edited in
  place) refuses that one compile, naming the record (not the variable),
  is counted and mended: the next warm hits.
- Case 4, bytes planted as alice's own: bob's bytes in alice's lock file
  renamed onto her entry. Alice opening the team's directory without the
  group setting (she trusts only her own and root's files) gets a miss,
  counted (entries_untrusted), never bob's bytes. With the group setting
  the group's files are trusted: that is the contract of a team cache
  (docs/SECURITY.md, "A member of the team").
- The settings file: bob's "max_size = 1K" renamed to progcache/config is
  refused by alice's command without the group setting (named), and
  honoured by a group-trusting one (the team's file).

Needs root; skips (77) otherwise. Reuses test_tool_perm's helpers; users
and group are its names (pid-suffixed) and are removed whatever happens.
Environment: PROGCACHE_BIN."""

import glob
import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_tool_perm as tp  # noqa: E402
from test_tool_perm import check, run  # noqa: E402

TEAM, ALICE, BOB = tp.TEAM, tp.ALICE, tp.BOB
OPT = ["--shared-group", TEAM]


def as_bob(script):
    """A shell script run as bob (umask 007, as a team member's)."""
    p = subprocess.run(["runuser", "-u", BOB, "--", "sh", "-c", "umask 007; " + script],
                       capture_output=True)
    return p.returncode, p.stderr.decode("utf-8", "replace")


def counters(cache, user):
    rc, out, err = run(OPT + ["stats", "--json", "-d", cache], user)
    check(rc == 0, "stats", err)
    return json.loads(out) if rc == 0 else {}


def lock_of(cache):
    lock = os.path.join(cache, "progcache", "lock")
    st = os.stat(lock)
    check(st.st_uid == pwd.getpwnam(ALICE).pw_uid and st.st_mode & 0o777 == 0o660,
          "progcache/lock is alice's and the group's (0660)", oct(st.st_mode))
    return lock


def test_record(base):
    team = os.path.join(base, "team-record")
    cache = os.path.join(team, "cache")
    manifest = tp.kernel_manifest(team)
    warm = ["warm", "-a", "sm_90", "-d", cache, manifest]
    rc, out, err = run(OPT + warm, ALICE)
    check(rc == 0, "alice's warm compiles into the team's cache", (out, err))
    uid = pwd.getpwnam(ALICE).pw_uid
    record = os.path.join(cache, "progcache", "nvrtc-%d" % uid)
    with open(record) as f:
        line = f.readline()
    check(line and line.split(" ", 1)[0].count(".") == 1, "alice's record has her line", line)
    version, rest = line.split(" ", 1)
    forged = "12.9 " + rest if version != "12.9" else "11.8 " + rest

    # Case 3: bob fills alice's lock and renames it onto her record.
    lock = lock_of(cache)
    rc, err = as_bob("printf '%%s' '%s' > '%s' && mv -f '%s' '%s'"
                     % (forged.replace("'", ""), lock, lock, record))
    check(rc == 0, "bob renames alice's lock, holding his line, onto her record", err)
    check(os.stat(record).st_mode & 0o777 == 0o660, "the forged record is 0660")
    rc, out, err = run(OPT + warm, ALICE)
    check(rc == 0 and "1 already cached" in out, "alice still hits her entry", (rc, out, err))
    check("PROGCACHE_NVRTC_VERSION" not in out + err,
          "nothing is blamed on a variable nobody set", (out, err))
    check(counters(cache, ALICE).get("records_untrusted", 0) >= 1, "records_untrusted counts it",
          counters(cache, ALICE))
    with open(record) as f:
        check(f.read().startswith(version + " "), "the next compile's line replaced it")

    # A record of alice's own (0600) naming another version: ignored, said,
    # and the key is NVRTC's own.
    with open(record, "r+") as f:
        text = f.read()
        f.seek(0)
        f.write(forged + text[len(line):])
        f.truncate()
    check(os.stat(record).st_uid == uid and os.stat(record).st_mode & 0o777 == 0o600,
          "alice's record stays hers, 0600")
    before = counters(cache, ALICE).get("records_untrusted", 0)
    rc, out, err = run(OPT + warm, ALICE)
    check(rc != 0 and "the NVRTC record in %s/progcache/ (nvrtc-%d" % (cache, uid) in err
          and "ignored" in err and "PROGCACHE_NVRTC_VERSION" not in err,
          "a wrong record of hers: the compile names the record, says it is ignored",
          (rc, out, err))
    check(counters(cache, ALICE).get("records_untrusted", 0) == before + 1, "and counts it")
    with open(record) as f:
        check(f.read().startswith(version + " "), "the record is mended")
    rc, out, err = run(OPT + warm, ALICE)
    check(rc == 0 and "1 already cached" in out, "and the next warm hits", (rc, out, err))


def test_entry(base, art):
    team = os.path.join(base, "team-entry")
    cache = os.path.join(team, "cache")
    rc, _, err = run(OPT + ["put", "-d", cache, tp.KEY1, art], ALICE)
    check(rc == 0, "alice puts into the team's cache", err)
    entries = glob.glob(os.path.join(cache, "entries", "*", "*"))
    check(len(entries) == 1, "one entry", entries)
    if len(entries) != 1:
        return
    entry = entries[0]
    rc, out, err = run(["get", "-d", cache, tp.KEY1], ALICE)
    check(rc == 0 and out == "hello\n", "alice, without the group setting, reads her entry",
          (rc, out, err))

    # Case 4: bob's bytes, in alice's lock, renamed onto her entry.
    lock = lock_of(cache)
    rc, err = as_bob("printf 'evil\\n' > '%s' && mv -f '%s' '%s'" % (lock, lock, entry))
    check(rc == 0, "bob renames alice's lock, holding his bytes, onto her entry", err)
    st = os.stat(entry)
    check(st.st_uid == pwd.getpwnam(ALICE).pw_uid and st.st_mode & 0o777 == 0o660,
          "the planted entry is alice's, 0660")
    rc, out, err = run(["get", "-d", cache, tp.KEY1], ALICE)
    check(rc == 1 and "evil" not in out, "alice without the group setting: a miss, not bob's "
          "bytes", (rc, out, err))
    check(counters(cache, ALICE).get("entries_untrusted", 0) >= 1, "entries_untrusted counts it",
          counters(cache, ALICE))
    # With the group setting, the group's files are trusted: the contract.
    rc, out, err = run(OPT + ["get", "-d", cache, tp.KEY1], ALICE)
    check(rc == 0 and out == "evil\n", "alice trusting the group reads the group's file",
          (rc, out, err))
    rc, _, err = run(OPT + ["put", "-d", cache, tp.KEY1, art], ALICE)
    check(rc == 0, "alice's put replaces it", err)
    rc, out, err = run(["get", "-d", cache, tp.KEY1], ALICE)
    check(rc == 0 and out == "hello\n", "and her own entry is hers again", (rc, out, err))

    # The settings file: bob's 1K cap, renamed from alice's lock.
    config = os.path.join(cache, "progcache", "config")
    rc, err = as_bob("printf 'max_size = 1K\\n' > '%s' && mv -f '%s' '%s'" % (lock, lock, config))
    check(rc == 0, "bob renames alice's lock, holding a 1K cap, onto the settings file", err)
    rc, _, err = run(["put", "-d", cache, tp.KEY2, art], ALICE)
    check(rc == 3 and config + " is refused" in err and "group can write it" in err,
          "alice's put without the group setting refuses it, naming it", (rc, err))
    rc, out, err = run(["get", "-d", cache, tp.KEY1], ALICE)
    check(rc == 0 and out == "hello\n" and config + " is ignored" in err,
          "alice's get without the group setting: the open ignores it, saying so", (rc, err))
    rc, out, err = run(OPT + ["config", "-d", cache], ALICE)
    check(rc == 0 and "max_size" in out and config in out,
          "alice trusting the group: the group's settings file is the team's, honoured",
          (rc, out, err))


def main():
    tp.pt.need_bin()
    if os.geteuid() != 0:
        tp.pt.skip("needs root to make test users and groups (useradd, groupadd)")
    for tool in ("useradd", "userdel", "groupadd", "groupdel", "runuser"):
        if not shutil.which(tool):
            tp.pt.skip("%s is not installed" % tool)
    made_group, made_users = False, []
    base = tempfile.mkdtemp(prefix="progcache-trust-")
    os.chmod(base, 0o755)
    try:
        if not tp.admin(["groupadd", TEAM]):
            return 1
        made_group = True
        for user in (ALICE, BOB):
            cmd = ["useradd", "-M", "-N", "-d", "/nonexistent", "-s", "/bin/sh", "-G", TEAM]
            if not tp.admin(cmd + [user]):
                return 1
            made_users.append(user)
        for name in ("team-record", "team-entry"):
            team = os.path.join(base, name)
            os.mkdir(team)
            shutil.chown(team, "root", TEAM)
            os.chmod(team, 0o2770)
        check(grp.getgrnam(TEAM).gr_gid == os.stat(os.path.join(base, "team-entry")).st_gid,
              "the team's directories are the team's")
        art = tp.artifact(base, "art", b"hello\n")
        test_entry(base, art)
        test_record(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for user in made_users:
            tp.admin(["userdel", user])
        if made_group:
            tp.admin(["groupdel", TEAM])
    return tp.pt.finish("test_tool_trust")


if __name__ == "__main__":
    sys.exit(main())
