"""ProgramCache against cuda.core's ProgramCacheResource contract and the
behaviour cuda.core documents for FileStreamProgramCache."""

import hashlib
import threading

import pytest
from cuda.core import ObjectCode, Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache, ProgramCacheResource, make_program_cache_key

import progcache
from conftest import SOURCE


def test_is_a_program_cache_resource(cache):
    assert isinstance(cache, ProgramCacheResource)
    for name in ("__getitem__", "__setitem__", "__delitem__", "__len__", "clear", "get",
                 "update", "close", "__enter__", "__exit__"):
        assert callable(getattr(cache, name))
    # No __contains__: `key in cache` then `cache[key]` races other processes.
    assert "__contains__" not in dir(type(cache))


def test_bytes_round_trip_exactly(cache):
    values = [b"", b"\x00", bytes(range(256)) * 41, b"\x7fELF" + b"\xff" * 100000]
    for i, v in enumerate(values):
        cache[b"k%d" % i] = v
    for i, v in enumerate(values):
        got = cache[b"k%d" % i]
        assert type(got) is bytes and got == v


def test_value_types(cache):
    cache[b"a"] = bytearray(b"one")
    cache[b"b"] = memoryview(b"two")
    cache[b"c"] = ObjectCode.from_cubin(b"three")
    assert (cache[b"a"], cache[b"b"], cache[b"c"]) == (b"one", b"two", b"three")
    for bad in (1, "text", None, [b"x"], 1.5):
        with pytest.raises(TypeError, match="bytes-like or ObjectCode"):
            cache[b"d"] = bad


def test_path_backed_object_code_read_at_write(cache, tmp_path):
    f = tmp_path / "k.cubin"
    f.write_bytes(b"on disk")
    cache[b"p"] = ObjectCode.from_cubin(str(f))
    f.write_bytes(b"changed")
    assert cache[b"p"] == b"on disk"  # the bytes, not the path
    f.unlink()
    with pytest.raises(FileNotFoundError, match="no longer exists"):
        cache[b"q"] = ObjectCode.from_cubin(str(f))


def test_str_key_is_its_utf8_bytes(cache):
    cache["caf\u00e9"] = b"x"
    assert cache["caf\u00e9".encode("utf-8")] == b"x"
    cache[bytearray(b"ba")] = b"y"
    assert cache[b"ba"] == b"y"
    for bad in (1, None, 2.0, (b"k",), memoryview(b"k")):
        with pytest.raises(TypeError, match="bytes or str"):
            cache[bad]
        with pytest.raises(TypeError, match="bytes or str"):
            cache[bad] = b"v"
        with pytest.raises(TypeError, match="bytes or str"):
            cache.get(bad)


def test_missing_key(cache):
    with pytest.raises(KeyError) as e:
        cache[b"nope"]
    assert e.value.args == (b"nope",)
    assert cache.get(b"nope") is None
    assert cache.get(b"nope", b"dflt") == b"dflt"
    with pytest.raises(KeyError):
        del cache[b"nope"]


def test_overwrite_delete_len_clear(cache):
    assert len(cache) == 0
    cache[b"k"] = b"1"
    cache[b"k"] = b"22"
    assert cache[b"k"] == b"22" and len(cache) == 1
    del cache[b"k"]
    assert cache.get(b"k") is None and len(cache) == 0
    cache.update({b"a": b"1", "b": b"2"})
    cache.update([(b"c", b"3")])
    assert len(cache) == 3
    cache.clear()
    assert len(cache) == 0 and cache.get(b"a") is None
    cache[b"after"] = b"ok"  # usable after clear
    assert cache[b"after"] == b"ok"


def test_entry_file_is_cuda_cores(cache, cache_dir):
    key = b"some key"
    cache[key] = b"payload"
    digest = hashlib.sha256(key).hexdigest()
    path = cache_dir / "entries" / digest[:2] / digest[2:]
    assert path.read_bytes() == b"payload"


def test_close_and_context_manager(cache_dir):
    with progcache.ProgramCache(cache_dir) as c:
        c[b"k"] = b"v"
    assert c.closed
    c.close()  # twice is harmless
    with pytest.raises(ValueError, match="closed"):
        c.get(b"k")
    with progcache.ProgramCache(cache_dir) as c2:  # the entry outlives the handle
        assert c2[b"k"] == b"v"


def test_max_size_checked_like_cuda_core(cache_dir):
    for bad in (0, -1):
        with pytest.raises(ValueError):
            progcache.ProgramCache(cache_dir, max_size_bytes=bad)
        with pytest.raises(ValueError):
            FileStreamProgramCache(cache_dir, max_size_bytes=bad)


