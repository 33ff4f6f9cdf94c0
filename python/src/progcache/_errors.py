"""progcache's exceptions: one class per return code of the C library.

Each carries the library's message (``str(exc)``, ``exc.message``: what
failed, which path or option, what to do) and its code (``exc.code``, the
``PROGCACHE_E*`` value of include/progcache/common.h).
"""

from __future__ import annotations


class ProgcacheError(Exception):
    """A progcache call failed; ``message`` says why, ``code`` is the C code."""

    code: int = 0

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __reduce__(self):  # pickles (multiprocessing) with its code
        return (type(self), (self.message, self.code))


class InvalidArgumentError(ProgcacheError, ValueError):
    """A bad argument, option, setting or directory (PROGCACHE_EINVAL)."""

    code = -2


class UnsafeKeyError(ProgcacheError, ValueError):
    """A key cannot be derived safely from these inputs (PROGCACHE_EUNSAFEKEY):
    an option that reads files the key cannot see, or writes files a hit
    would skip. The message names the option and what to do."""

    code = -3


class CorruptEntryError(ProgcacheError):
    """Stored bytes failed a check (PROGCACHE_ECORRUPT)."""

    code = -4


class CacheIOError(ProgcacheError):
    """The file system refused (permissions, a full disk, ...) (PROGCACHE_EIO)."""

    code = -5


class CacheMemoryError(ProgcacheError, MemoryError):
    """Out of memory (PROGCACHE_ENOMEM)."""

    code = -6


class RemoteError(ProgcacheError):
    """A remote tier is unavailable or not built in (PROGCACHE_EREMOTE)."""

    code = -7


class WaitTimeoutError(ProgcacheError):
    """A bounded wait ran out (PROGCACHE_ETIMEOUT)."""

    code = -8


class CompileError(ProgcacheError):
    """NVRTC rejected the program; the message holds its log (PROGCACHE_ECOMPILE)."""

    code = -9


class CudaError(ProgcacheError):
    """The CUDA driver failed a call (PROGCACHE_ECUDA)."""

    code = -10


class NoCudaError(ProgcacheError):
    """No CUDA driver, device or NVRTC here (PROGCACHE_ENOCUDA)."""

    code = -11


class NvrtcMismatchError(ProgcacheError):
    """The NVRTC the C library would compile with is not the one cuda.core
    uses in this process, so their keys would differ (docs/PYTHON.md, "One
    NVRTC, one key")."""

    code = -2


_BY_CODE = {
    cls.code: cls
    for cls in (InvalidArgumentError, UnsafeKeyError, CorruptEntryError, CacheIOError,
                CacheMemoryError, RemoteError, WaitTimeoutError, CompileError, CudaError,
                NoCudaError)
}
