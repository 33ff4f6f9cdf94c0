"""What the test_tool_admin*.py tests share: the progcache binary run
with a clean PROGCACHE_DIR, checks that collect failures, a copy of the
cuda.core reference cache, its entry files, and the runner.

Environment: PROGCACHE_BIN (the progcache tool), PROGCACHE_REFERENCE_DIR
(the cuda.core reference data; copied before use, never modified)."""

import json
import os
import shutil
import subprocess
import tempfile

BIN = os.environ.get("PROGCACHE_BIN")
REF = os.environ.get("PROGCACHE_REFERENCE_DIR")
failures = []

REF_KERNELS = {"scale", "axpy", "fill"}
SCALE_CUBIN_KEY = "59bcff4260892d4dc837f7f50b9a5d418cbdc5901e53c093c52aef55316be2c1"


def run(args, env=None, stdin=None):
    e = dict(os.environ)
    e.pop("PROGCACHE_DIR", None)
    if env:
        e.update(env)
    p = subprocess.run([BIN] + args, capture_output=True, env=e, input=stdin)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print("FAIL:", what, detail)


def entry_files(cache):
    out = {}
    root = os.path.join(cache, "entries")
    if not os.path.isdir(root):
        return out
    for shard in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, shard))):
            with open(os.path.join(root, shard, name), "rb") as f:
                out[shard + name] = f.read()
    return out


def entry_path(cache, name):
    return os.path.join(cache, "entries", name[:2], name[2:])


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


def tty_capture(argv, env, stream="stderr"):
    """Run argv with one of its streams ("stdout" or "stderr") on a
    pseudo-terminal and the other on /dev/null; return (exit status, what
    it wrote on the terminal)."""
    import pty
    master, slave = pty.openpty()
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    streams[stream] = slave
    p = subprocess.Popen(argv, env=env, **streams)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait()
    os.close(master)
    return p.returncode, b"".join(chunks).decode("utf-8", "replace")


def run_on_tty(args):
    """Run with standard error on a pseudo-terminal; return what it wrote there."""
    e = dict(os.environ)
    e.pop("PROGCACHE_DIR", None)
    return tty_capture([BIN] + args, e)[1]


def flip_bit(path, offset, bit=0):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def main(tests, label):
    """Run each test in its own directory; 77 without the binary."""
    if not BIN:
        print("SKIPPED: PROGCACHE_BIN is not set")
        return 77
    if not REF or not os.path.isdir(os.path.join(REF, "cuda-core-cache")):
        # In the repository (tests/data): missing is a fault, not a skip.
        print("FAIL: no reference cache at PROGCACHE_REFERENCE_DIR=%r (tests/data)" % REF)
        return 1
    with tempfile.TemporaryDirectory(prefix="progcache-tool-admin-") as tmp:
        for test in tests:
            sub = os.path.join(tmp, test.__name__)
            os.makedirs(sub)
            test(sub)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("%s: ok" % label)
    return 0
