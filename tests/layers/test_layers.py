#!/usr/bin/env python3
"""The layer test: every quoted #include of src/, include/progcache/,
tools/, samples/, examples/ and helper/ points down the layers
docs/ARCHITECTURE.md draws, as tests/layers.txt encodes them, and into
another room only through the headers that room exports (its internal
interface), and from the rooms it names when it names them (`only`).
Fails, naming the file, the line and the rule, on any other.

    test_layers.py ROOT [TABLE] [--build BUILD]

With a build tree it also reads the linked objects (layer_symbols.py):
a call must go down the same layers as an include.

Also fails on a table that names a folder or header that does not exist
(so the table cannot drift from the tree), and checks itself: a planted
include of cache/ from util/ must be caught."""
import os
import re
import sys

import layer_symbols

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".c", ".h")
TREES = ("src", "include/progcache", "tools", "samples", "examples", "helper")


def load_table(path):
    layers, public, exports, excepts, defines, only = {}, {}, {}, set(), {}, {}
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(layer|public|export|except|define|only)\s+(\S+):\s*(.*)$", line)
        if not m:
            raise SystemExit("%s:%d: not a rule: %s" % (path, n, raw.rstrip()))
        verb, key, rest = m.group(1), m.group(2), m.group(3).split()
        if verb == "layer":
            layers[key] = set(rest)
        elif verb == "public":
            public[key] = rest[0]
        elif verb == "define":
            defines[key] = set(rest)
        elif verb == "export":
            exports[key] = set(rest)
        elif verb == "only":
            only[key] = set(rest)
        else:
            excepts.add((key, rest[0]))
    return layers, public, exports, excepts, defines, only


def folder_of(root, path):
    """The layer folder a source file is in: src/<room> (src/store/file),
    include, or the top-level program folder."""
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if parts[0] == "src":
        d = os.path.dirname(rel)[len("src/"):]
        return d
    if parts[0] == "include":
        return "include"
    return parts[0]


def resolve(root, path, inc):
    """(kind, target): ('public', header) or ('private', (folder, header))
    or ('unknown', inc)."""
    here = os.path.dirname(path)
    if inc.startswith("progcache/"):
        return "public", inc[len("progcache/"):]
    rel = os.path.relpath(path, root)
    if rel.startswith("include" + os.sep):
        # A public header includes its neighbours by relative name.
        name = os.path.normpath(os.path.join(os.path.relpath(here, os.path.join(root, "include",
                                                                                 "progcache")), inc))
        return "public", name
    if os.path.exists(os.path.join(here, inc)):
        target = os.path.normpath(os.path.join(here, inc))
    elif os.path.exists(os.path.join(root, "src", inc)):
        target = os.path.join(root, "src", inc)
    elif os.path.exists(os.path.join(root, "src", "util", inc)):
        target = os.path.join(root, "src", "util", inc)
    else:
        return "unknown", inc
    return "private", (folder_of(root, target), os.path.basename(target))


