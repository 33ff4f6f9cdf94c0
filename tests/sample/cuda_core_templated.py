#!/usr/bin/env python3
"""Write the sample's --templated program into a cache directory the way a
Python program using cuda.core 1.2 does: Program(...).compile("cubin",
name_expressions=[EXPR]) and FileStreamProgramCache[key] = the CUBIN, with
the key from make_program_cache_key(..., name_expressions=[EXPR]). (cuda.core
refuses compile(cache=...) with name expressions, since the lowered names
are not in the bytes it stores: this is its documented manual pattern.)

usage: cuda_core_templated.py SOURCE_FILE CACHE_DIR ARCH EXPRESSION
ARCH "device": the architecture of CUDA device 0 (cuda.core's Device).
Prints "arch sm_XY", "key <hex>" and "lowered <name>" (cuda.core's
symbol_mapping).
Exit 77 with "SKIPPED: ..." when cuda.core cannot be imported.
"""

import sys


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    source_path, cache_dir, arch, expression = sys.argv[1:]
    try:
        from cuda.core import Program, ProgramOptions
        from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
    except Exception as exc:  # noqa: BLE001 - any import failure means "cannot run here"
        print("SKIPPED: cuda.core cannot be imported: %s" % exc)
        return 77
    if arch == "device":
        try:
            from cuda.core import Device
            cc = Device(0).compute_capability
        except Exception as exc:  # noqa: BLE001
            print("SKIPPED: no CUDA device for cuda.core: %s" % exc)
            return 77
        arch = "sm_%d%d" % (cc.major, cc.minor)
    print("arch %s" % arch)
    with open(source_path, encoding="utf-8") as f:
        source = f.read()
    # The options the sample passes, in cuda.core's spelling: -arch=ARCH --std=c++17.
    options = ProgramOptions(arch=arch, std="c++17")
    key = make_program_cache_key(code=source, code_type="c++", options=options,
                                 target_type="cubin", name_expressions=[expression])
    compiled = Program(source, code_type="c++", options=options).compile(
        "cubin", name_expressions=[expression])
    with FileStreamProgramCache(cache_dir) as cache:
        cache[key] = compiled
    mapping = getattr(compiled, "symbol_mapping", None) or getattr(compiled, "_sym_map", {})
    lowered = mapping.get(expression) if hasattr(mapping, "get") else None
    if isinstance(lowered, bytes):
        lowered = lowered.decode()
    print("key %s" % key.hex())
    print("lowered %s" % lowered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
