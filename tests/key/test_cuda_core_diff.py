#!/usr/bin/env python3
"""Differential test: progcache against a live cuda.core 1.2.x.

For a few hundred random cases (sources with non-ASCII text, ProgramOptions
drawn from its fields, targets, name expressions, extra digests) the key
printed by `progcache key` must equal cuda.core's make_program_cache_key()
given the option strings ProgramOptions.as_bytes("nvrtc", target) emits, and
progcache must refuse exactly the inputs cuda.core refuses. Then entries
written by cuda.core's FileStreamProgramCache must be read by progcache, and
the other way round, byte for byte.

Modes:
  (default)  create a virtual environment (--venv DIR), pip install
             "cuda-core==1.2.*" and "cuda-bindings==13.*" into it (once; it is
             reused), and run this script again inside it.
  --no-venv  use the cuda.core this python already has (for example on the
             GPU machine: python3 tests/key/test_cuda_core_diff.py
             --progcache-bin build/bin/progcache --no-venv).
Exit 77 with "SKIPPED: <reason>" when cuda.core cannot be installed or cannot
derive keys here.

The cross-read uses `progcache get`/`put` when the tool has them and they
behave as this script expects (see store_via_cli), otherwise the
key_store_xread helper built in tests/key (PROGCACHE_KEY_STORE_HELPER or
--store-helper).
"""

import argparse
import hashlib
import os
import random
import subprocess
import sys
import tempfile

SKIP = 77
DEFAULT_SEED = 20261129
PIP_PACKAGES = ["cuda-core==1.2.*", "cuda-bindings==13.*"]


def skipped(reason):
    print("SKIPPED: " + reason)
    sys.exit(SKIP)


# --------------------------------------------------------------------------
# Virtual environment
# --------------------------------------------------------------------------

def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def venv_has_cuda_core(py):
    probe = "import cuda.core, sys; sys.exit(0 if cuda.core.__version__.startswith('1.2.') else 1)"
    return subprocess.run([py, "-c", probe], capture_output=True).returncode == 0


def ensure_venv(venv):
    py = venv_python(venv)
    if os.path.exists(py) and venv_has_cuda_core(py):
        print("using the virtual environment at %s" % venv)
        return py
    print("creating a virtual environment at %s" % venv)
    p = subprocess.run([sys.executable, "-m", "venv", "--clear", venv], capture_output=True, text=True)
    if p.returncode != 0:
        skipped("cannot create a virtual environment (%s): %s" % (venv, p.stderr.strip()[-300:]))
    print("pip install %s" % " ".join(PIP_PACKAGES))
    try:
        p = subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                            "--timeout", "30", "--retries", "2"] + PIP_PACKAGES,
                           capture_output=True, text=True, timeout=480)
    except subprocess.TimeoutExpired:
        skipped("pip install of %s took too long (no package index reachable?)" % PIP_PACKAGES)
    if p.returncode != 0:
        skipped("cannot pip install %s: %s" % (PIP_PACKAGES, (p.stderr or p.stdout).strip()[-400:]))
    if not venv_has_cuda_core(py):
        skipped("cuda-core 1.2.x installed but cannot be imported")
    return py


# --------------------------------------------------------------------------
# Random inputs
# --------------------------------------------------------------------------

TEXT_BITS = [
    'extern "C" __global__ void k(float *a){ a[threadIdx.x] *= 2.0f; }\n',
    "template<int N> __global__ void t(int *a){ a[threadIdx.x] = N; }\n",
    "// caf\u00e9 \u4e2d\u6587 \u2211 \U0001F680\n",
    "/* \u00fc\u00df\u00e9 */\n",
    "#define X 1\n",
    "\t\r\n",
    "struct S { int v; };\n",
    '__device__ const char *s = "\u00e9\u4e2d";\n',
    "\x00",
]

NAME_POOL = ["t<1>", "t<2>", "t<3>", "k", "ns::f<int>", "&g", "t<\u00e9>", "a", "ab", "B"]


def random_code(rng):
    if rng.random() < 0.03:
        return ""
    return "".join(rng.choice(TEXT_BITS) for _ in range(rng.randint(1, 6)))


def random_word(rng, alphabet="abcXYZ019_\u00e9"):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))


def tri(rng):
    return rng.choice([None, True, False])


