"""One NVRTC, one key: the C library compiles with the NVRTC cuda.core uses.

cuda.core keys an entry with the version of the NVRTC cuda-bindings loaded
(a pip wheel's, nvidia-cuda-nvrtc, before the toolkit's); the C library
loads its own on first need. Before the first compile, the file
cuda-bindings mapped is handed to the C library as PROGCACHE_NVRTC_LIBRARY
(the same file: one NVRTC in the process), unless the caller set that
variable, in which case both versions must agree.
"""

from __future__ import annotations

import os
import threading

from . import _native
from ._errors import NvrtcMismatchError

_lock = threading.Lock()
_aligned: tuple[int, int] | None = None


def cuda_core_nvrtc() -> tuple[tuple[int, int], str | None]:
    """The version of the NVRTC cuda-bindings uses, and its file (None when
    it cannot be told). Loads it, as cuda.core would."""
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    if int(err) != 0:
        raise NvrtcMismatchError(f"cuda-bindings cannot read NVRTC's version ({err})")
    return (major, minor), _mapped_nvrtc()


def _mapped_nvrtc() -> str | None:
    """The libnvrtc.so file mapped into this process (not its builtins)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith("libnvrtc.so"):
                    return path
    except OSError:
        return None
    return None


def align() -> tuple[int, int]:
    """Point the C library at cuda.core's NVRTC (once) and check the versions.

    Returns the NVRTC version both use. Raises NvrtcMismatchError when
    PROGCACHE_NVRTC_LIBRARY names an NVRTC of another version than
    cuda.core's, or when cuda.core's NVRTC file cannot be found and the
    library's default one differs."""
    global _aligned
    with _lock:
        if _aligned is not None:
            return _aligned
        version, path = cuda_core_nvrtc()
        if not os.environ.get("PROGCACHE_NVRTC_LIBRARY") and path:
            os.environ["PROGCACHE_NVRTC_LIBRARY"] = path
        ours = _native.nvrtc_version()
        if tuple(ours) != tuple(version):
            raise NvrtcMismatchError(
                "the C library would compile with NVRTC %d.%d (PROGCACHE_NVRTC_LIBRARY=%s) "
                "but cuda.core uses NVRTC %d.%d (%s): their keys would differ; unset "
                "PROGCACHE_NVRTC_LIBRARY or point it at %s"
                % (ours[0], ours[1], os.environ.get("PROGCACHE_NVRTC_LIBRARY", ""),
                   version[0], version[1], path or "cuda-bindings' NVRTC", path or "that file"))
        _aligned = (version[0], version[1])
        return _aligned
