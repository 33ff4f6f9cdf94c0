#!/usr/bin/env python3
"""progcache and cuda.core sharing one cache on a network file system
(docs/SHARED.md): the two sshfs mounts of tests/nfs/nfs_fixture.sh, as two
nodes; no user extended attributes there, so progcache seals its entries in
progcache/seals/.

  - progcache puts on node A; cuda.core on node B reads the exact bytes,
    counts one entry and only the entry's bytes (not the seals);
  - cuda.core writes on node B; progcache on node A reads it;
  - cuda.core's size cap on node B, just above what the entries hold, evicts
    nothing (the seals are not counted against it).

Uses the cuda-core virtual environment of test_cuda_core_diff (the same
directory, created if missing); SKIPPED (77) when cuda-core cannot be
installed or FUSE cannot mount.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "key"))
import test_cuda_core_diff as diff  # noqa: E402  (ensure_venv, SKIP)

FIXTURE = os.path.join(HERE, "nfs_fixture.sh")

INNER = r'''
import os, sys
from cuda.core.utils import FileStreamProgramCache
root, key_hex, data_path, mode = sys.argv[1:5]
key, data = bytes.fromhex(key_hex), open(data_path, "rb").read()
if mode == "read":
    with FileStreamProgramCache(root) as c:
        assert c.get(key) == data, "cuda.core did not read progcache's entry"
        assert len(c) == 1, "cuda.core counts %d entries" % len(c)
        total = c._compute_total_size()
        assert total == len(data), "cuda.core counts %d bytes, the entry is %d" % (total, len(data))
    with FileStreamProgramCache(root, max_size_bytes=len(data) + 60) as c:
        c[b"k" * 32] = b"x" * 50  # 10 bytes under the cap; over it if a seal (42) counted
        assert c.get(key) == data, "cuda.core evicted progcache's entry"
elif mode == "write":
    with FileStreamProgramCache(root) as c:
        c[key] = data
print("ok")
'''


def main():
    binary = os.environ.get("PROGCACHE_BIN")
    if not binary:
        print("PROGCACHE_BIN is not set")
        return 1
    venv = os.environ.get("PROGCACHE_VENV") or os.path.join(os.getcwd(), "cuda-core-venv")
    py = diff.ensure_venv(venv)
    work = tempfile.mkdtemp(prefix="progcache-nfs-py-")
    fx = os.path.join(work, "fixture")
    os.mkdir(fx)
    start = subprocess.run(["bash", FIXTURE, "start", fx, str(os.getpid())],
                           capture_output=True, text=True)
    if start.returncode == diff.SKIP:
        diff.skipped(start.stderr.strip() or "the network file system fixture cannot run here")
    if start.returncode != 0:
        print("fixture: " + start.stderr)
        return 1
    try:
        _, node_a, node_b = start.stdout.split()
        a, b = os.path.join(node_a, "cache"), os.path.join(node_b, "cache")
        key, data = os.urandom(32), os.urandom(70000)
        blob = os.path.join(work, "blob")
        with open(blob, "wb") as f:
            f.write(data)
        put = subprocess.run([binary, "put", "--dir", a, key.hex(), blob], capture_output=True, text=True)
        assert put.returncode == 0, put.stderr
        assert "no user extended attributes" in put.stderr, put.stderr
        h = __import__("hashlib").sha256(key).hexdigest()
        assert os.path.isfile(os.path.join(b, "progcache", "seals", h[:2], h[2:])), "no sidecar seal"
        got = subprocess.run([py, "-c", INNER, b, key.hex(), blob, "read"],
                             capture_output=True, text=True)
        assert got.returncode == 0, got.stderr
        key2, data2 = os.urandom(32), os.urandom(5000)
        blob2 = os.path.join(work, "blob2")
        with open(blob2, "wb") as f:
            f.write(data2)
        wrote = subprocess.run([py, "-c", INNER, b, key2.hex(), blob2, "write"],
                               capture_output=True, text=True)
        assert wrote.returncode == 0, wrote.stderr
        back = subprocess.run([binary, "get", "--dir", a, key2.hex()], capture_output=True)
        assert back.returncode == 0 and back.stdout == data2, "progcache did not read cuda.core's entry"
        stats = subprocess.run([binary, "stats", "--json", "--dir", a], capture_output=True, text=True)
        assert '"seal": "sidecar"' in stats.stdout and '"flight_lock": "lease"' in stats.stdout, stats.stdout
    finally:
        subprocess.run(["bash", FIXTURE, "stop", fx])
        subprocess.run(["rm", "-rf", "--one-file-system", work])
    print("test_nfs_cuda_core: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
