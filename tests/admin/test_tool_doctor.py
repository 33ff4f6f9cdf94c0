#!/usr/bin/env python3
"""`progcache doctor` (issue 35, item 4) through the real binary: a good
cache is all well (exit 0); each wrong thing is one FAIL line with its fix
and exit 1: loose modes, another user's cache (as root), a damaged entry, a
file that is not the cache's, a bad setting, a cap the disk cannot hold, an
NVRTC that cannot be loaded, an unreachable remote tier. Notes (no driver, a
switch on) do not fail it; settings say where they come from; nothing is
changed."""

import os
import pwd
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

DROP = ("PROGCACHE_REMOTE", "PROGCACHE_DIR", "PROGCACHE_DISABLE", "PROGCACHE_READONLY",
        "PROGCACHE_RECACHE", "PROGCACHE_MAX_SIZE", "PROGCACHE_NVRTC_LIBRARY")


def run(args, env=None):
    return pt.run(args, env, timeout=300, drop=DROP)


def doctor(cache, env=None):
    rc, out, err = run(["doctor", "-d", cache], env)
    lines = {}
    for line in out.splitlines():  # "%-5s %-14s %s": status, what, text
        status, what, text = line[:5].strip(), line[6:20].strip(), line[21:]
        if status in ("ok", "note", "FAIL"):
            lines.setdefault(what, []).append((status, text))
    return rc, out, err, lines


def fails(lines):
    return {k: [t for s, t in v if s == "FAIL"] for k, v in lines.items()
            if any(s == "FAIL" for s, _ in v)}


def make_cache(tmp, name="cache"):
    cache = os.path.join(tmp, name)
    payload = os.path.join(tmp, "payload")
    with open(payload, "wb") as f:
        f.write(b"y" * 5000)
    rc, _, err = run(["put", "-d", cache, "%064x" % 3, payload])
    check(rc == 0, "put", err)
    # A cap any test machine's disk holds (the default 5 GiB may not fit).
    rc, _, err = run(["config", "-d", cache, "max_size", "100M"])
    check(rc == 0, "config max_size", err)
    return cache


def test_good(tmp):
    cache = make_cache(tmp)
    rc, out, err, lines = doctor(cache)
    check(rc == 0 and out.rstrip().endswith("all is well") and not fails(lines),
          "a good cache is all well", (rc, out, err))
    for what in ("nvrtc", "driver", "directory", "owner", "modes", "seals", "locks",
                 "free space", "entries", "setting", "remote"):
        check(what in lines, "doctor says something of " + what, out)
    check(any("NVRTC 13" in t or "NVRTC 12" in t for _, t in lines.get("nvrtc", [])),
          "the NVRTC version", lines.get("nvrtc"))
    # Where each setting comes from.
    texts = [t for _, t in lines.get("setting", [])]
    check("low_water_percent = 90 (default)" in texts, "a default setting says so", texts)
    check(any(t.startswith("max_size = 100M (settings file: ") for t in texts),
          "a settings file setting", texts)
    rc, out, err, lines = doctor(cache, {"PROGCACHE_MAX_SIZE": "50M"})
    texts = [t for _, t in lines.get("setting", [])]
    check(rc == 0 and "max_size = 50M (environment: PROGCACHE_MAX_SIZE)" in texts,
          "an environment setting", texts)
    # A switch on is a note, not a failure.
    rc, out, err, lines = doctor(cache, {"PROGCACHE_READONLY": "1"})
    check(rc == 0 and any(s == "note" and t.startswith("readonly = 1")
                          for s, t in lines["setting"]), "a switch on is a note", out)
    # A directory not made yet is fine, and is not made.
    missing = os.path.join(tmp, "not-yet")
    rc, out, err, lines = doctor(missing, {"PROGCACHE_MAX_SIZE": "100M"})
    check(rc == 0 and not os.path.exists(missing), "a missing directory", (rc, out, err))


def test_modes(tmp):
    cache = make_cache(tmp)
    os.chmod(cache, 0o777)
    rc, out, err, lines = doctor(cache)
    f = fails(lines)
    check(rc == 1 and "modes" in f and "chmod o-rwx" in f["modes"][0], "mode 0777", out)
    check(os.stat(cache).st_mode & 0o7777 == 0o777, "doctor changes nothing")
    os.chmod(cache, 0o755)
    rc, out, err, lines = doctor(cache)
    f = fails(lines)
    check(rc == 1 and "modes" in f and "chmod 700" in f["modes"][0], "mode 0755", out)
    os.chmod(cache, 0o700)
    rc, out, _, _ = doctor(cache)
    check(rc == 0, "mode 0700 is well", out)


def test_entries(tmp):
    cache = make_cache(tmp)
    shard = os.path.join(cache, "entries", os.listdir(os.path.join(cache, "entries"))[0])
    with open(os.path.join(shard, "notes.txt"), "w") as f:
        f.write("mine\n")
    rc, out, err, lines = doctor(cache)
    check(rc == 1 and "foreign files" in fails(lines), "a foreign file", out)
    os.unlink(os.path.join(shard, "notes.txt"))
    entry = pt.entry_path(cache, sorted(pt.entry_files(cache))[0])
    with open(entry, "r+b") as f:
        f.seek(10)
        f.write(b"Z")
    rc, out, err, lines = doctor(cache)
    f = fails(lines)
    check(rc == 1 and "entries" in f and "verify --fix" in f["entries"][0], "a damaged entry",
          out)
    check(os.path.exists(entry), "doctor removes nothing")


def test_settings_and_tools(tmp):
    cache = make_cache(tmp)
    rc, out, err, lines = doctor(cache, {"PROGCACHE_MAX_SIZE": "abc"})
    check(rc == 1 and "PROGCACHE_MAX_SIZE" in fails(lines).get("settings", [""])[0],
          "a bad setting", out)
    rc, out, err, lines = doctor(cache, {"PROGCACHE_MAX_SIZE": "1000T"})
    check(rc == 1 and "free space" in fails(lines), "a cap the disk cannot hold", out)
    rc, out, err, lines = doctor(cache, {"PROGCACHE_NVRTC_LIBRARY": "/nonexistent/libnvrtc.so"})
    f = fails(lines)
    check(rc == 1 and "nvrtc" in f and "fix:" in f["nvrtc"][0], "no NVRTC", out)
    rc, out, err, lines = doctor(cache, {"PROGCACHE_REMOTE": "redis://127.0.0.1:1"})
    f = fails(lines)
    check(rc == 1 and "remote" in f and "fix:" in f["remote"][0], "an unreachable remote", out)


def test_other_user(tmp):
    if os.geteuid() != 0:
        print("NOTE: not root: another user's cache is not tried")
        return
    cache = make_cache(tmp)
    nobody = pwd.getpwnam("nobody")
    for root, dirs, files in os.walk(cache):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), nobody.pw_uid, nobody.pw_gid)
    os.lchown(cache, nobody.pw_uid, nobody.pw_gid)
    rc, out, err, lines = doctor(cache)
    f = fails(lines)
    check(rc == 1 and "owner" in f and "nobody" in f["owner"][0], "another user's cache", out)


def main():
    pt.need_bin()
    return pt.run_tests((test_good, test_modes, test_entries, test_settings_and_tools,
                         test_other_user), "test_tool_doctor")


if __name__ == "__main__":
    sys.exit(main())
