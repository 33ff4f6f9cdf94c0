#!/usr/bin/env python3
"""Other writers stay within the cap (issue 20, item 8), through the real
binary:

- cuda.core-shaped writes (a temp file made by tempfile.mkstemp in tmp/,
  os.replace'd into entries/<2 hex>/<62 hex>, the way cuda.core's
  FileStreamProgramCache writes) between progcache puts: after every put
  the directory holds at most its cap (nothing writes concurrently here, so
  the drift docs/FORMAT.md bounds is 0), and `progcache stats --json`
  counts the rescans and the bytes they found;
- a directory nobody else writes to is not rescanned on every put;
- a progcache put killed with SIGKILL leaves its temp file in
  progcache/tmp/, where cuda.core neither counts nor sweeps it: cuda.core's
  own size total (every file in tmp/ counts) holds none of it, and, with a
  live cuda.core (the virtual environment test_cuda_core_diff makes, when
  present), a capped FileStreamProgramCache keeps every committed entry;
- with a live cuda.core, its writes between progcache puts: the cap holds.

Environment: PROGCACHE_BIN (the progcache tool). --venv DIR: the virtual
environment with cuda-core (optional)."""

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
CAP = 1 << 20


def env_for(cap=CAP):
    env = dict(os.environ)
    for name in ("PROGCACHE_DIR", "PROGCACHE_REMOTE"):
        env.pop(name, None)
    env["PROGCACHE_MAX_SIZE"] = str(cap)
    env["PROGCACHE_NO_FSYNC"] = "1"
    return env


def run(args, cap=CAP):
    p = subprocess.run([BIN] + args, capture_output=True, env=env_for(cap), timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def measure(cache):
    """What entries/ holds: the truth, not a counter."""
    total = 0
    top = os.path.join(cache, "entries")
    for shard in os.listdir(top) if os.path.isdir(top) else []:
        for name in os.listdir(os.path.join(top, shard)):
            path = os.path.join(top, shard, name)
            if os.path.isfile(path) and not os.path.islink(path):
                total += os.path.getsize(path)
    return total


def cuda_core_shaped_write(cache, size):
    """An entry written as cuda.core writes one: mkstemp in tmp/, replace."""
    tmp = os.path.join(cache, "tmp")
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    name = secrets.token_hex(32)
    shard = os.path.join(cache, "entries", name[:2])
    os.makedirs(shard, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="entry-", dir=tmp)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(size))
    os.replace(path, os.path.join(shard, name[2:]))


def stats(cache):
    rc, out, err = run(["stats", "--json", "--dir", cache])
    check(rc == 0, "stats --json", err)
    return json.loads(out) if rc == 0 else {}


def counter(s, name):
    """A counter of `progcache stats --json`, wherever the object keeps it."""
    if name in s:
        return s[name]
    for v in s.values():
        if isinstance(v, dict) and name in v:
            return v[name]
    return None


def put(cache, work, i, size=10 * 1024):
    value = os.path.join(work, "value")
    with open(value, "wb") as f:
        f.write(os.urandom(size))
    rc, _, err = run(["put", "--dir", cache, "%064x" % (1000 + i), value])
    check(rc == 0, "progcache put %d" % i, err)


def test_shaped_writes(work):
    cache = os.path.join(work, "shaped")
    put(cache, work, 0)
    worst = 0
    for i in range(1, 21):
        cuda_core_shaped_write(cache, 200 * 1024)
        put(cache, work, i)
        held = measure(cache)
        worst = max(worst, held)
        check(held <= CAP, "after put %d the directory holds %d bytes, over the cap %d"
              % (i, held, CAP))
    s = stats(cache)
    rescans = counter(s, "other_writer_rescans")
    found = counter(s, "other_writer_bytes")
    check(rescans is not None and rescans >= 20, "other_writer_rescans counts them", s)
    check(found is not None and found >= 20 * 200 * 1024, "other_writer_bytes", s)
    check(counter(s, "evictions"), "evictions made room", s)
    print("shaped writes: at most %d bytes after a put (cap %d), %s rescans, %s bytes found"
          % (worst, CAP, rescans, found))

    # Quiet for longer than the settle time: the next put rescans once
    # more (it cannot tell a write in the same tick), the ones after do not.
    time.sleep(2.5)
    put(cache, work, 100)
    before = counter(stats(cache), "other_writer_rescans")
    for i in range(101, 106):
        put(cache, work, i)
    after = counter(stats(cache), "other_writer_rescans")
    check(before == after, "no rescans while nobody else writes", (before, after))
    cuda_core_shaped_write(cache, 300 * 1024)
    put(cache, work, 106)
    check(counter(stats(cache), "other_writer_rescans") == after + 1,
          "a write after a quiet spell is seen at the next put")
    check(measure(cache) <= CAP, "and the cap holds")


