#!/usr/bin/env python3
"""The progcache admin subcommands' conventions through the real binary:
--help and usage errors (exit 2) for all, every command on an empty cache,
--dir defaults from the environment.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(the cuda.core reference data; copied before use, never modified)."""

import json
import os
import sys
import tarfile

import tool_admin_fixture as fx
from tool_admin_fixture import check, copy_reference, entry_files, run


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


def test_dir_defaults(tmp):
    cache = copy_reference(tmp, "envdir")
    rc, out, err = run(["ls"], env={"PROGCACHE_DIR": cache})
    check(rc == 0 and len(out.splitlines()) == 1 + 6, "PROGCACHE_DIR is the default --dir (a header, 6 entries)", err)
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
    check(len(out.splitlines()) == 1 + 6, "--dir overrides PROGCACHE_DIR (a header, 6 entries)")


if __name__ == "__main__":
    sys.exit(fx.main((test_usage, test_empty, test_dir_defaults), "test_tool_admin_usage"))
