#!/usr/bin/env python3
"""Listing and charts at any size (issue 32).

`progcache ls` without a sort streams: it prints each entry as
the walk reads it, in name order, instead of gathering every entry first.

Shown by work, not time: a reader takes the first line and stops reading,
so ls can run ahead by at most what the pipe and its output buffer hold
(about 70 KiB, some 600 lines here). Then an entry is written into the last
shard (entries/ff/). A streaming ls, which had not reached that shard,
lists it; one that gathered everything before printing its first line does
not. A sorted listing (--sort size) is complete and sorted, and its memory
does not grow with the number of entries: with runs of 64 rows
(PROGCACHE_LS_SORT_ROWS, what runs of 4096 do at a million entries), the
peak resident memory of `ls --sort lru --json` over 16,000 entries is that
over 4,000 (holding every row, as before, took 3.5 MB more), its order is
right, and its temporary files are gone afterwards. Ended by SIGINT or
SIGTERM in the middle of its merge (blocked writing to a reader that
stopped reading), it leaves no temporary file behind either: its runs have
no name.

`progcache stats --charts` reads a bounded sample (the first 1024 entries
the walk finds) and scales it: at 12,000 entries it says how many it read,
1024 of 12,000, and its buckets add up to the whole.

Environment: PROGCACHE_BIN (the progcache tool)."""

import json
import os
import resource
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

ENTRIES = 4000  # about 110 bytes a line: far more than the pipe holds


def name(i):
    # Names spread over the shards 00-fe: never in ff before the late one.
    return "%02x%062x" % (i % 255, i)


def write_entry(cache, n, size):
    shard = os.path.join(cache, "entries", n[:2])
    os.makedirs(shard, exist_ok=True)
    with open(os.path.join(shard, n[2:]), "wb") as f:
        f.write(b"x" * size)


def charts(env):
    with tempfile.TemporaryDirectory(prefix="progcache-charts-") as cache:
        total = 12000
        for i in range(total):
            write_entry(cache, name(i), 10 if i % 3 else 5000)
        out = subprocess.run([pt.BIN, "stats", "--dir", cache, "--charts"], capture_output=True,
                             env=env, timeout=300)
        text = out.stdout.decode()
        check(out.returncode == 0, "stats --charts", out.stderr.decode())
        sample = [ln for ln in text.splitlines() if ln.startswith("(from ")]
        check(sample, "the charts say they come from a sample", text)
        if not sample:
            return
        read, of = int(sample[0].split()[1]), int(sample[0].split()[3])
        check(read == 1024 and of == total, "a bounded sample read: %d of %d" % (read, of))
        lines = text.splitlines()
        for title in ("entries by last use", "entries by size"):
            at = [i for i, ln in enumerate(lines) if ln.startswith(title)]
            # "  %-14s %8llu %7s": the count in columns 17-24.
            counts = [int(ln[17:25]) for ln in (lines[at[0] + 1:at[0] + 6] if at else [])
                      if re.match(r"^ *\d+$", ln[17:25])]
            check(len(counts) == 5 and abs(sum(counts) - total) <= 5,
                  "%s: the buckets scaled to the whole" % title, counts)


def vm_hwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0  # gone, or a zombie


