#!/usr/bin/env python3
"""The progcache command on directories a careless or hostile user hands it
(issue 12), through the real binary:

- a directory that is not a cache (a home with tmp/ and files): refused,
  nothing in it swept; a cache's tmp/ with a user's old file: the file stays;
- clear, prune and verify --fix leave files that are not entries, and verify
  prints them ("not an entry, left alone: PATH");
- an entry copied (with its extended attributes) to another key's path: a
  miss, and verify says "sealed for another entry";
- a FIFO at an entry's path, and at progcache/stats: get, stats and verify
  return at once; verify --fix removes the FIFO at the entry's path;
- under ulimit -f, put exits 1 with the limit in the message, is not killed
  by SIGXFSZ, and leaves no temp file.

Environment: PROGCACHE_BIN (the progcache tool)."""

import hashlib
import os
import resource
import shutil
import signal
import stat
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check, write  # noqa: E402

BIN = pt.BIN


def run(args, limit_fsize=None, timeout=20):
    def limit():
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    return pt.run(args, timeout=timeout, drop=("PROGCACHE_DIR", "PROGCACHE_REMOTE"),
                 preexec_fn=limit)


def read(path):
    """The file's bytes, or None when it is gone."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def entry_path(cache, key_hex):
    return pt.entry_path(cache, hashlib.sha256(bytes.fromhex(key_hex)).hexdigest())


KEY_A = "aa" * 32
KEY_B = "bb" * 32


def test_foreign_directory(tmp):
    home = os.path.join(tmp, "home")
    os.makedirs(os.path.join(home, "tmp"))
    old = os.path.join(home, "tmp", "old-file")
    write(old, b"a user's file")
    age(old, 7200)
    write(os.path.join(home, ".bashrc"), b"# mine\n")
    value = os.path.join(tmp, "value.bin")
    write(value, b"some bytes")
    for args in (["put", KEY_A, value], ["ls"], ["stats"], ["verify"], ["verify", "--fix"],
                 ["clear"], ["prune", "--older-than", "1s"]):
        rc, out, err = run(args + ["--dir", home])
        check(rc == 3 and "not a cache directory" in err and ".bashrc" in err and
              "choose an empty or new directory" in err,
              "%s on a home directory: refused" % args[0], "%r %s %s" % (rc, out, err))
    check(read(old) == b"a user's file", "the home's tmp/old-file is still there")
    check(sorted(os.listdir(home)) == [".bashrc", "tmp"], "nothing was created in the home",
          os.listdir(home))

    # A cache whose tmp/ holds a user's old file: a put sweeps only its own.
    cache = os.path.join(tmp, "cache")
    os.makedirs(os.path.join(cache, "tmp"))
    mine = os.path.join(cache, "tmp", "old-file")
    write(mine, b"still mine")
    age(mine, 7200)
    crashed = os.path.join(cache, "tmp", "entry-0123456789abcdef")
    write(crashed, b"a crashed put")
    age(crashed, 7200)
    rc, out, err = run(["put", KEY_A, value, "--dir", cache])
    check(rc == 0, "put into a cache with a foreign tmp file", err)
    check(read(mine) == b"still mine", "the sweep left tmp/old-file")
    check(not os.path.exists(crashed), "the sweep removed a crashed put's temp file")


def test_foreign_files_left_alone(tmp):
    cache = os.path.join(tmp, "cache")
    value = os.path.join(tmp, "value.bin")
    write(value, b"some bytes")
    check(run(["put", KEY_A, value, "--dir", cache])[0] == 0, "put A")
    check(run(["put", KEY_B, value, "--dir", cache])[0] == 0, "put B")
    shard = os.path.dirname(entry_path(cache, KEY_A))
    foreign = [os.path.join(shard, "notes.txt"),
               entry_path(cache, KEY_A) + ".orig",
               os.path.join(cache, "entries", "README"),
               os.path.join(cache, "tmp", "download.iso")]
    os.makedirs(os.path.join(cache, "tmp"), mode=0o700, exist_ok=True)  # cuda.core makes it
    for f in foreign:
        write(f, b"keep me")
        age(f, 30 * 86400)
    rc, out, err = run(["verify", "--dir", cache])
    for f in foreign:
        check("not an entry, left alone: %s" % f in out, "verify names " + f, out)
    rc, out, err = run(["verify", "--fix", "--dir", cache])
    check("left alone" in out, "verify --fix reports them too", out)
    rc, out, err = run(["prune", "--older-than", "1d", "--dir", cache])
    check(rc == 0, "prune", err)
    rc, out, err = run(["clear", "--dir", cache])
    # A and B (bytes of no known kind: verify --fix keeps them), not the
    # foreign files.
    check(rc == 0 and "removed 2 entries" in out, "clear counts entries only", out + err)
    for f in foreign:
        check(read(f) == b"keep me", "left alone: " + f)
    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 0 and "checked 0 entries" in out and "4 files that are not entries left alone" in out,
          "verify of only foreign files: exit 0, counted", out + err)


def test_copied_entry(tmp):
    cache = os.path.join(tmp, "cache")
    value = os.path.join(tmp, "value.bin")
    write(value, b"value of A")
    check(run(["put", KEY_A, value, "--dir", cache])[0] == 0, "put A")
    write(value, b"value of B")
    check(run(["put", KEY_B, value, "--dir", cache])[0] == 0, "put B")
    a, b = entry_path(cache, KEY_A), entry_path(cache, KEY_B)
    try:
        seal = os.getxattr(a, "user.progcache.sha256")
    except OSError:
        print("copied entry: skipped (no user xattrs on this file system)")
        return
    os.unlink(b)
    shutil.copy2(a, b)  # bytes and extended attributes, as cp --preserve=xattr
    check(os.getxattr(b, "user.progcache.sha256") == seal, "the copy carries A's seal")
    rc, out, err = run(["verify", "--dir", cache])
    check(rc == 1 and "sealed for another entry" in out, "verify: sealed for another entry", out)
    rc, out, err = run(["get", KEY_B, "--dir", cache])
    check(rc == 1 and "a miss" in err and out == "", "get B: a miss, not A's bytes", out + err)
    check(not os.path.exists(b), "the copy was removed")
    rc, out, err = run(["get", KEY_A, "--dir", cache])
    check(rc == 0 and out == "value of A", "A is still a hit", out + err)


def test_fifo(tmp):
    cache = os.path.join(tmp, "cache")
    value = os.path.join(tmp, "value.bin")
    write(value, b"v")
    check(run(["put", KEY_A, value, "--dir", cache])[0] == 0, "put A")
    a = entry_path(cache, KEY_A)
    os.unlink(a)
    os.mkfifo(a)
    rc, out, err = run(["get", KEY_A, "--dir", cache], timeout=5)
    check(rc == 1 and "a miss" in err, "get of a FIFO entry: a miss, at once", "%r %s" % (rc, err))
    rc, out, err = run(["verify", "--dir", cache], timeout=5)
    check(rc == 1 and "a FIFO where an entry belongs" in out, "verify reports the FIFO", out + err)
    rc, out, err = run(["verify", "--fix", "--dir", cache], timeout=5)
    check(rc == 1 and "[removed]" in out and not os.path.lexists(a), "verify --fix removes the FIFO",
          out + err)
    stats = os.path.join(cache, "progcache", "stats")
    os.unlink(stats)
    os.mkfifo(stats)
    for args in (["stats"], ["ls"], ["verify"]):
        rc, out, err = run(args + ["--dir", cache], timeout=5)
        check(rc == 0, "%s with a FIFO at progcache/stats: no hang" % args[0], "%r %s" % (rc, err))
    check(stat.S_ISFIFO(os.lstat(stats).st_mode), "the FIFO at progcache/stats is left alone")


def test_ulimit(tmp):
    cache = os.path.join(tmp, "cache")
    value = os.path.join(tmp, "value.bin")
    write(value, b"x")
    check(run(["put", KEY_A, value, "--dir", cache])[0] == 0, "put A")
    write(value, b"x" * 100000)
    rc, out, err = run(["put", KEY_B, value, "--dir", cache], limit_fsize=50000)
    check(rc is not None and rc != -signal.SIGXFSZ, "put under ulimit -f: not killed by SIGXFSZ",
          "%r %s" % (rc, err))
    check(rc == 3 and "file size limit (ulimit -f) of 50000 bytes" in err,
          "put under ulimit -f: exit 3, the limit in the message", "%r %s" % (rc, err))
    leftovers = [n for d in ("tmp", "progcache", "progcache/tmp")
                 if os.path.isdir(os.path.join(cache, d))
                 for n in os.listdir(os.path.join(cache, d))
                 if n.startswith(("entry-", "state-", "stats-"))]
    check(leftovers == [], "no temp files left", leftovers)
    check(not os.path.exists(entry_path(cache, KEY_B)), "no entry for B")


def main():
    pt.need_bin()
    return pt.run_tests((test_foreign_directory, test_foreign_files_left_alone, test_copied_entry,
                        test_fifo, test_ulimit), "test_tool_foreign",
                       "progcache-tool-adversarial-")


if __name__ == "__main__":
    sys.exit(main())
