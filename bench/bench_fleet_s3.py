#!/usr/bin/env python3
"""bench_fleet_s3.py: bench_fleet with S3 as the fleet's only shared tier.
Starts moto's S3 server (authentication enforced) on a free loopback port,
runs BUILD_DIR/bin/bench_fleet against s3://kernels/fleet on it, and stops
it, whatever happens. The other arguments go to bench_fleet (--nodes,
--procs, --rounds, --arch).

Usage: bench/bench_fleet_s3.py BUILD_DIR [bench_fleet options]
(moto from BUILD_DIR/moto-venv: scripts/moto-venv.sh BUILD_DIR)."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "http"))
import http_servers as hs  # noqa: E402


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    build, extra = sys.argv[1], sys.argv[2:]
    python = os.path.join(build, "moto-venv", "bin", "python")
    if not os.path.exists(python):
        sys.stderr.write("bench_fleet_s3.py: no %s (run scripts/moto-venv.sh %s)\n"
                         % (python, build))
        return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROGCACHE_", "AWS_"))}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-s3-") as d:
        with hs.Moto(d, python) as moto:
            env.update(AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret)
            url = "s3://kernels/fleet?endpoint=%s&region=us-east-1" % moto.url
            return subprocess.run([os.path.join(build, "bin", "bench_fleet"), "--url", url]
                                  + extra, env=env, timeout=3000).returncode


if __name__ == "__main__":
    sys.exit(main())
