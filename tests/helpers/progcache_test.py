"""What the Python tests share, written once: checks that collect failures,
the progcache binary run with a clean environment, files written and read,
a cache's entry files, a pseudo-terminal capture, the skip convention
(exit 77 with the reason) and the runner that gives each test a directory
of its own.

A test finds this module from its own location:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "helpers"))
    import progcache_test as pt

Environment: PROGCACHE_BIN (the progcache tool), where a test runs it."""

import os
import subprocess
import sys
import tempfile

BIN = os.environ.get("PROGCACHE_BIN")
failures = []


def check(cond, what, detail=""):
    """Record a failure (and go on) unless cond holds."""
    if not cond:
        failures.append(what)
        print("FAIL: %s %s" % (what, detail))


def skip(reason):
    """The one skip convention: say why, exit 77 (CTest's SKIP_RETURN_CODE)."""
    print("SKIPPED: " + reason)
    sys.exit(77)


def need_bin():
    """Skip unless PROGCACHE_BIN names the tool (CTest always sets it)."""
    if not BIN:
        skip("PROGCACHE_BIN is not set")


def tool_env(extra=None, drop=("PROGCACHE_DIR",)):
    """This process's environment without the variables in drop (a
    developer's PROGCACHE_DIR must not pick the cache), plus extra."""
    e = dict(os.environ)
    for name in drop:
        e.pop(name, None)
    if extra:
        # A locale asked for through LANG is the one in effect: LC_ALL and
        # LC_CTYPE of the caller (the GPU machine sets them to UTF-8) would
        # override it.
        if "LANG" in extra:
            for name in ("LC_ALL", "LC_CTYPE"):
                if name not in extra:
                    e.pop(name, None)
        e.update(extra)
    return e


def run(args, env=None, stdin=None, timeout=None, drop=("PROGCACHE_DIR",), **popen):
    """Run the tool; return (exit status, stdout, stderr) as text. Past
    timeout the status is None and stderr says so (the caller's check
    fails on it, naming the command)."""
    try:
        p = subprocess.run([BIN] + args, capture_output=True, env=tool_env(env, drop),
                           input=stdin, timeout=timeout, **popen)
    except subprocess.TimeoutExpired:
        return None, "", "TIMED OUT after %d s" % timeout
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write(path, data):
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(path, mode) as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def entry_path(cache, name):
    return os.path.join(cache, "entries", name[:2], name[2:])


def entry_files(cache):
    """{key: bytes} of every file under the cache's entries/ (str or bytes paths)."""
    out = {}
    root = os.path.join(cache, b"entries" if isinstance(cache, bytes) else "entries")
    if not os.path.isdir(root):
        return out
    for shard in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, shard))):
            out[shard + name] = read(os.path.join(root, shard, name))
    return out


def write_programs(src, kernels, manifest):
    """Write {relative name: source} under src and a warm manifest (its
    text) as src/programs.txt; return the manifest's path."""
    for name, text in kernels.items():
        path = os.path.join(src, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write(path, text)
    path = os.path.join(src, "programs.txt")
    write(path, manifest)
    return path


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


def finish(label):
    """The exit status of a test: 1 and the count when a check failed."""
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("%s: ok" % label)
    return 0


def run_tests(tests, label, prefix="progcache-test-"):
    """Run each test function in a fresh directory of its own, then finish."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for test in tests:
            sub = os.path.join(tmp, test.__name__)
            os.makedirs(sub)
            test(sub)
    return finish(label)


# Two small programs for warm manifests: a.cu a C kernel, t.cu a template
# (a name expression's target).
KERNELS = {
    "a.cu": 'extern "C" __global__ void scale(float *a, float s, int n)'
            '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] *= s; }\n',
    "t.cu": 'template <typename T> __global__ void fill(T *a, T v, int n)'
            '{ int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) a[i] = v; }\n',
}