def check(root, table):
    layers, public, exports, excepts = table[:4]
    problems = []
    # The table names what exists.
    for folder in list(layers) + list(exports):
        if folder not in ("tools", "samples", "examples", "helper", "include") and \
                not os.path.isdir(os.path.join(root, "src", folder)):
            problems.append("tests/layers.txt: folder %s does not exist" % folder)
    for header in public:
        if not os.path.isfile(os.path.join(root, "include", "progcache", header)):
            problems.append("tests/layers.txt: public header %s does not exist" % header)
    for folder, rooms in table[5].items() if len(table) > 5 else ():
        for room in rooms | {folder}:
            if room not in layers:
                problems.append("tests/layers.txt: only %s: %s is in no layer" % (folder, room))
    for folder, names in exports.items():
        for name in names - {"*"}:
            if not os.path.isfile(os.path.join(root, "src", folder, name)):
                problems.append("tests/layers.txt: export %s/%s does not exist" % (folder, name))
    seen = set()
    used = set()  # (folder, header) of exports another room includes
    for tree in TREES:
        for d, _, files in os.walk(os.path.join(root, tree)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                folder = folder_of(root, path)
                if folder not in layers and folder != "include":
                    problems.append("%s: folder %s is in no layer of tests/layers.txt"
                                    % (rel, folder))
                    continue
                text = open(path, encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count("\n", 0, m.start()) + 1
                    why = judge(root, path, rel, folder, inc, table)
                    kind, target = resolve(root, path, inc)
                    if kind == "private" and target[0] != folder:
                        used.add(target)
                    key = (rel, os.path.basename(inc))
                    if why and key in excepts:
                        seen.add(key)
                        continue
                    if why:
                        problems.append("%s:%d: #include \"%s\": %s" % (rel, line, inc, why))
    for folder, names in sorted(exports.items()):
        for name in sorted(names - {"*"}):
            if (folder, name) not in used:
                problems.append("tests/layers.txt: export %s/%s: no other room includes it; "
                                "remove it" % (folder, name))
    for key in sorted(excepts - seen):
        problems.append("tests/layers.txt: except %s: %s is not needed any more: remove it"
                        % key)
    return problems


def judge(root, path, rel, folder, inc, table):
    layers, public, exports = table[:3]
    kind, target = resolve(root, path, inc)
    if kind == "unknown":
        return "resolves to no file of the tree"
    if kind == "public":
        layer = public.get(target)
        if layer is None:
            return "public header %s is in no layer of tests/layers.txt" % target
        mine = public.get(os.path.relpath(rel, "include/progcache")) if folder == "include" \
            else folder
        allowed = layers.get(mine, set())
        if layer == mine or layer in allowed or "public" in allowed:
            return None
        return "%s (layer %s) points up from %s" % (target, layer, mine)
    tfolder, name = target
    if tfolder == folder:
        return None
    if folder == "include":
        return "a public header includes a private one (%s/%s)" % (tfolder, name)
    allowed = layers.get(folder, set())
    if tfolder not in allowed:
        return "%s/ is not below %s/ (tests/layers.txt)" % (tfolder, folder)
    names = exports.get(tfolder, set())
    if "*" not in names and name not in names:
        return ("%s is private to %s/: use its internal interface (%s)"
                % (name, tfolder, ", ".join(sorted(names)) or "none"))
    only = table[5].get(tfolder) if len(table) > 5 else None
    if only is not None and folder not in only:
        return ("%s/'s internal interface is for %s/ only: %s/ reaches it through theirs"
                % (tfolder, "/, ".join(sorted(only)), folder))
    return None


def self_test(table):
    """A planted violation is caught: util/ including cache/cache.h."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="layers-") as tmp:
        for d in ("src/util", "src/cache", "include/progcache"):
            os.makedirs(os.path.join(tmp, d))
        open(os.path.join(tmp, "src/cache/cache.h"), "w").write("")
        open(os.path.join(tmp, "src/util/bad.c"), "w").write('#include "cache/cache.h"\n')
        layers, public, exports = table[:3]
        os.makedirs(os.path.join(tmp, "src/cuda"))
        open(os.path.join(tmp, "src/util/util_in.h"), "w").write("")
        open(os.path.join(tmp, "src/cuda/bad2.c"), "w").write('#include "util/util_in.h"\n')
        small = ({"util": set(), "cache": {"util"}, "cuda": {"util", "cache"}}, {},
                 {"util": {"*"}, "cache": set()}, set(), {}, {"util": {"cache"}})
        found = check(tmp, small)
        return any("src/util/bad.c:1" in p and "not below" in p for p in found) and \
            any("src/cuda/bad2.c:1" in p and "only" in p for p in found)


def check_map(root):
    """docs/ARCHITECTURE.md names every source file of the library, the
    helper and the tool, every folder of src/ and every folder of tests/:
    the map cannot leave a room or a file out. No two files of src/,
    helper/ and tools/ share a name, and no file is over MAX_LINES."""
    doc = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    problems = []
    for top in ("src", "helper", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            rel_dir = os.path.relpath(dirpath, root)
            if top == "src" and rel_dir != "src" and "`%s/`" % rel_dir not in doc:
                problems.append("docs/ARCHITECTURE.md: no row for the folder %s/" % rel_dir)
            for f in sorted(files):
                if f.endswith(".c") and f not in doc:
                    problems.append("docs/ARCHITECTURE.md does not name %s/%s" % (rel_dir, f))
    # One name, one file: `#include "warm.h"` must not find the right
    # file only by the order of -I.
    names = {}
    for top in ("src", "helper", "tools", "include"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(SOURCES):
                    names.setdefault(f, []).append(os.path.relpath(os.path.join(dirpath, f), root))
    for f, paths in sorted(names.items()):
        # The public headers' names are the API (store.h, sys/store.h).
        if len(paths) > 1 and not all(p.startswith("include" + os.sep) for p in paths):
            problems.append("two files named %s: %s (rename one)" % (f, ", ".join(sorted(paths))))
    problems += check_sizes(root)
    tests = os.path.join(root, "tests")
    for d in sorted(os.listdir(tests)):
        if os.path.isdir(os.path.join(tests, d)) and "`tests/%s/`" % d not in doc:
            problems.append("docs/ARCHITECTURE.md does not name the test folder tests/%s/" % d)
    return problems


MAX_LINES = 600
SIZED = (".c", ".h", ".py", ".sh", ".cmake", ".txt", ".map")


def check_sizes(root):
    """Small files (STYLE.md): no source, test, bench or script file over
    MAX_LINES lines."""
    problems = []
    for top in ("src", "include", "helper", "tools", "tests", "bench", "python", "samples",
                "examples", "scripts", "cmake"):
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d not in ("build", "__pycache__") and
                       not d.startswith(".")]
            for f in files:
                if not f.endswith(SIZED):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, "rb") as fh:
                    n = fh.read().count(b"\n")
                if n > MAX_LINES:
                    problems.append("%s has %d lines, over %d (split it by concept)"
                                    % (os.path.relpath(path, root), n, MAX_LINES))
    return problems


def main():
    args = sys.argv[1:]
    build = None
    if "--build" in args:
        i = args.index("--build")
        build = args[i + 1]
        del args[i:i + 2]
    root = args[0] if args else "."
    table_path = args[1] if len(args) > 1 else os.path.join(root, "tests", "layers.txt")
    table = load_table(table_path)
    if not self_test(table) or not layer_symbols.self_test():
        print("FAIL: the layer test did not catch a planted violation")
        return 1
    problems = check(root, table)
    if build:
        problems += layer_symbols.check_objects(root, build, table, TREES, folder_of)
    missing = check_map(root)
    for p in missing:
        print(p)
    if missing:
        print("FAIL: %d file(s) or folder(s) missing from docs/ARCHITECTURE.md, named twice "
              "or too long"
              % len(missing))
        return 1
    for p in problems:
        print(p)
    if problems:
        print("FAIL: %d include(s) or call(s) against the layers (tests/layers.txt, "
              "docs/ARCHITECTURE.md)"
              % len(problems))
        return 1
    print("layers: every include%s points down (tests/layers.txt)"
          % (" and every call" if build else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
