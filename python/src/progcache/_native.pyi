"""Type hints of progcache's C extension (_native.c, _native_program.c)."""

from typing import Any, Sequence

version: str
FILE_NO_FSYNC: int
FILE_FSYNC: int
NO_REMOTE: int
PROGRAM_NO_SINGLE_FLIGHT: int
PROGRAM_NO_PCH: int

class Cache:
    """A progcache handle (progcache_open)."""

    path: str | None
    closed: bool
    def __init__(
        self,
        path: str | None = ...,
        max_size: int | None = ...,
        memory_size: int | None = ...,
        max_artifact_size: int | None = ...,
        remote_url: str | None = ...,
        flags: int = ...,
    ) -> None: ...
    def get(self, key: bytes, /) -> bytes | None: ...
    def put(self, key: bytes, data: bytes | bytearray | memoryview, /) -> None: ...
    def remove(self, key: bytes, /) -> bool: ...
    def clear(self) -> None: ...
    def flush(self) -> None: ...
    def count(self) -> int: ...
    def total_size(self) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def stats_reset(self) -> None: ...
    def compile_or_load(
        self,
        source: bytes,
        target: int,
        options: Sequence[bytes],
        name: str | None,
        name_expressions: Sequence[bytes],
        names_are_bytes: bool = ...,
        extra_digest: bytes | None = ...,
        flags: int = ...,
        wait_timeout_ms: int = ...,
    ) -> dict[str, Any]: ...
    def close(self) -> None: ...

def _set_errors(classes: dict[int, type], /) -> None: ...
def nvrtc_version() -> tuple[int, int]: ...
def key_nvrtc(
    source: bytes,
    target: int,
    options: Sequence[bytes] | None = ...,
    name: str | None = ...,
    name_expressions: Sequence[bytes] | None = ...,
    names_are_bytes: bool = ...,
    extra_digest: bytes | None = ...,
    nvrtc_major: int = ...,
    nvrtc_minor: int = ...,
) -> bytes: ...
