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
