"""ProgramCache(remote=...): the Redis tier below the directory, through
the C library (a redis-server on a Unix socket of the test's own)."""

import os
import shutil
import subprocess
import time

import pytest

import progcache


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if not server:
        pytest.skip("no redis-server on this machine")
    sock = tmp_path / "redis.sock"
    p = subprocess.Popen([server, "--port", "0", "--unixsocket", str(sock), "--save", "",
                          "--appendonly", "no", "--dir", str(tmp_path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if sock.exists():
                break
            time.sleep(0.02)
        assert sock.exists(), "redis-server did not start"
        yield "unix:" + str(sock)
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_remote_tier_shares_between_directories(tmp_path, redis_url):
    try:
        a = progcache.ProgramCache(tmp_path / "node-a", remote=redis_url)
    except progcache.RemoteError as e:  # a build without hiredis says so
        pytest.skip(str(e))
    with a:
        a[b"kernel"] = b"\x7fELF compiled on node a"
        a.flush()  # the remote write is queued: wait for it
    with progcache.ProgramCache(tmp_path / "node-b", remote=redis_url) as b:
        assert b[b"kernel"] == b"\x7fELF compiled on node a"  # from Redis
        assert b.stats()["remote_hits"] == 1
    with progcache.ProgramCache(tmp_path / "node-c", no_remote=True) as c:
        assert c.get(b"kernel") is None  # no remote tier: only its own directory


def test_bad_remote_url_is_an_error_with_the_message(tmp_path):
    with pytest.raises(progcache.ProgcacheError) as e:
        progcache.ProgramCache(tmp_path / "c", remote="redis://")
    assert "redis://" in str(e.value) or "URL" in str(e.value)
    assert e.value.code < 0


NODE = r"""
import sys, progcache
from cuda.core import ProgramOptions
cache = progcache.ProgramCache(sys.argv[1], remote=sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
r = progcache.compile_or_load(sys.argv[3], "cubin", ProgramOptions(arch="sm_90"), cache=cache)
cache.close()
print(r.status)
"""


def test_two_nodes_one_compile(tmp_path, redis_url):
    """Two cache directories (two nodes' local disks) on one Redis, four
    processes each, one cold program: one NVRTC compile in all, the lease
    in Redis keeping the other node from compiling it too."""
    try:
        progcache.ProgramCache(tmp_path / "probe", remote=redis_url).close()
    except progcache.RemoteError as e:
        pytest.skip(str(e))
    import sys

    src = 'extern "C" __global__ void nodes(int *a) { a[threadIdx.x] += 2; }\n'
    procs = [subprocess.Popen([sys.executable, "-c", NODE, str(tmp_path / node), redis_url, src],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for node in ("node-a", "node-b") for _ in range(4)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-2000:]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    statuses = [o.split()[-1] for o, _ in outs]
    assert statuses.count("MISS") == 1, statuses
    stores = 0
    for node in ("node-a", "node-b"):
        with progcache.ProgramCache(tmp_path / node, no_remote=True) as c:
            stores += c.stats()["stores"]
    assert stores == 1