def killed_put(cache, work):
    """A progcache put killed with SIGKILL while it writes its temp file."""
    big = os.path.join(work, "big")
    with open(big, "wb") as f:
        f.truncate(64 << 20)
    own_tmp = os.path.join(cache, "progcache", "tmp")
    env = env_for(1 << 40)
    p = subprocess.Popen([BIN, "put", "--dir", cache, "--max-artifact-size", "1G", "%064x" % 7,
                          big], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = []
    while p.poll() is None and not seen:
        if os.path.isdir(own_tmp):
            seen = [n for n in os.listdir(own_tmp) if n.startswith("entry-")]
    p.kill()
    p.wait()
    os.unlink(big)
    return seen


def cuda_core_tmp_total(cache):
    """What cuda.core adds to its size total for tmp/: every file there."""
    tmp = os.path.join(cache, "tmp")
    if not os.path.isdir(tmp):
        return 0
    return sum(os.path.getsize(os.path.join(tmp, n)) for n in os.listdir(tmp)
               if os.path.isfile(os.path.join(tmp, n)))


def test_killed_writers(work, venv_py):
    cache = os.path.join(work, "killed")
    put(cache, work, 0)
    left = []
    for attempt in range(3):
        left += killed_put(cache, work)
    check(left, "a killed put left a temp file (the test caught it mid-write)")
    own = os.listdir(os.path.join(cache, "progcache", "tmp"))
    check(any(n.startswith("entry-") for n in own), "the temp file is in progcache/tmp/", own)
    check(cuda_core_tmp_total(cache) == 0, "cuda.core counts none of it",
          cuda_core_tmp_total(cache))
    if not venv_py:
        return
    script = r"""
import sys
from cuda.core.utils import FileStreamProgramCache
cache = FileStreamProgramCache(sys.argv[1], max_size_bytes=64 * 1024)
for i in range(6):
    cache[b"key-%d" % i] = b"v" * 1000
print(len(cache))
"""
    p = subprocess.run([venv_py, "-c", script, cache], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "cuda.core writes into the cache", p.stderr[-2000:])
    # The progcache entry (10 KiB) plus cuda.core's six: nothing evicted
    # for temp files that are not cuda.core's to count.
    check(p.stdout.strip() == "7", "cuda.core kept every committed entry", p.stdout)


def test_live_cuda_core(work, venv_py):
    cache = os.path.join(work, "live")
    put(cache, work, 0)
    script = r"""
import os, sys
from cuda.core.utils import FileStreamProgramCache
with FileStreamProgramCache(sys.argv[1]) as cache:
    cache[os.urandom(16)] = os.urandom(int(sys.argv[2]))
"""
    for i in range(1, 11):
        p = subprocess.run([venv_py, "-c", script, cache, str(200 * 1024)], capture_output=True,
                           text=True, timeout=120)
        check(p.returncode == 0, "cuda.core write %d" % i, p.stderr[-2000:])
        put(cache, work, i)
        check(measure(cache) <= CAP, "live cuda.core: after put %d the directory holds %d bytes"
              % (i, measure(cache)))
    print("live cuda.core: %d bytes after the last put (cap %d)" % (measure(cache), CAP))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=None)
    args = ap.parse_args()
    pt.need_bin()
    venv_py = None
    if args.venv:
        py = os.path.join(args.venv, "bin", "python")
        probe = "import cuda.core.utils"
        if os.path.exists(py) and subprocess.run([py, "-c", probe],
                                                 capture_output=True).returncode == 0:
            venv_py = py
    if not venv_py:
        print("note: the live cuda.core parts are skipped: no virtual environment with "
              "cuda-core at %s (test_cuda_core_diff makes it)" % args.venv)
    with tempfile.TemporaryDirectory(prefix="progcache-others-") as work:
        test_shaped_writes(work)
        test_killed_writers(work, venv_py)
        if venv_py:
            test_live_cuda_core(work, venv_py)
    return pt.finish("test_other_writers")


if __name__ == "__main__":
    sys.exit(main())