def test_size_cap_evicts(cache_dir):
    with progcache.ProgramCache(cache_dir, max_size_bytes=64 * 1024) as c:
        for i in range(40):
            c[b"k%d" % i] = bytes([i]) * 4096
        assert c.total_size() <= 64 * 1024
        assert c.get(b"k39") == bytes([39]) * 4096  # the newest stays
        assert c.stats()["evictions"] > 0


def test_creates_missing_parents(tmp_path):
    with progcache.ProgramCache(tmp_path / "a" / "b" / "c") as c:
        c[b"k"] = b"v"
    assert (tmp_path / "a" / "b" / "c" / "entries").is_dir()


def test_not_a_cache_directory_is_refused_with_the_message(tmp_path):
    (tmp_path / "mine.txt").write_text("not the cache's")
    with pytest.raises(progcache.InvalidArgumentError) as e:
        progcache.ProgramCache(tmp_path)
    assert e.value.code == -2 and "mine.txt" in str(e.value)
    assert isinstance(e.value, progcache.ProgcacheError) and isinstance(e.value, ValueError)
    assert (tmp_path / "mine.txt").read_text() == "not the cache's"  # untouched


def test_damaged_entry_is_a_miss(cache, cache_dir):
    cache[b"k"] = b"\x7fELF" + b"A" * 1000
    digest = hashlib.sha256(b"k").hexdigest()
    path = cache_dir / "entries" / digest[:2] / digest[2:]
    data = bytearray(path.read_bytes())
    data[500] ^= 1
    path.write_bytes(bytes(data))  # same inode, no seal update: damage
    assert cache.get(b"k") is None  # never the wrong bytes


def test_threads_share_one_cache(cache, cache_dir):
    errors = []
    # The counters are seeded by one scan on first need; a scan racing
    # writers may count one twice (a bound docs/SHARED.md states), so the
    # seed comes first here and len() is then exact.
    assert len(cache) == 0

    def work(t):
        try:
            for i in range(50):
                cache[b"%d-%d" % (t, i)] = b"%d" % i
                assert cache[b"%d-%d" % (t, i)] == b"%d" % i
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) == 400
    assert sum(1 for p in (cache_dir / "entries").rglob("*") if p.is_file()) == 400


def test_program_compile_with_cache(cache):
    options = ProgramOptions(arch="sm_90")
    first = Program(SOURCE, "c++", options).compile("cubin", cache=cache)
    assert len(cache) == 1
    stores = cache.stats()["stores"]
    second = Program(SOURCE, "c++", options).compile("cubin", cache=cache)
    assert bytes(second.code) == bytes(first.code)
    assert cache.stats()["stores"] == stores  # a hit, not a compile
    key = make_program_cache_key(code=SOURCE, code_type="c++", options=options,
                                 target_type="cubin")
    assert cache[key] == bytes(first.code)


def test_stats_count(cache):
    cache[b"k"] = b"v"
    cache.get(b"k")
    cache.get(b"none")
    s = cache.stats()
    assert s["stores"] == 1 and s["hits"] == 1 and s["misses"] == 1 and s["entries"] == 1


def test_works_without_cuda_core(cache_dir):
    """Bytes in, bytes out without cuda.core: ProgramCache is then a class
    of its own with the same methods."""
    from conftest import python

    out = python(
        "import sys\n"
        "sys.modules['cuda.core'] = None  # as if not installed\n"
        "import progcache\n"
        "c = progcache.ProgramCache(sys.argv[1])\n"
        "c['k'] = b'v'\n"
        "assert c[b'k'] == b'v' and c.get('x') is None and len(c) == 1\n"
        "print(progcache.ProgramCache.__mro__[1].__name__)\n", cache_dir)
    assert out.strip() == "object"


def test_close_while_other_threads_read(cache_dir):
    """close() in one thread while others read: each call either completes
    or raises ValueError (closed); nothing crashes or reads freed memory."""
    c = progcache.ProgramCache(cache_dir)
    c[b"k"] = b"v" * 4096
    outcomes = []
    start = threading.Barrier(5)

    def reader():
        start.wait()
        for _ in range(2000):
            try:
                outcomes.append("ok" if c.get(b"k") == b"v" * 4096 else "wrong bytes")
            except ValueError:
                outcomes.append("closed")
                return

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    start.wait()
    c.close()
    for t in threads:
        t.join()
    assert c.closed and set(outcomes) <= {"ok", "closed"}