def random_options(rng):
    """Keyword arguments for ProgramOptions, drawn from its fields."""
    kw = {"arch": rng.choice(["sm_80", "sm_86", "sm_90", "sm_100", "compute_90"])}
    bools = ["relocatable_device_code", "extensible_whole_program", "debug", "lineinfo",
             "device_code_optimize", "ftz", "prec_sqrt", "prec_div", "fma", "use_fast_math",
             "extra_device_vectorization", "link_time_optimization", "gen_opt_lto",
             "no_source_include", "builtin_move_forward", "builtin_initializer_list",
             "disable_warnings", "restrict", "device_as_default_execution_space",
             "device_int128", "no_display_error_number", "brief_diagnostics",
             "fdevice_syntax_only", "minimal", "no_cache", "device_float128",
             "pch_verbose", "pch_messages", "instantiate_templates_in_pch"]
    for name in rng.sample(bools, rng.randint(0, 6)):
        kw[name] = tri(rng)
    extras = {
        "std": lambda: rng.choice(["c++11", "c++14", "c++17", "c++20"]),
        "max_register_count": lambda: rng.choice([32, 64, 128, 255]),
        "ptxas_options": lambda: rng.choice(["-v", ["-v", "-O2"], ("-O3",), []]),
        "define_macro": lambda: rng.choice([random_word(rng), (random_word(rng), random_word(rng)),
                                            [random_word(rng), (random_word(rng), "2")]]),
        "undefine_macro": lambda: rng.choice([random_word(rng), [random_word(rng), random_word(rng)]]),
        "optimization_info": lambda: "inline",
        "diag_error": lambda: rng.choice([1, [2, 3]]),
        "diag_suppress": lambda: rng.choice([4, [5, 6]]),
        "diag_warn": lambda: rng.choice([7, [8]]),
        "split_compile": lambda: rng.choice([0, 2, 4]),
        "frandom_seed": lambda: str(rng.randint(0, 99)),
        "ofast_compile": lambda: rng.choice(["0", "min", "mid", "max"]),
        "name": lambda: rng.choice(["k.cu", "kernel_\u00e9.cu", "default_program", "", "dir/k.cu",
                                    "a\\b.cu", "x"]),
    }
    for name in rng.sample(sorted(extras), rng.randint(0, 5)):
        kw[name] = extras[name]()
    # Options that read or write outside files: both sides must refuse them
    # (the readers only without a digest).
    if rng.random() < 0.2:
        risky = {
            "include_path": lambda: rng.choice(["/usr/include", ["/a", "/b\u00e9"], "", []]),
            "pre_include": lambda: rng.choice(["a.h", ["a.h", "b.h"], []]),
            "pch": lambda: rng.choice([True, False]),
            "use_pch": lambda: rng.choice(["x.pch", ""]),
            "pch_dir": lambda: "pchdir",
            "create_pch": lambda: "x.pch",
            "time": lambda: rng.choice(["t.csv", ""]),
            "fdevice_time_trace": lambda: "trace.json",
        }
        for name in rng.sample(sorted(risky), rng.randint(1, 2)):
            kw[name] = risky[name]()
    return kw


def random_case(rng):
    n_names = rng.choice([0, 0, 1, 2, 3, 4])
    as_bytes = rng.random() < 0.3
    names = [rng.choice(NAME_POOL) for _ in range(n_names)]
    if as_bytes:
        names = [n.encode("utf-8") for n in names]
    digest = None
    if rng.random() < 0.35:
        digest = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 16, 32, 40])))
    return {
        "code": random_code(rng),
        "target": rng.choice(["cubin", "ptx", "ltoir"]),
        "options": random_options(rng),
        "names": names,
        "names_bytes": as_bytes,
        "digest": digest,
    }


# --------------------------------------------------------------------------
# The two sides
# --------------------------------------------------------------------------

def cuda_core_key(case):
    """(key bytes, None), (None, message) when cuda.core refuses with
    ValueError, or raises for inputs this test should not have made."""
    from cuda.core import ProgramOptions
    from cuda.core.utils import make_program_cache_key
    options = ProgramOptions(**case["options"])
    argv = options.as_bytes("nvrtc", case["target"])
    try:
        key = make_program_cache_key(code=case["code"], code_type="c++", options=options,
                                     target_type=case["target"], name_expressions=case["names"],
                                     extra_digest=case["digest"])
    except ValueError as exc:
        return argv, options.name, None, str(exc)
    return argv, options.name, key, None