def peak_kib(args, env):
    """ls's output and its peak resident memory (KiB): the VmHWM of its own
    address space (wait4's ru_maxrss would count the forking Python's
    pages), read while it waits for us to take its output (megabytes: the
    pipe holds 64 KiB), until its last chunk."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
    peak, chunks = 0, []
    while True:
        peak = max(peak, vm_hwm_kib(p.pid))
        chunk = p.stdout.read(16384)
        if not chunk:
            break
        chunks.append(chunk)
    check(p.wait() == 0, "ls exits 0", args)
    return b"".join(chunks).decode(), peak


def sorted_bounded(env):
    env = dict(env, PROGCACHE_LS_SORT_ROWS="64")
    with tempfile.TemporaryDirectory(prefix="progcache-sort-") as tmp:
        env["TMPDIR"] = tmp
        peaks = []
        for n in (4000, 16000):
            with tempfile.TemporaryDirectory(prefix="progcache-ls-") as cache:
                for i in range(n):
                    write_entry(cache, name(i), 16 + i % 7)
                    t = 1e9 + (i * 7919) % n
                    p = os.path.join(cache, "entries", name(i)[:2], name(i)[2:])
                    os.utime(p, (t, t))
                text, kib = peak_kib([pt.BIN, "ls", "--dir", cache, "--sort", "lru", "--json"],
                                     env)
                rows = json.loads(text)["entries"]
                keys = [(int(r["atime_ns"]), r["name"]) for r in rows]
                check(len(rows) == n and keys == sorted(keys), "ls --sort lru: all, in order",
                      (n, len(rows)))
                peaks.append(kib)
        print("peak resident memory of ls --sort lru: %d KiB at 4000 entries, %d KiB at 16000"
              % tuple(peaks))
        check(peaks[1] - peaks[0] < 1500, "memory does not grow with the entries", peaks)
        check(os.listdir(tmp) == [], "the sort's temporary files are gone", os.listdir(tmp))
        # A reader that goes away (`ls --sort size | head -1`): the tool
        # removes its runs, says the output was lost, and exits 3.
        with tempfile.TemporaryDirectory(prefix="progcache-ls-") as cache:
            # More rows than a pipe holds (64 KiB): a write meets the close.
            for i in range(1200):
                write_entry(cache, name(i), 16 + i % 7)
            p = subprocess.Popen([pt.BIN, "ls", "--dir", cache, "--sort", "size"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            p.stdout.readline()
            p.stdout.close()
            err = p.stderr.read().decode()
            rc = p.wait()
            check(rc == 3 and "cannot write standard output" in err,
                  "a closed pipe: said, exit 3 (not killed by SIGPIPE)", (rc, err))
            check(os.listdir(tmp) == [], "no temporary file left behind", os.listdir(tmp))
            # Under a low open-file limit (32), runs of 2 rows: 600 runs,
            # merged within the limit, all listed (64 kept open would fail).
            low = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
            p = subprocess.run([pt.BIN, "ls", "--dir", cache, "--sort", "size"],
                               capture_output=True, preexec_fn=low,
                               env=dict(env, PROGCACHE_LS_SORT_ROWS="2"), timeout=120)
            check(p.returncode == 0 and len(p.stdout.splitlines()) == 1201,
                  "ls --sort within an open-file limit of 32", (p.returncode, p.stderr[-300:]))


def sort_interrupted(env, cache):
    env = dict(env, PROGCACHE_LS_SORT_ROWS="64")
    for sig in (signal.SIGINT, signal.SIGTERM):
        with tempfile.TemporaryDirectory(prefix="progcache-sort-") as tmp:
            env["TMPDIR"] = tmp
            p = subprocess.Popen([pt.BIN, "ls", "--dir", cache, "--sort", "size"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            # The first line comes from the last merge: its runs are open
            # now, and the tool soon blocks on the full pipe.
            check(p.stdout.readline(), "ls --sort size prints", sig)
            time.sleep(0.3)
            check(p.poll() is None, "ls is still merging (blocked on the pipe)", sig)
            p.send_signal(sig)
            rc = p.wait(timeout=30)
            p.stdout.close()
            check(rc == -sig, "ls ends by the signal", (sig, rc))
            check(os.listdir(tmp) == [], "an interrupted sort leaves no temporary file",
                  (sig, os.listdir(tmp)))


def main():
    pt.need_bin()
    env = dict(os.environ)
    env.pop("PROGCACHE_REMOTE", None)
    with tempfile.TemporaryDirectory(prefix="progcache-ls-") as cache:
        for i in range(ENTRIES):
            write_entry(cache, name(i), 16 + i % 7)
        p = subprocess.Popen([pt.BIN, "ls", "--dir", cache], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        header = p.stdout.readline().decode()
        check(header.split()[:2] == ["NAME", "SIZE"], "a first line names the columns", header)
        first = p.stdout.readline().decode()
        check(first.startswith("00"), "the next line is the first name", first)
        late = "ff" + "e" * 62
        write_entry(cache, late, 99)
        rest = p.stdout.read().decode()
        err = p.stderr.read().decode()
        check(p.wait() == 0, "ls exits 0", err)
        lines = [first] + rest.splitlines()
        names = [ln.split()[0] for ln in lines if ln.strip()]
        check(late in names, "the entry written after the first line was read is listed: "
              "ls streamed (it had not reached shard ff)", len(names))
        check(names == sorted(names), "in name order")
        check(len(names) == ENTRIES + 1, "every entry once", len(names))

        out = subprocess.run([pt.BIN, "ls", "--dir", cache, "--sort", "size"],
                             capture_output=True, env=env, timeout=120)
        check(out.returncode == 0, "ls --sort size", out.stderr.decode())
        rows = [ln.split() for ln in out.stdout.decode().splitlines()][1:]  # past the header
        check(len(rows) == ENTRIES + 1 and rows[0][0] == late, "sorted: largest first",
              rows[:1])
        charts(env)
        sort_interrupted(env, cache)
    sorted_bounded(env)
    return pt.finish("test_tool_scale")


if __name__ == "__main__":
    sys.exit(main())
