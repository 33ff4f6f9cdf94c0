"""progcache.compile_or_load: cuda.core's key, one compile per fleet, name
expressions that survive a hit in a fresh process, one NVRTC."""

import os
import subprocess
import sys
import threading

import pytest
from cuda.bindings import nvrtc
from cuda.core import ObjectCode, ProgramOptions
from cuda.core.utils import FileStreamProgramCache, make_program_cache_key

import progcache
from conftest import SOURCE, TEMPLATE, python

OPTIONS = ProgramOptions(arch="sm_90", std="c++17")


def cuda_core_key(code, target="cubin", options=OPTIONS, **kw):
    return make_program_cache_key(code=code, code_type="c++", options=options,
                                  target_type=target, **kw)


def test_miss_then_hit_with_cuda_cores_key(cache):
    r = progcache.compile_or_load(SOURCE, "cubin", OPTIONS, cache=cache)
    assert r.status == "MISS" and r.compile_ms > 0
    assert isinstance(r.object_code, ObjectCode) and r.object_code.code_type == "cubin"
    assert r.key == cuda_core_key(SOURCE)
    h = progcache.compile_or_load(SOURCE, "cubin", OPTIONS, cache=cache)
    assert h.status == "HIT" and h.compile_ms == 0
    assert bytes(h.object_code.code) == bytes(r.object_code.code)
    assert cache[cuda_core_key(SOURCE)] == bytes(r.object_code.code)


def test_targets(cache):
    for target in ("ptx", "ltoir"):
        r = progcache.compile_or_load(SOURCE, target, OPTIONS, cache=cache)
        assert r.key == cuda_core_key(SOURCE, target)
        assert r.object_code.code_type == target


def test_entry_shared_with_file_stream_cache(cache_dir):
    with FileStreamProgramCache(cache_dir) as fs:
        from cuda.core import Program

        made = Program(SOURCE, "c++", OPTIONS).compile("cubin", cache=fs)
    with progcache.ProgramCache(cache_dir) as pc:
        r = progcache.compile_or_load(SOURCE, "cubin", OPTIONS, cache=pc)
        assert r.status == "HIT" and bytes(r.object_code.code) == bytes(made.code)


def test_one_nvrtc_one_key(cache):
    progcache.compile_or_load(SOURCE, "cubin", OPTIONS, cache=cache)
    _, major, minor = nvrtc.nvrtcVersion()
    assert progcache.nvrtc_version() == (major, minor)
    # One NVRTC file mapped: cuda.core's, which the C library loaded too.
    with open("/proc/self/maps") as maps:
        files = {line.split()[-1] for line in maps
                 if os.path.basename(line.split()[-1]).startswith("libnvrtc.so")}
    assert len(files) == 1, files
    assert os.environ["PROGCACHE_NVRTC_LIBRARY"] in files


def test_wheel_nvrtc_version_in_the_key(cache):
    """The environment has NVRTC's wheel (nvidia-cuda-nvrtc) beside the
    toolkit's: the key carries the wheel's version, as cuda.core's does."""
    lib = progcache.nvrtc_library() or ""
    if "site-packages" not in lib:
        progcache.compile_or_load(SOURCE, "cubin", OPTIONS, cache=cache)
        lib = progcache.nvrtc_library() or ""
    if "site-packages" not in lib:
        pytest.skip("cuda.core does not use a wheel's NVRTC here (%s)" % lib)
    r = progcache.compile_or_load(SOURCE + "//w\n", "cubin", OPTIONS, cache=cache)
    assert r.key == cuda_core_key(SOURCE + "//w\n")
    _, major, minor = nvrtc.nvrtcVersion()
    other = progcache._native.key_nvrtc((SOURCE + "//w\n").encode(), 0,
                                        list(OPTIONS.as_bytes("nvrtc", "cubin")),
                                        nvrtc_major=major, nvrtc_minor=minor)
    assert other == r.key


def test_name_expressions_survive_a_hit_in_a_fresh_process(cache_dir):
    names = ("fill<1>", "fill<7>")
    with progcache.ProgramCache(cache_dir) as pc:
        r = progcache.compile_or_load(TEMPLATE, "cubin", OPTIONS, name_expressions=names,
                                      cache=pc)
    assert r.status == "MISS"
    assert r.object_code.symbol_mapping == {"fill<1>": b"_Z4fillILi1EEvPi",
                                            "fill<7>": b"_Z4fillILi7EEvPi"}
    assert r.key == cuda_core_key(TEMPLATE, name_expressions=names)
    out = python(
        "import sys, progcache\n"
        "from cuda.core import ProgramOptions\n"
        "c = progcache.ProgramCache(sys.argv[1])\n"
        "r = progcache.compile_or_load(sys.argv[2], 'cubin', ProgramOptions(arch='sm_90',"
        " std='c++17'), name_expressions=('fill<7>', 'fill<1>'), cache=c)\n"
        "print(r.status, sorted(r.object_code.symbol_mapping.items()))\n",
        cache_dir, TEMPLATE)
    assert out.split()[0] == "HIT"
    assert "('fill<1>', b'_Z4fillILi1EEvPi'), ('fill<7>', b'_Z4fillILi7EEvPi')" in out


def test_bytes_name_expressions(cache):
    r = progcache.compile_or_load(TEMPLATE, "cubin", OPTIONS, name_expressions=(b"fill<2>",),
                                  cache=cache)
    assert r.key == cuda_core_key(TEMPLATE, name_expressions=(b"fill<2>",))
    assert r.object_code.symbol_mapping == {b"fill<2>": b"_Z4fillILi2EEvPi"}
    with pytest.raises(progcache.InvalidArgumentError, match="mix str and bytes"):
        progcache.compile_or_load(TEMPLATE, "cubin", OPTIONS,
                                  name_expressions=("fill<2>", b"fill<3>"), cache=cache)


def test_errors_carry_message_and_code(cache):
    with pytest.raises(progcache.CompileError) as e:
        progcache.compile_or_load("this is not C++", "cubin", OPTIONS, cache=cache)
    assert e.value.code == -9 and "NVRTC could not compile" in e.value.message
    with pytest.raises(progcache.UnsafeKeyError) as e:
        progcache.compile_or_load(SOURCE, "cubin", ProgramOptions(arch="sm_90", time="t.csv"),
                                  cache=cache)
    assert e.value.code == -3 and "--time" in str(e.value)
    with pytest.raises(ValueError):
        progcache.compile_or_load(SOURCE, "sass", OPTIONS, cache=cache)


def test_threads_single_flight(cache):
    src = SOURCE + "// threads\n"
    results = []
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        results.append(progcache.compile_or_load(src, "cubin", OPTIONS, cache=cache))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in results].count("MISS") == 1
    assert len({bytes(r.object_code.code) for r in results}) == 1
    assert cache.stats()["stores"] == 1


FLEET = """
import sys, time, progcache
from cuda.core import ProgramOptions
cache = progcache.ProgramCache(sys.argv[1])
source = sys.argv[2]
while time.time() < float(sys.argv[3]):
    time.sleep(0.005)
r = progcache.compile_or_load(source, "cubin", ProgramOptions(arch="sm_90", std="c++17"),
                              cache=cache)
print(r.status, r.waited, r.key.hex())
"""


def test_sixteen_processes_one_compile(cache_dir):
    """16 processes, one cold program, started together: exactly one NVRTC
    compile (one store in the counters, one MISS); the other 15 wait for it."""
    import time

    src = SOURCE.replace("a[i] *= s", "a[i] = a[i] * s + 1.0f")
    progcache.ProgramCache(cache_dir).close()
    start = time.time() + 8.0  # every interpreter up and importing done by then
    procs = [subprocess.Popen([sys.executable, "-c", FLEET, str(cache_dir), src, str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(16)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    lines = [o.split() for o, _ in outs]
    assert [l[0] for l in lines].count("MISS") == 1, lines
    assert len({l[2] for l in lines}) == 1
    with progcache.ProgramCache(cache_dir) as pc:
        s = pc.stats()
    assert s["stores"] == 1, s
    assert s["singleflight_waits"] >= 1, s


def test_use_bundled_headers_keyed_as_cuda_core(tmp_path, monkeypatch, cache, tool):
    """ProgramOptions(use_bundled_headers=True) (NVRTC 13.3+): progcache
    accepts it, derives cuda.core's key, compiles with it, and hits."""
    _, major, minor = nvrtc.nvrtcVersion()
    if (major, minor) < (13, 3):
        pytest.skip("NVRTC %d.%d has no bundled headers" % (major, minor))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # where NVRTC installs them
    options = ProgramOptions(arch="sm_90", std="c++17", use_bundled_headers=True)
    argv = options.as_bytes("nvrtc", "cubin")
    assert any(a.startswith(b"--use-bundled-headers=") for a in argv), argv
    src = ("#include <cuda/std/cstdint>\n"
           'extern "C" __global__ void k(cuda::std::int32_t *a) { a[0] = 7; }\n')
    r = progcache.compile_or_load(src, "cubin", options, cache=cache)
    assert r.status == "MISS"
    assert r.key == cuda_core_key(src, options=options)
    h = progcache.compile_or_load(src, "cubin", options, cache=cache)
    assert h.status == "HIT" and bytes(h.object_code.code) == bytes(r.object_code.code)
    # `progcache key` too, on the NVRTC compile_or_load handed the library
    # (PROGCACHE_NVRTC_LIBRARY, inherited).
    f = tmp_path / "k.cu"
    f.write_text(src)
    p = tool("key", f, "--", *[a.decode() for a in argv])
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().split()[0] == r.key.hex()
