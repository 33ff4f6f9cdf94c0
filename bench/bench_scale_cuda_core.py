#!/usr/bin/env python3
"""cuda.core's side of bench_scale (issue 32): in a directory bench_scale
filled, the equivalents of its rows on cuda.core's own
FileStreamProgramCache, medians of --rounds, in ms, on one line:

    len <ms> open_cap <ms> put_after_other <ms>

- len: len(cache), what cuda.core offers for `progcache stats`'s count;
- open_cap: opening with max_size_bytes (twice what the directory holds);
- put_after_other: one put after an entry written by another writer (the
  way cuda.core writes: mkstemp in tmp/, os.replace into entries/), with
  that cap in force.

    <venv>/bin/python bench/bench_scale_cuda_core.py --dir DIR [--rounds N]

Needs cuda.core (1.2) importable: the virtual environment the tests make
(build/cuda-core-venv). Keys and values are its own (32-byte keys, 5,734
bytes), written beside bench_scale's entries."""
import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time


VALUE = bytes(5734)


def ms(fn):
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def other_write(root):
    """An entry written by another writer, cuda.core's way."""
    tmp = os.path.join(root, "tmp")
    os.makedirs(tmp, exist_ok=True)
    name = secrets.token_hex(32)
    shard = os.path.join(root, "entries", name[:2])
    os.makedirs(shard, exist_ok=True)
    fd, path = tempfile.mkstemp(dir=tmp)
    with os.fdopen(fd, "wb") as f:
        f.write(VALUE)
    os.replace(path, os.path.join(shard, name[2:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    # Imported after the arguments, so that --help needs no cuda.core.
    from cuda.core.utils import FileStreamProgramCache
    plain = FileStreamProgramCache(a.dir)
    lens, opens, puts = [], [], []
    n = [0]
    for _ in range(a.rounds):
        lens.append(ms(lambda: n.__setitem__(0, len(plain))))
    cap = max(2 * n[0] * len(VALUE), 5 << 30)
    box = [None]
    for _ in range(a.rounds):
        opens.append(ms(lambda: box.__setitem__(0, FileStreamProgramCache(a.dir,
                                                                          max_size_bytes=cap))))
    capped = box[0]
    for _ in range(a.rounds):
        other_write(a.dir)
        key = secrets.token_bytes(32)
        puts.append(ms(lambda: capped.__setitem__(key, VALUE)))
    print("len %.2f open_cap %.2f put_after_other %.2f entries %d" %
          (statistics.median(lens), statistics.median(opens), statistics.median(puts), n[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
