"""What the test_tool_admin*.py tests share beyond tests/helpers/
progcache_test.py (the binary run with a clean PROGCACHE_DIR, checks that
collect failures, entry files, the pty capture, re-exported here): a copy
of the cuda.core reference cache, its listing, and the runner.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(the cuda.core reference data; copied before use, never modified)."""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import BIN, check, entry_files, entry_path, run, tty_capture  # noqa: E402,F401

REF = os.environ.get("PROGCACHE_REFERENCE_DIR")
failures = pt.failures

REF_KERNELS = {"scale", "axpy", "fill"}
SCALE_CUBIN_KEY = "59bcff4260892d4dc837f7f50b9a5d418cbdc5901e53c093c52aef55316be2c1"


def copy_reference(tmp, name):
    dst = os.path.join(tmp, name)
    shutil.copytree(os.path.join(REF, "cuda-core-cache"), dst)
    for root, dirs, files in os.walk(dst):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


def ls_json(cache):
    rc, out, err = run(["ls", "--dir", cache, "--json"])
    check(rc == 0, "ls --json exit 0", err)
    listing = json.loads(out)
    check(listing["schema"] == 1 and listing["dir"] == cache, "ls --json: schema and dir", listing)
    return listing["entries"]


def run_on_tty(args):
    """Run with standard error on a pseudo-terminal; return what it wrote there."""
    return tty_capture([BIN] + args, pt.tool_env())[1]


def flip_bit(path, offset, bit=0):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def main(tests, label):
    """Run each test in its own directory; 77 without the binary."""
    pt.need_bin()
    if not REF or not os.path.isdir(os.path.join(REF, "cuda-core-cache")):
        # In the repository (tests/data): missing is a fault, not a skip.
        print("FAIL: no reference cache at PROGCACHE_REFERENCE_DIR=%r (tests/data)" % REF)
        return 1
    return pt.run_tests(tests, label, "progcache-tool-admin-")
