"""ProgramCache: cuda.core's ProgramCacheResource on progcache's engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

from . import _native

try:  # a subclass when cuda.core is installed, so cuda.core takes it as one of its own
    from cuda.core import ObjectCode as _ObjectCode
    from cuda.core.utils import ProgramCacheResource as _Base
except ImportError:  # bytes in, bytes out without cuda.core
    _ObjectCode = None
    _Base = object

Key = Union[bytes, bytearray, str]
Value = Union[bytes, bytearray, memoryview, Any]  # Any: cuda.core's ObjectCode


def _key_bytes(key: object) -> bytes:
    """The key as the bytes hashed into the entry's name, as cuda.core does:
    bytes as they are, str as UTF-8."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, bytearray):
        return bytes(key)
    if isinstance(key, str):
        return key.encode("utf-8")
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")


def _value_bytes(value: object) -> bytes | bytearray | memoryview:
    """The bytes to store: a bytes-like value, or an ObjectCode's code (read
    from its file when it is path-backed)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value
    if _ObjectCode is not None and isinstance(value, _ObjectCode):
        code = value.code
        if isinstance(code, str):
            try:
                return Path(code).read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"cannot store path-backed ObjectCode in cache: {code} no longer exists"
                ) from None
        return bytes(code)
    raise TypeError(f"cache values must be bytes-like or ObjectCode, got {type(value).__name__}")


def _size(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int or None, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{what} must be positive or None (0 would evict every write)")
    return value


class ProgramCache(_Base):  # type: ignore[misc, valid-type]
    """A program cache for cuda.core on progcache's engine.

    A :class:`cuda.core.utils.ProgramCacheResource` (a subclass of it when
    cuda.core is installed): pass it to ``Program.compile(..., cache=...)``
    or use it as a mapping from keys (``bytes``, or ``str`` taken as UTF-8,
    as :func:`cuda.core.utils.make_program_cache_key` makes them) to the
    compiled bytes. It reads and writes cuda.core's directory layout, so
    entries are shared byte for byte with ``FileStreamProgramCache`` and
    with C programs using progcache (``progcache get``/``put``).

    Unlike ``FileStreamProgramCache`` it is progcache's cache: entries are
    sealed (a damaged one is a miss, never wrong bytes), the directory is
    capped (``max_size_bytes``, else the directory's setting, 5 GiB by
    default), shared by a team when its directory says so, safe on network
    file systems, optionally backed by Redis (``remote="redis://host"``),
    and counted (:meth:`stats`, ``progcache stats``). For a compile that
    happens once per fleet use :func:`progcache.compile_or_load`.

    Parameters
    ----------
    path:
        The cache directory. None: ``$PROGCACHE_DIR``, else cuda.core's
        default (``$XDG_CACHE_HOME/cuda-python/program-cache``, else
        ``~/.cache/cuda-python/program-cache``). Created if missing.
    max_size_bytes:
        The directory's size cap; least recently used entries are evicted
        above it. None: the directory's setting (docs/CONFIG.md).
    memory_size:
        Bytes of an in-process memory tier in front of the directory. None:
        the setting (none by default).
    remote:
        A remote tier's URL (``redis://host:6379/0``, ``unix:/path``, a
        registered tier's scheme). None: ``$PROGCACHE_REMOTE``, if set.
    no_remote:
        Ignore ``$PROGCACHE_REMOTE``.
    fsync:
        False: do not fsync entries (faster writes, for scratch caches).
        None: the setting.

    Raises
    ------
    ProgcacheError
        (a subclass by code) when the directory cannot be used; the message
        names it and says why.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_size_bytes: int | None = None,
        memory_size: int | None = None,
        max_artifact_size: int | None = None,
        remote: str | None = None,
        no_remote: bool = False,
        fsync: bool | None = None,
    ) -> None:
        max_size = _size(max_size_bytes, "max_size_bytes")
        memory = _size(memory_size, "memory_size")
        largest = _size(max_artifact_size, "max_artifact_size")
        flags = _native.NO_REMOTE if no_remote else 0
        if fsync is False:
            flags |= _native.FILE_NO_FSYNC
        elif fsync is True:
            flags |= _native.FILE_FSYNC
        root = None if path is None else os.fsdecode(os.fspath(path))
        if root is not None:  # cuda.core creates the parents too
            os.makedirs(root, exist_ok=True)
        self._cache = _native.Cache(root, max_size, memory, largest, remote, flags)

    # -- the mapping -----------------------------------------------------

    def __getitem__(self, key: Key) -> bytes:
        """The bytes stored under key; KeyError when there are none."""
        data = self._cache.get(_key_bytes(key))
        if data is None:
            raise KeyError(key)
        return data

    def get(self, key: Key, default: bytes | None = None) -> bytes | None:
        """The bytes stored under key, else default (one lookup: no race
        between a test and a read)."""
        data = self._cache.get(_key_bytes(key))
        return default if data is None else data

    def __setitem__(self, key: Key, value: Value) -> None:
        """Store value (bytes-like, or an ObjectCode's bytes) under key, in
        every tier; durable when it returns (unless ``fsync=False``)."""
        k = _key_bytes(key)
        self._cache.put(k, _value_bytes(value))

    def __delitem__(self, key: Key) -> None:
        """Remove key's entry from every tier; KeyError when none had it."""
        if not self._cache.remove(_key_bytes(key)):
            raise KeyError(key)

    def __len__(self) -> int:
        """The number of entries in the cache directory."""
        return self._cache.count()

    def update(
        self, items: Mapping[Key, Value] | Iterable[tuple[Key, Value]], /
    ) -> None:
        """Store each (key, value) in turn, as ``self[key] = value`` does."""
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self[key] = value

    def clear(self) -> None:
        """Remove every entry (of this cache's making) from every tier."""
        self._cache.clear()

    # -- progcache's own -------------------------------------------------

    @property
    def path(self) -> Path:
        """The cache directory."""
        return Path(self._cache.path)

    def total_size(self) -> int:
        """Bytes of entries in the cache directory."""
        return self._cache.total_size()

    def stats(self) -> dict[str, int]:
        """The directory's counters (every process's: ``progcache stats``)."""
        return self._cache.stats()

    def stats_reset(self) -> None:
        """Zero the directory's counters."""
        self._cache.stats_reset()

    def flush(self) -> None:
        """Wait for background writes (the remote tier's queue)."""
        self._cache.flush()

    def close(self) -> None:
        """Wait for background writes and release the cache; later calls
        raise ValueError. Closing twice is harmless."""
        self._cache.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._cache.closed

    def __enter__(self) -> ProgramCache:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else str(self._cache.path)
        return f"<progcache.ProgramCache {state}>"