def _frame(label, payload):
    return label.encode() + len(payload).to_bytes(8, "big") + payload


# The headers digest of a program that has no header in memory, reads no
# header file and no toolkit header (docs/KEY.md, "The headers digest").
EMPTY_HEADERS_DIGEST = hashlib.sha256(
    _frame("headers", b"1") + _frame("memory_count", b"0") + _frame("file_count", b"0")
    + _frame("toolkit", b"")).digest()


def covered_by_scanner(refusal, argv):
    """Whether progcache key covers what cuda.core refused for want of a
    digest: include paths and a program name with a directory, read by the
    include scanner. Pre-includes name files that are not there (refused),
    precompiled headers need a digest, side effects are refused always."""
    if "side effects" in refusal:
        return False
    for a in argv:
        a = bytes(a).decode("utf-8", "replace")
        name = a.split("=", 1)[0]
        if name in ("--pre-include", "-include", "--pch", "-pch", "--use-pch", "-use-pch",
                    "--pch-dir", "-pch-dir"):
            return False
        if name == "--include-path" and a == "--include-path=":
            return False
    return True


def progcache_key(binary, case, argv, name, tmp, nvrtc_version, use_stdin):
    args = [binary, "key", "--target", case["target"]]
    if nvrtc_version:
        args += ["--nvrtc-version", nvrtc_version]
    if name is not None and (name != "default_program" or random.random() < 0.5):
        args += ["--name", name.encode("utf-8")]
    for n in case["names"]:
        args += ["--name-expression", n if isinstance(n, bytes) else n.encode("utf-8")]
    if case["names_bytes"]:
        args.append("--name-expressions-bytes")
    if case["digest"] is not None:
        args += ["--extra-digest", case["digest"].hex()]
    code = case["code"].encode("utf-8")
    if use_stdin:
        args.append("-")
    else:
        path = os.path.join(tmp, "case.cu")
        with open(path, "wb") as f:
            f.write(code)
        args.append(path)
    args.append("--")
    args += [bytes(a) for a in argv]
    p = subprocess.run(args, input=code if use_stdin else None, capture_output=True)
    return p.returncode, p.stdout.decode("ascii", "replace"), p.stderr.decode("utf-8", "replace")


# --------------------------------------------------------------------------
# Cross-read of cache entries
# --------------------------------------------------------------------------

