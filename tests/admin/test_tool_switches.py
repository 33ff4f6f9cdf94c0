#!/usr/bin/env python3
"""ccache's switches through the real binary (issue 35, item 6):
PROGCACHE_READONLY, PROGCACHE_RECACHE and PROGCACHE_DISABLE with `progcache
warm` (a PTX compile: NVRTC, no GPU) and `put`, each said once on stderr;
`progcache config --json` shows them with their source."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402


def run(args, env=None, cwd=None):
    return pt.run(args, env, timeout=120, drop=("PROGCACHE_REMOTE", "PROGCACHE_DIR",
                                                "PROGCACHE_DISABLE", "PROGCACHE_READONLY",
                                                "PROGCACHE_RECACHE"), cwd=cwd)


def stats(cache):
    rc, out, err = run(["stats", "-d", cache, "--json"])
    check(rc == 0, "stats", err)
    return json.loads(out)


def test_warm(tmp):
    with open(os.path.join(tmp, "a.cu"), "w") as f:
        f.write('extern "C" __global__ void k(float *a) { a[0] = 1.0f; }\n')
    with open(os.path.join(tmp, "m.txt"), "w") as f:
        f.write("a.cu --target ptx\n")
    cache = os.path.join(tmp, "cache")
    warm = ["warm", "-d", cache, "m.txt"]
    # Read-only with no directory: compiled, not stored, no directory made.
    rc, out, err = run(warm, {"PROGCACHE_READONLY": "1"}, cwd=tmp)
    check(rc != 0 and "PROGCACHE_READONLY" in err and not os.path.exists(cache),
          "READONLY: nothing made", (rc, out, err))
    rc, out, err = run(warm, cwd=tmp)
    check(rc == 0 and "1 compiled" in out, "warm", (rc, out, err))
    rc, out, err = run(warm, {"PROGCACHE_READONLY": "yes"}, cwd=tmp)
    check(rc == 0 and "1 already cached" in out and err.count("PROGCACHE_READONLY") == 1,
          "READONLY reads, said once", (rc, out, err))
    before = stats(cache)
    rc, out, err = run(warm, {"PROGCACHE_RECACHE": "1"}, cwd=tmp)
    check(rc == 0 and "1 compiled" in out and err.count("PROGCACHE_RECACHE") == 1,
          "RECACHE compiles again and stores", (rc, out, err))
    after = stats(cache)
    check(after["stores"] == before["stores"] + 1 and after["hits"] == before["hits"],
          "RECACHE: stored over, nothing read", (before, after))
    rc, out, err = run(warm, {"PROGCACHE_DISABLE": "1"}, cwd=tmp)
    check(rc != 0 and "1 failed" in out and err.count("PROGCACHE_DISABLE is set") == 1,
          "DISABLE: compiled, not stored, said once", (rc, out, err))
    check(stats(cache)["stores"] == after["stores"] and stats(cache)["hits"] == after["hits"],
          "DISABLE: nothing counted")
    payload = os.path.join(tmp, "payload")
    with open(payload, "wb") as f:
        f.write(b"abc")
    rc, _, err = run(["put", "-d", cache, "%064x" % 5, payload], {"PROGCACHE_READONLY": "1"})
    rc2, _, _ = run(["get", "-d", cache, "-o", os.path.join(tmp, "o"), "%064x" % 5])
    check(rc == 0 and "PROGCACHE_READONLY" in err and rc2 == 1, "READONLY put stores nothing",
          (rc, rc2, err))
    rc, _, err = run(["put", "-d", cache, "%064x" % 5, payload], {"PROGCACHE_DISABLE": "nope"})
    check(rc == 3 and "PROGCACHE_DISABLE" in err, "a bad value fails, naming it", (rc, err))


def test_config(tmp):
    rc, out, err = run(["config", "-d", tmp, "--json"], {"PROGCACHE_RECACHE": "1"})
    check(rc == 0, "config --json", err)
    text = json.dumps(json.loads(out))
    for name in ("disable", "readonly", "recache"):
        check('"%s"' % name in text, "config lists " + name)
    rc, out, _ = run(["config", "-d", tmp])
    check(rc == 0 and "recache" in out and "environment only" in out, "config text", out)


def main():
    pt.need_bin()
    return pt.run_tests((test_warm, test_config), "test_tool_switches")


if __name__ == "__main__":
    sys.exit(main())
