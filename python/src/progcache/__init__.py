"""progcache for Python: a drop-in program cache for cuda.core.

- :class:`ProgramCache`: a ``cuda.core.utils.ProgramCacheResource`` on
  progcache's engine (sealed entries, a size cap, team caches, a Redis
  tier, statistics), sharing cuda.core's directory layout and keys, so
  ``Program(...).compile("cubin", cache=progcache.ProgramCache())`` works
  and its entries are read by ``FileStreamProgramCache`` and by C programs.
- :func:`compile_or_load`: compile a program once per fleet (single-flight
  across threads, processes and machines), with name expressions that
  survive a hit.
- :class:`ProgcacheError` and its subclasses: the library's message and code.

docs/PYTHON.md in the repository is the guide.
"""

from __future__ import annotations

from . import _native
from ._cache import ProgramCache
from ._compile import CompileResult, compile_or_load, default_cache
from ._errors import (
    CacheIOError,
    CacheMemoryError,
    CompileError,
    CorruptEntryError,
    CudaError,
    InvalidArgumentError,
    NoCudaError,
    NvrtcMismatchError,
    ProgcacheError,
    RemoteError,
    UnsafeKeyError,
    WaitTimeoutError,
    _BY_CODE,
)

_native._set_errors(dict(_BY_CODE))

__version__ = _native.version
"""The version of progcache (the C library's)."""


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC the C library compiles with in this
    process (``PROGCACHE_NVRTC_LIBRARY``, else the toolkit's)."""
    return tuple(_native.nvrtc_version())  # type: ignore[return-value]


def nvrtc_library() -> str | None:
    """The NVRTC file loaded in this process, if one is (cuda.core's and,
    once compile_or_load has run, the C library's: the same file)."""
    from ._nvrtc import _mapped_nvrtc

    return _mapped_nvrtc()


__all__ = [
    "CacheIOError", "CacheMemoryError", "CompileError", "CompileResult", "CorruptEntryError",
    "CudaError", "InvalidArgumentError", "NoCudaError", "NvrtcMismatchError", "ProgcacheError",
    "ProgramCache", "RemoteError", "UnsafeKeyError", "WaitTimeoutError", "compile_or_load",
    "default_cache", "nvrtc_library", "nvrtc_version",
]