class StoreViaHelper:
    def __init__(self, helper):
        self.helper = helper
        self.name = "key_store_xread helper (%s)" % helper

    def put(self, root, key, data, tmp):
        path = os.path.join(tmp, "in.bin")
        with open(path, "wb") as f:
            f.write(data)
        p = subprocess.run([self.helper, "put", root, key.hex(), path], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("helper put failed: " + p.stderr)

    def get(self, root, key, tmp):
        path = os.path.join(tmp, "out.bin")
        p = subprocess.run([self.helper, "get", root, key.hex(), path], capture_output=True, text=True)
        if p.returncode == 3:
            return None
        if p.returncode != 0:
            raise RuntimeError("helper get failed: " + p.stderr)
        with open(path, "rb") as f:
            return f.read()


class StoreViaCli:
    """`progcache put --dir DIR KEY_HEX FILE` and `progcache get --dir DIR
    KEY_HEX` (value on stdout, exit 0; a miss exits non-zero)."""

    def __init__(self, binary):
        self.binary = binary
        self.name = "progcache get/put"

    def put(self, root, key, data, tmp):
        path = os.path.join(tmp, "in.bin")
        with open(path, "wb") as f:
            f.write(data)
        p = subprocess.run([self.binary, "put", "--dir", root, key.hex(), path], capture_output=True, cwd=tmp)
        if p.returncode != 0:
            raise RuntimeError("progcache put failed: " + p.stderr.decode("utf-8", "replace"))

    def get(self, root, key, tmp):
        p = subprocess.run([self.binary, "get", "--dir", root, key.hex()], capture_output=True, cwd=tmp)
        if p.returncode != 0:
            return None
        return p.stdout


def store_via_cli(binary, tmp):
    """The CLI store interface, if the tool has one that round-trips with
    cuda.core; else None."""
    from cuda.core.utils import FileStreamProgramCache
    for sub in ("get", "put"):
        p = subprocess.run([binary, sub, "--help"], capture_output=True, cwd=tmp)
        if p.returncode != 0:
            return None
    cli = StoreViaCli(binary)
    root = tempfile.mkdtemp(dir=tmp)
    key, data = os.urandom(32), b"probe\x00\xff"
    try:
        cli.put(root, key, data, tmp)
        with FileStreamProgramCache(root) as cache:
            ok = cache.get(key) == data
        ok = ok and cli.get(root, key, tmp) == data
    except (RuntimeError, OSError) as exc:
        print("progcache get/put exist but did not round-trip (%s)" % exc)
        return None
    if not ok:
        print("progcache get/put exist but do not take `--dir DIR KEY_HEX [FILE]`")
    return cli if ok else None


def entry_path(root, key):
    import hashlib
    h = hashlib.sha256(key).hexdigest()
    return os.path.join(root, "entries", h[:2], h[2:])


def cross_read(store, keys, rng, tmp):
    """Returns the number of failed checks."""
    from cuda.core.utils import FileStreamProgramCache
    failures = 0
    by_python = os.path.join(tmp, "written-by-cuda-core")
    by_progcache = os.path.join(tmp, "written-by-progcache")
    payloads = []
    for key in keys:
        size = rng.choice([1, 17, 4096, 5 * 1024 + 600, 70000, 300000])
        payloads.append((key, bytes(rng.randrange(256) for _ in range(size))))
    with FileStreamProgramCache(by_python) as cache:
        for key, data in payloads:
            cache[key] = data
    for key, data in payloads:
        store.put(by_progcache, key, data, tmp)
    with FileStreamProgramCache(by_progcache) as cache:
        for key, data in payloads:
            got_py = cache.get(key)
            got_c = store.get(by_python, key, tmp)
            if got_py != data:
                failures += 1
                print("FAIL: cuda.core did not read progcache's entry for %s" % key.hex())
            if got_c != data:
                failures += 1
                print("FAIL: progcache did not read cuda.core's entry for %s" % key.hex())
            # Same file, same bytes, in both directories.
            with open(entry_path(by_python, key), "rb") as a, open(entry_path(by_progcache, key), "rb") as b:
                if a.read() != b.read():
                    failures += 1
                    print("FAIL: entry files differ for %s" % key.hex())
    # A miss stays a miss on both sides.
    absent = os.urandom(32)
    if store.get(by_python, absent, tmp) is not None:
        failures += 1
        print("FAIL: progcache found an entry cuda.core never wrote")
    print("cross-read: %d entries each way via %s, %d failure(s)" % (len(payloads), store.name, failures))
    return failures


# --------------------------------------------------------------------------

def run_cases(args):
    try:
        import cuda.core
        from cuda.core import ProgramOptions
        from cuda.core.utils import make_program_cache_key
        from cuda.bindings import nvrtc
    except Exception as exc:  # noqa: BLE001 - any import failure means "cannot run here"
        skipped("cuda.core cannot be imported by %s: %s" % (sys.executable, exc))
    if not cuda.core.__version__.startswith("1.2."):
        print("note: cuda.core %s, not 1.2.x" % cuda.core.__version__)
    try:
        make_program_cache_key(code="x", code_type="c++", options=ProgramOptions(arch="sm_90"),
                               target_type="cubin")
        err, major, minor = nvrtc.nvrtcVersion()
        if int(err) != 0:
            raise RuntimeError("nvrtcVersion returned %s" % err)
    except Exception as exc:  # noqa: BLE001
        skipped("cuda.core %s cannot derive keys on this machine: %s" % (cuda.core.__version__, exc))
    version = "%d.%d" % (major, minor)
    print("cuda.core %s (%s), NVRTC %s, python %s" % (cuda.core.__version__, cuda.core.__file__,
                                                    version, sys.executable))

    binary = args.progcache_bin
    seed = args.seed
    print("seed %d (rerun with --seed %d), %d cases" % (seed, seed, args.cases))
    rng = random.Random(seed)
    random.seed(seed)
    failures = passes = refusals = 0
    keys = []
    with tempfile.TemporaryDirectory(prefix="progcache-diff-") as tmp:
        # Does progcache load the same NVRTC as cuda.core? Then half the
        # cases use the run-time version, the rest pass it explicitly.
        probe = {"code": "x", "target": "cubin", "options": {"arch": "sm_90"}, "names": [],
                 "names_bytes": False, "digest": None}
        argv, name, want, _ = cuda_core_key(probe)
        rc, out, err = progcache_key(binary, probe, argv, name, tmp, None, False)
        same_nvrtc = rc == 0 and out.strip() == want.hex()
        if not same_nvrtc:
            print("note: progcache's run-time NVRTC differs from cuda.core's (%r); "
                  "passing --nvrtc-version %s" % ((out + err).strip(), version))

        for i in range(args.cases):
            case = random_case(rng)
            argv, name, want, refusal = cuda_core_key(case)
            explicit = None if same_nvrtc and rng.random() < 0.5 else version
            rc, out, err = progcache_key(binary, case, argv, name, tmp, explicit, rng.random() < 0.2)
            covered = refusal is not None and covered_by_scanner(refusal, argv)
            if covered:
                # cuda.core wants a digest for include paths and a name
                # with a directory; progcache key reads what they reach
                # (nothing, here: no source includes anything) and gives
                # cuda.core's key with the headers digest of nothing
                # (docs/KEY.md, "The headers digest").
                case_d = dict(case, digest=EMPTY_HEADERS_DIGEST)
                _, _, want, again = cuda_core_key(case_d)
                ok = again is None and rc == 0 and out == want.hex() + "\n"
                if ok:
                    keys.append(want)
            elif refusal is not None:
                # Refused for the same reason: a side effect (no digest
                # helps) or unseen files (a digest would).
                reason = "side effect" if "side effects" in refusal else "extra digest"
                ok = rc == 2 and out == "" and err.startswith("progcache key: ") and reason in err
                refusals += 1
            else:
                ok = rc == 0 and out == want.hex() + "\n"
                if ok:
                    keys.append(want)
            if ok:
                passes += 1
            else:
                failures += 1
                print("FAIL case %d: %r" % (i, case))
                print("  nvrtc argv %r, name %r" % (argv, name))
                print("  cuda.core: %s" % (refusal or want.hex()))
                print("  progcache: rc=%d out=%r err=%r" % (rc, out, err))
        print("keys: %d cases agree (%d refused by both), %d differ" % (passes, refusals, failures))
        if len(keys) < args.cases // 2 or refusals < 10:
            print("FAIL: too few accepted (%d) or refused (%d) cases to mean much" % (len(keys), refusals))
            failures += 1

        store = None
        if not args.no_cross_read:
            store = store_via_cli(binary, tmp)
            helper = args.store_helper or os.environ.get("PROGCACHE_KEY_STORE_HELPER")
            if store is None and helper and os.path.exists(helper):
                store = StoreViaHelper(helper)
        if store is None:
            print("SKIPPED part: cross-read of cache entries (no `progcache get/put` and no "
                  "key_store_xread helper; pass --store-helper)")
        else:
            sample = keys[: args.cross_read]
            n = cross_read(store, sample, rng, tmp)
            failures += n
            passes += 3 * len(sample) + 1 - n
    print("%d passed, %d failed" % (passes, failures))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--progcache-bin", default=os.environ.get("PROGCACHE_BIN"),
                    help="the progcache tool (default: $PROGCACHE_BIN)")
    ap.add_argument("--venv", default=os.environ.get("PROGCACHE_VENV"),
                    help="virtual environment to create/reuse (default: $PROGCACHE_VENV, "
                         "else ./cuda-core-venv)")
    ap.add_argument("--no-venv", action="store_true", help="use this python's cuda.core")
    ap.add_argument("--store-helper", help="key_store_xread (default: $PROGCACHE_KEY_STORE_HELPER)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--cross-read", type=int, default=30, help="keys used for the cross-read")
    ap.add_argument("--no-cross-read", action="store_true")
    args = ap.parse_args()
    if not args.progcache_bin or not os.path.exists(args.progcache_bin):
        print("the progcache tool was not found: pass --progcache-bin or set PROGCACHE_BIN")
        return 2
    args.progcache_bin = os.path.abspath(args.progcache_bin)
    if not args.no_venv:
        venv = os.path.abspath(args.venv or "cuda-core-venv")
        py = ensure_venv(venv)
        argv = [py, os.path.abspath(__file__), "--no-venv"] + [
            a for a in sys.argv[1:] if a != "--no-venv"]
        # Replace --progcache-bin with the absolute path resolved above.
        argv += ["--progcache-bin", args.progcache_bin]
        return subprocess.run(argv).returncode
    return run_cases(args)


if __name__ == "__main__":
    sys.exit(main())
