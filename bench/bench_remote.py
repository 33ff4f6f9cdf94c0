#!/usr/bin/env python3
"""bench_remote.py: the remote tiers side by side over loopback. Starts a
redis-server (no persistence), nginx (WebDAV, as docs/REMOTE.md's recipe)
and moto's S3 server (authentication enforced) on free loopback ports, runs
bench_remote against each, stops them, and prints one markdown table:
get-hit, get-miss and put latency, medians and p99 in microseconds.

Usage: bench/bench_remote.py BUILD_DIR [--value-size N] [--samples N]
(moto from BUILD_DIR/moto-venv: scripts/moto-venv.sh BUILD_DIR)."""

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import remote_servers as rs
from remote_servers import hs


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    build, extra = sys.argv[1], sys.argv[2:]
    bench = os.path.join(build, "bin", "bench_remote")
    clean = rs.clean_env()
    try:
        rs.moto_python(build)
    except rs.NoMoto as e:
        sys.stderr.write("bench_remote.py: %s\n" % e)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as d:
        port = hs.free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            hs.wait_port(port, redis, "redis-server")
            with hs.Nginx(os.path.join(d, "ng")) as ng, \
                    rs.s3_tier(d, build, "kernels/bench") as (s3, keys):
                for label, url, env in (("Redis", "redis://127.0.0.1:%d" % port, {}),
                                        ("HTTP (nginx)", ng.url, {}),
                                        ("S3 (moto)", s3, keys)):
                    r = subprocess.run([bench, url, "--label", label] + extra,
                                       env=dict(clean, **env), capture_output=True,
                                       text=True, timeout=600)
                    if r.returncode:
                        sys.stderr.write(r.stderr)
                        return 1
                    rows.append(r.stdout.strip())
        finally:
            hs.stop(redis)
    print("bench_remote.py %s, %s, %s, %d cores" % (
        " ".join(extra) or "(defaults)", time.strftime("%Y-%m-%d"), platform.platform(),
        os.cpu_count()))
    print("| tier | value bytes | get-hit median us | get-hit p99 us | get-miss median us "
          "| put (written) median us | put (written) p99 us | put (queued) median us |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
