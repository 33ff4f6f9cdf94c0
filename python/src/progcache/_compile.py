"""compile_or_load: one compile per fleet, for cuda.core programs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

from ._cache import ProgramCache
from ._errors import InvalidArgumentError
from . import _native, _nvrtc

_TARGETS = {"cubin": 0, "ptx": 1, "ltoir": 2}

NameExpression = Union[str, bytes]


@dataclass(frozen=True)
class CompileResult:
    """What :func:`compile_or_load` found and did.

    ``object_code`` is cuda.core's ObjectCode (its ``symbol_mapping`` holds
    the lowered name of each name expression, on a HIT as on a MISS);
    ``status`` is ``"HIT"`` (read from the cache, or from the compile of
    another thread, process or machine that this call waited for:
    ``waited``) or ``"MISS"`` (compiled here). The times are in
    milliseconds, step by step, as the C call reports them."""

    object_code: Any
    status: str
    key: bytes
    key_ms: float
    lookup_ms: float
    compile_ms: float
    store_ms: float
    wait_ms: float
    waited: bool
    log: str = ""
    lowered_names: dict = field(default_factory=dict)
    cache_error: str = ""


_default_lock = threading.Lock()
_default_cache: ProgramCache | None = None


def default_cache() -> ProgramCache:
    """The process's default ProgramCache (the default directory), opened
    on first use and shared by every compile_or_load without a cache."""
    global _default_cache
    with _default_lock:
        if _default_cache is None or _default_cache.closed:
            _default_cache = ProgramCache()
        return _default_cache


def _names(name_expressions: Sequence[NameExpression]) -> tuple[list[bytes], bool]:
    if isinstance(name_expressions, (str, bytes)):
        raise TypeError("name_expressions is a sequence of str or bytes, not one string")
    kinds = {type(n) for n in name_expressions}
    if not kinds <= {str, bytes}:
        raise TypeError("name expressions must be str or bytes")
    if len(kinds) > 1:
        raise InvalidArgumentError(
            "name expressions mix str and bytes; cuda.core keys each by its type, "
            "progcache takes all of one type: pass all str or all bytes", -2)
    as_bytes = kinds == {bytes}
    return [n if isinstance(n, bytes) else n.encode("utf-8") for n in name_expressions], as_bytes


def compile_or_load(
    source: str | bytes,
    target: str = "cubin",
    options: Any = None,
    *,
    name_expressions: Sequence[NameExpression] = (),
    cache: ProgramCache | None = None,
    extra_digest: bytes | None = None,
    wait_timeout: float | None = None,
    single_flight: bool = True,
) -> CompileResult:
    """Get a program's artifact from the cache, or compile it once per fleet.

    The key is cuda.core's (``make_program_cache_key`` of the same code,
    options, target and name expressions), with the NVRTC cuda.core uses
    in this process. On a miss the compile is single-flight: the key's
    lock in the cache directory (threads and processes of a host) and its
    lease in the remote tier (machines) are taken before the compile and
    released after the store, whatever happens; every other caller waits
    for that compile and gets its bytes as a HIT.

    Parameters
    ----------
    source:
        C++ source (str is taken as UTF-8, as cuda.core does).
    target:
        ``"cubin"``, ``"ptx"`` or ``"ltoir"``.
    options:
        a cuda.core ``ProgramOptions`` (None: ``ProgramOptions()``).
    name_expressions:
        as ``Program.compile``'s; the result's ObjectCode maps each to its
        lowered name, on a HIT in a fresh process too.
    cache:
        a :class:`ProgramCache`; None: :func:`default_cache`.
    extra_digest:
        a digest over files the compile reads that the key cannot see (as
        ``make_program_cache_key``'s). Headers on include paths without it
        are found and covered by progcache's scanner.
    wait_timeout:
        the longest wait for another compile of the same key, in seconds
        (None: ``$PROGCACHE_WAIT_TIMEOUT``, else 60 s).
    single_flight:
        False: compile even when another caller is compiling it now.

    Raises
    ------
    CompileError
        NVRTC rejected the program (the message holds its log).
    UnsafeKeyError
        an option reads or writes files the key cannot describe.
    NvrtcMismatchError
        the C library would compile with another NVRTC than cuda.core's.
    """
    from cuda.core import ObjectCode, ProgramOptions

    if target not in _TARGETS:
        raise ValueError(f"target must be one of {sorted(_TARGETS)}, got {target!r}")
    if options is None:
        options = ProgramOptions()
    code = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    if not isinstance(name_expressions, (str, bytes)):
        name_expressions = tuple(name_expressions)  # read twice below
    names, names_are_bytes = _names(name_expressions)
    argv = list(options.as_bytes("nvrtc", target))
    name = options.name if getattr(options, "name", None) else "default_program"
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    flags = 0 if single_flight else _native.PROGRAM_NO_SINGLE_FLIGHT
    wait_ms = 0 if wait_timeout is None else max(1, int(wait_timeout * 1000))
    _nvrtc.align()
    handle = (cache if cache is not None else default_cache())._cache
    r = handle.compile_or_load(code, _TARGETS[target], argv, name, names, names_are_bytes,
                               extra_digest, flags, wait_ms)
    lowered = {expr: low.encode("utf-8", "surrogateescape")
               for expr, low in zip(name_expressions, r["lowered_names"])}
    make = {"cubin": ObjectCode.from_cubin, "ptx": ObjectCode.from_ptx,
            "ltoir": ObjectCode.from_ltoir}[target]
    obj = make(r["artifact"], name=name,
               symbol_mapping=lowered or None)
    return CompileResult(
        object_code=obj, status=r["status"], key=r["key"], key_ms=r["key_ms"],
        lookup_ms=r["lookup_ms"], compile_ms=r["compile_ms"], store_ms=r["store_ms"],
        wait_ms=r["wait_ms"], waited=bool(r["waited"]), log=r["log"], lowered_names=lowered,
        cache_error=r["cache_detail"] or r["cache_message"])
