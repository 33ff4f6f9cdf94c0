"""Fixtures of the Python package's tests (run by run_python_tests.py in
its virtual environment)."""

import os
import subprocess
import sys

import pytest

import progcache

# The kernels the tests compile: plain, and a template for name expressions.
SOURCE = ('extern "C" __global__ void scale(float *a, float s, int n) '
          '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }\n')
TEMPLATE = "template<int N> __global__ void fill(int *a) { a[threadIdx.x] = N; }\n"


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh cache directory's path (not made yet)."""
    return tmp_path / "cache"


@pytest.fixture
def cache(cache_dir):
    with progcache.ProgramCache(cache_dir) as c:
        yield c


@pytest.fixture
def tool():
    """Run the progcache command (the build tree's, PROGCACHE_BIN)."""
    binary = os.environ.get("PROGCACHE_BIN")
    if not binary:
        pytest.skip("PROGCACHE_BIN is not set (run through ctest)")

    def run(*args, stdin=None):
        env = {k: v for k, v in os.environ.items() if k != "PROGCACHE_DIR"}
        return subprocess.run([binary] + [str(a) for a in args], input=stdin,
                              capture_output=True, env=env, timeout=120)

    return run


def python(code, *args, env=None, timeout=300):
    """Run code in a fresh interpreter of this environment; its stdout."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args],
                       capture_output=True, text=True, env=e, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout
