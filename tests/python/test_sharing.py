"""Entries shared byte for byte, both ways: with cuda.core's
FileStreamProgramCache and with C programs (the progcache command)."""

import os
import random

from cuda.core import Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache

import progcache
from conftest import SOURCE

RNG = random.Random(31)


def blobs(n):
    sizes = [0, 1, 4096, 65536, 1 << 20] + [RNG.randrange(1, 300000) for _ in range(n - 5)]
    return [(os.urandom(32), RNG.randbytes(s)) for s in sizes]


def test_file_stream_writes_progcache_reads(cache_dir):
    items = blobs(12)
    with FileStreamProgramCache(cache_dir) as fs:
        for k, v in items:
            fs[k] = v
    with progcache.ProgramCache(cache_dir) as pc:
        for k, v in items:
            assert pc[k] == v
        assert len(pc) == len(items)


def test_progcache_writes_file_stream_reads(cache_dir):
    items = blobs(12)
    with progcache.ProgramCache(cache_dir) as pc:
        for k, v in items:
            pc[k] = v
    with FileStreamProgramCache(cache_dir) as fs:
        for k, v in items:
            assert fs[k] == v
        assert len(fs) == len(items)
        del fs[items[0][0]]
    with progcache.ProgramCache(cache_dir) as pc:
        assert pc.get(items[0][0]) is None  # the other's delete is seen


def test_compiled_entries_shared_both_ways(tmp_path):
    options = ProgramOptions(arch="sm_90", std="c++17")
    with FileStreamProgramCache(tmp_path / "a") as fs:
        made = Program(SOURCE, "c++", options).compile("cubin", cache=fs)
    with progcache.ProgramCache(tmp_path / "a") as pc:
        before = pc.stats()["stores"]
        again = Program(SOURCE, "c++", options).compile("cubin", cache=pc)
        assert bytes(again.code) == bytes(made.code) and pc.stats()["stores"] == before
    with progcache.ProgramCache(tmp_path / "b") as pc:
        made = Program(SOURCE, "c++", options).compile("cubin", cache=pc)
    with FileStreamProgramCache(tmp_path / "b") as fs:
        assert len(fs) == 1
        fs[b"probe"] = b"x"  # a store would show as a second entry
        again = Program(SOURCE, "c++", options).compile("cubin", cache=fs)
        assert len(fs) == 2
        assert bytes(again.code) == bytes(made.code)


def test_c_tool_reads_what_python_wrote(cache_dir, tool, tmp_path):
    items = blobs(6)
    with progcache.ProgramCache(cache_dir) as pc:
        for k, v in items:
            pc[k] = v
    for k, v in items:
        out = tmp_path / "out"
        p = tool("get", "-d", cache_dir, "-o", out, k.hex())
        assert p.returncode == 0, p.stderr
        assert out.read_bytes() == v


def test_python_reads_what_c_tool_wrote(cache_dir, tool, tmp_path):
    items = blobs(6)
    for i, (k, v) in enumerate(items):
        f = tmp_path / ("in%d" % i)
        f.write_bytes(v)
        p = tool("put", "-d", cache_dir, k.hex(), f)
        assert p.returncode == 0, p.stderr
    with progcache.ProgramCache(cache_dir) as pc:
        for k, v in items:
            assert pc[k] == v
    with FileStreamProgramCache(cache_dir) as fs:
        for k, v in items:
            assert fs[k] == v


def test_counters_seen_by_the_c_tool(cache_dir, tool):
    with progcache.ProgramCache(cache_dir) as pc:
        pc[b"k"] = b"v"
        pc.get(b"k")
    p = tool("stats", "-d", cache_dir, "--json")
    assert p.returncode == 0, p.stderr
    import json

    s = json.loads(p.stdout)
    flat = s.get("counters", s)
    assert flat["stores"] == 1 and flat["hits"] == 1


def test_stats_names_the_nvrtc_file(cache_dir, tool):
    """`progcache stats` says which NVRTC a C program's compiles load; a
    Python program's compile_or_load hands the C library cuda.core's."""
    import json

    from cuda.core import ProgramOptions

    with progcache.ProgramCache(cache_dir) as pc:
        progcache.compile_or_load(SOURCE, "cubin", ProgramOptions(arch="sm_90"), cache=pc)
    lib = os.environ["PROGCACHE_NVRTC_LIBRARY"]  # set by compile_or_load: cuda.core's
    assert lib == progcache.nvrtc_library()
    p = tool("stats", "-d", cache_dir, "--json")  # inherits the variable
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["nvrtc_library"] == lib
    p = tool("stats", "-d", cache_dir)
    assert ("NVRTC                  " + lib) in p.stdout.decode()
