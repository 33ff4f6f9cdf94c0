#!/usr/bin/env python3
"""docs/PYTHON.md's two programs, exactly as the page shows them: the
Python one (cuda.core) run under cuda.core 1.2 from PyPI, the C one
(progcache) built from the page at configure time (python_doc_c). Both use
their default directory, which is one directory: XDG_CACHE_HOME points at a
fresh folder, PROGCACHE_DIR is unset. In each order, the first prints MISS
(it compiled and stored), the second HIT, with the same key, and the entry
sits where cuda.core's FileStreamProgramCache puts it.

  test_python_doc.py --venv DIR --c-program BIN
The virtual environment is test_cuda_core_diff's (created there, reused
here); exit 77 with the reason when cuda.core cannot be installed.
"""

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "PYTHON.md")
sys.path.insert(0, HERE)
import test_cuda_core_diff as diff  # noqa: E402  (its venv helpers)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402


def python_block():
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    check(len(blocks) == 1, "docs/PYTHON.md has one python block", len(blocks))
    return blocks[0]


def run(argv, xdg, what):
    env = dict(os.environ)
    env.pop("PROGCACHE_DIR", None)
    env.pop("PROGCACHE_REMOTE", None)
    env["XDG_CACHE_HOME"] = xdg
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    check(p.returncode == 0, "%s runs" % what, p.stderr[-2000:])
    m = re.search(r"^(python|c): (HIT|MISS) ([0-9a-f]{64})$", p.stdout, re.M)
    check(m is not None, "%s prints its status and key" % what, p.stdout)
    return (m.group(2), m.group(3)) if m else (None, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    ap.add_argument("--c-program", required=True)
    args = ap.parse_args()
    py = diff.ensure_venv(os.path.abspath(args.venv))
    with tempfile.TemporaryDirectory(prefix="progcache-python-doc-") as tmp:
        script = os.path.join(tmp, "python_side.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(python_block())
        python = ([py, script], "the Python program")
        c = ([args.c_program], "the C program")
        for n, (first, second) in enumerate(((python, c), (c, python))):
            xdg = os.path.join(tmp, "xdg%d" % n)
            s1, k1 = run(first[0], xdg, first[1])
            s2, k2 = run(second[0], xdg, second[1])
            check(s1 == "MISS" and s2 == "HIT",
                  "%s, then %s: MISS then HIT" % (first[1], second[1]), (s1, s2))
            check(k1 == k2, "one key on both sides", (k1, k2))
            if k1:
                h = hashlib.sha256(bytes.fromhex(k1)).hexdigest()
                entry = os.path.join(xdg, "cuda-python", "program-cache", "entries", h[:2], h[2:])
                check(os.path.isfile(entry), "the entry is in cuda.core's default directory", entry)
    return pt.finish("test_python_doc")


if __name__ == "__main__":
    sys.exit(main())
