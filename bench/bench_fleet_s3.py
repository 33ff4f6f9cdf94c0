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

import remote_servers as rs


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    build, extra = sys.argv[1], sys.argv[2:]
    env = rs.clean_env()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-s3-") as d:
        try:
            with rs.s3_tier(d, build, "kernels/fleet") as (url, keys):
                return subprocess.run([os.path.join(build, "bin", "bench_fleet"), "--url", url]
                                      + extra, env=dict(env, **keys), timeout=3000).returncode
        except rs.NoMoto as e:
            sys.stderr.write("bench_fleet_s3.py: %s\n" % e)
            return 2


if __name__ == "__main__":
    sys.exit(main())
