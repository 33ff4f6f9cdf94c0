"""What the remote benches share (bench_remote.py, bench_fleet_s3.py): the
servers of tests/http/http_servers.py, moto's S3 server from
BUILD_DIR/moto-venv (scripts/moto-venv.sh BUILD_DIR) as a tier URL with its
keys, and the environment a bench runs in (no PROGCACHE_ or AWS_ variable
of the caller's)."""

import contextlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "http"))
import http_servers as hs  # noqa: E402,F401  (the benches use its other servers too)


class NoMoto(Exception):
    """BUILD_DIR has no moto-venv: the message says how to make it."""


def clean_env():
    """The caller's environment without its PROGCACHE_ and AWS_ variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PROGCACHE_", "AWS_"))}


def moto_python(build):
    """BUILD_DIR/moto-venv's python, or NoMoto."""
    python = os.path.join(build, "moto-venv", "bin", "python")
    if not os.path.exists(os.path.join(build, "moto-venv", "bin", "moto_server")):
        raise NoMoto("no moto_server in %s/moto-venv (run scripts/moto-venv.sh %s)"
                     % (build, build))
    return python


@contextlib.contextmanager
def s3_tier(d, build, path):
    """moto's S3 server (authentication enforced) on a free loopback port,
    logging into folder d, stopped whatever happens: yields the tier URL
    s3://PATH on it and the environment its keys are in."""
    with hs.Moto(d, moto_python(build)) as moto:
        yield ("s3://%s?endpoint=%s&region=us-east-1" % (path, moto.url),
               {"AWS_ACCESS_KEY_ID": moto.key_id, "AWS_SECRET_ACCESS_KEY": moto.secret})


if __name__ == "__main__":
    # A module, not a program: --help (test_bench_help) or any call says so.
    print(__doc__)
    sys.exit(0)
