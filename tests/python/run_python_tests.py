#!/usr/bin/env python3
"""The Python package's tests: make a virtual environment in the build tree
(once; later runs reuse it), pip install into it cuda-core 1.2.x,
cuda-bindings 13.x and NVRTC's wheel (nvidia-cuda-nvrtc: what
`pip install "cuda-core[cu13]"` brings, so cuda.core runs on the wheel's
NVRTC as a Python user's does), pytest and scikit-build-core from PyPI,
then `pip install ./python` (the package built by the project's CMake, in a
build directory kept in the build tree so a later run rebuilds only what
changed), and run pytest over tests/python/.

Exit 77 ("SKIPPED: why") when the environment cannot be made (no package
index); a package that does not build or a test that fails is a failure.
"""

import argparse
import os
import subprocess
import sys

SKIP = 77
PACKAGES = ["cuda-core==1.2.*", "cuda-bindings==13.*", "nvidia-cuda-nvrtc==13.*",
            "scikit-build-core>=0.10", "pytest"]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def skipped(reason):
    print("SKIPPED: " + reason)
    sys.exit(SKIP)


def pip(py, args, timeout):
    return subprocess.run([py, "-m", "pip", "--disable-pip-version-check", "--no-input"] + args,
                          capture_output=True, text=True, timeout=timeout)


def ensure_venv(venv):
    """The environment's python, with PACKAGES installed (a stamp file says
    which list it holds, so a changed list reinstalls)."""
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, "progcache-packages")
    want = "\n".join(PACKAGES)
    if os.path.exists(py) and os.path.exists(stamp) and open(stamp).read() == want:
        return py
    print("creating a virtual environment at %s" % venv)
    p = subprocess.run([sys.executable, "-m", "venv", "--clear", venv],
                       capture_output=True, text=True)
    if p.returncode:
        skipped("cannot create a virtual environment: " + p.stderr.strip()[-300:])
    try:
        p = pip(py, ["install", "--timeout", "30", "--retries", "2"] + PACKAGES, 600)
    except subprocess.TimeoutExpired:
        skipped("pip install %s took too long (no package index?)" % " ".join(PACKAGES))
    if p.returncode:
        skipped("cannot pip install %s: %s" % (" ".join(PACKAGES),
                                               (p.stderr or p.stdout).strip()[-400:]))
    with open(stamp, "w") as f:
        f.write(want)
    return py


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--build-dir", required=True, help="scikit-build-core's build directory")
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    py = ensure_venv(os.path.abspath(args.venv))
    # The package as a user installs it (pip install ./python), built
    # without isolation so that the build directory is reused.
    p = pip(py, ["install", "--no-build-isolation", "--no-deps", "--force-reinstall",
                 "-C", "build-dir=" + os.path.abspath(args.build_dir),
                 os.path.join(ROOT, "python")], 900)
    if p.returncode:
        print(p.stdout[-4000:], p.stderr[-4000:])
        print("FAIL: pip install ./python")
        return 1
    env = dict(os.environ)
    env.pop("PROGCACHE_DIR", None)
    env.pop("PROGCACHE_NVRTC_LIBRARY", None)
    cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", HERE] + args.pytest_args
    return subprocess.run(cmd, env=env, cwd=HERE).returncode


if __name__ == "__main__":
    sys.exit(main())
