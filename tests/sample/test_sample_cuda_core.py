#!/usr/bin/env python3
"""The sample's --templated program from an entry cuda.core wrote.

A Python program using cuda.core 1.2 compiles matmul<16, Relu> with the
name expression and stores the CUBIN in a FileStreamProgramCache
(cuda_core_templated.py); the entry carries no lowered names. The C sample
run on that directory must then HIT (no compile: the one name and the one
kernel of the artifact say which it is), print the lowered name cuda.core's
symbol_mapping has, and, with --gpu, launch it and pass validation; a second
run HITs again.

usage: test_sample_cuda_core.py --sample EXE [--python PY] [--gpu]
  --python  a python with cuda.core 1.2 (default: this one)
  --gpu     run on CUDA device 0 (SKIPPED without one); else --arch sm_90,
            launch skipped
Exit 77 ("SKIPPED: ...") when cuda.core or (with --gpu) a device is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXPRESSION = "matmul<16, Relu>"


def value(out, label):
    for line in out.splitlines():
        if line.startswith(label):
            return line[20:].strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--gpu", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.python):
        pt.skip("no python with cuda.core at %s" % args.python)
    with tempfile.TemporaryDirectory(prefix="progcache-cudacore-") as tmp:
        src = os.path.join(tmp, "templated.cu")
        with open(src, "w") as f:
            p = subprocess.run([args.sample, "--print-source", "--templated"], stdout=f, text=True)
        check(p.returncode == 0, "--print-source --templated")
        cache = os.path.join(tmp, "cache")
        p = subprocess.run([args.python, os.path.join(HERE, "cuda_core_templated.py"), src, cache,
                            "device" if args.gpu else "sm_90", EXPRESSION],
                           capture_output=True, text=True, timeout=600)
        if p.returncode == 77:
            print(p.stdout.strip())
            return 77
        check(p.returncode == 0, "cuda.core wrote the entry: %s %s" % (p.stdout, p.stderr))
        info = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
        print("cuda.core: %r" % info)
        run = [args.sample, "--templated", "--cache-dir", cache, "--m", "300", "--n", "200", "--k", "100"]
        if not args.gpu:
            run += ["--arch", info.get("arch", "sm_90")]
        for attempt in (1, 2):
            p = subprocess.run(run, capture_output=True, text=True, timeout=600)
            print(p.stdout)
            check(p.returncode == 0, "run %d: exit %d %s" % (attempt, p.returncode, p.stderr))
            check(value(p.stdout, "Cache status:") == "HIT", "run %d: a HIT" % attempt)
            check(value(p.stdout, "Compile time:") == "skipped", "run %d: no compile" % attempt)
            check(value(p.stdout, "Cache key:") == info.get("key", "")[:24] + "...",
                  "run %d: cuda.core's key" % attempt)
            check(value(p.stdout, "Lowered name:") == info.get("lowered"),
                  "run %d: cuda.core's lowered name (%r)" % (attempt, value(p.stdout, "Lowered name:")))
            want = "PASSED" if args.gpu else "SKIPPED"
            check((value(p.stdout, "Validation:") or "").startswith(want), "run %d: %s" % (attempt, want))
    return pt.finish("test_sample_cuda_core")


if __name__ == "__main__":
    sys.exit(main())
