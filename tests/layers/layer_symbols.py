"""The layer test's second half: the linked objects. An include can arrive
through a chain of public headers that the include check allows (a
function declared in cache.h reaches store/file through sys/store.h ->
stats.h -> cache.h), so the calls themselves are checked too: every
undefined symbol of an object file of the library, the helper and the
programs, when another object of the tree defines it, must be defined in
the object's own room or a room below it (tests/layers.txt). A program
(layer "public") calls only what the shared library exports.

Objects are found in the build tree by CMake's layout,
BUILD/<dir>/CMakeFiles/<target>.dir/<path>.o for the source <dir>/<path>;
an object whose source no longer exists (a file moved since the last
build) is left out."""
import os
import re
import subprocess

OBJECT_DIR = re.compile(r"^(.*?)/?CMakeFiles/([^/]+)\.dir/(.*)\.o$")
# The target whose objects every library user links (src/CMakeLists.txt).
LIBRARY = "progcache_objects"


def objects(root, build, trees, folder_of):
    """[(object path, source relpath, layer folder, target)] of the build tree."""
    found = []
    for d, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            path = os.path.join(d, f)
            m = OBJECT_DIR.match(os.path.relpath(path, build))
            if not m:
                continue
            source = os.path.normpath(os.path.join(m.group(1), m.group(3)))
            if not source.startswith(tuple(t + os.sep for t in trees)):
                continue
            if not os.path.isfile(os.path.join(root, source)):
                continue
            found.append((path, source, folder_of(root, os.path.join(root, source)),
                          m.group(2)))
    return sorted(found, key=lambda o: o[1])


def read_symbols(paths):
    """{object: (defined globals, undefined)} through one nm run."""
    table = {p: (set(), set()) for p in paths}
    if not paths:
        return table
    out = subprocess.run(["nm", "-P", "-A"] + paths, check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        # "path.o: symbol TYPE [value size]"
        head, _, rest = line.partition(": ")
        fields = rest.split()
        if head not in table or len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind in ("U", "w", "v"):
            table[head][1].add(name)
        elif kind.isupper():
            table[head][0].add(name)
    return table


def exported(build):
    """The dynamic symbols libprogcache.so defines, or None without it."""
    for d, _, files in os.walk(build):
        for f in files:
            if re.match(r"^libprogcache\.so\.\d+$", f):
                out = subprocess.run(["nm", "-D", "--defined-only", os.path.join(d, f)],
                                     check=True, capture_output=True, text=True).stdout
                return {line.split()[-1] for line in out.splitlines() if line.split()}
    return None


def judge_calls(objs, symbols, layers, public_api, only=None):
    """Problems: calls that climb, that a program makes past the API, or
    that reach a room's internal functions (progcache__*) from a room its
    "only" line leaves out.
    objs: [(object, source, folder, target)]; symbols: {object: (defined,
    undefined)}. A symbol is looked for among the library's objects and the
    object's own target's (the helper's interposed open is not the
    library's)."""
    definers = {}
    for obj, source, folder, target in objs:
        for name in symbols[obj][0]:
            definers.setdefault((target, name), set()).add((folder, source))
    problems = []
    for obj, source, folder, target in objs:
        allowed = layers.get(folder, set())
        for name in sorted(symbols[obj][1]):
            where = definers.get((target, name), set()) | definers.get((LIBRARY, name), set())
            if not where:
                continue  # libc, libcrypto, hiredis, ...
            if any(f == folder for f, _ in where):
                continue
            if "public" in allowed:
                if public_api is not None and name not in public_api \
                        and any(f not in ("tools", "samples", "examples", "helper")
                                for f, _ in where):
                    problems.append("%s calls %s, which the shared library does not export"
                                    % (source, name))
                continue
            below = sorted(f for f, _ in where if f in allowed)
            if below and only and name.startswith("progcache__") and \
                    all(f in only and folder not in only[f] for f in below):
                problems.append("%s calls %s, internal to %s/: only %s/ may (tests/layers.txt)"
                                % (source, name, below[0], "/, ".join(sorted(only[below[0]]))))
                continue
            if below:
                continue
            f, src = sorted(where)[0]
            problems.append("%s calls %s, defined in %s: %s/ is not below %s/ "
                            "(tests/layers.txt)" % (source, name, src, f, folder))
    return problems


# Things done one way (docs/ARCHITECTURE.md): the library functions only
# these files of src/ call.
ONE_PLACE = {
    # The environment is read in one file. The interceptor's auditor
    # (intercept/audit.c, audit_standin.c) links no library code, so it
    # reads PROGCACHE_LOG, PROGCACHE_INTERCEPT and
    # PROGCACHE_INTERCEPT_STANDIN itself.
    "getenv": {"src/util/config.c", "src/intercept/audit.c", "src/intercept/audit_standin.c"},
    "secure_getenv": {"src/util/config.c"},
}


def judge_one_place(objs, symbols):
    problems = []
    for obj, source, _, _ in objs:
        if not source.startswith("src" + os.sep):
            continue
        for name in sorted(symbols[obj][1] & set(ONE_PLACE)):
            if source not in ONE_PLACE[name]:
                problems.append("%s calls %s, which only %s may (layer_symbols.py)"
                                % (source, name, ", ".join(sorted(ONE_PLACE[name]))))
    return problems


# Rooms whose files call one way among themselves too (a file-level
# order, as pch_tier.h lists it): a cycle of calls between their objects
# fails the test. The other rooms still have such circles (issue 33).
ONE_WAY_ROOMS = {"pch"}


def judge_circles(objs, symbols):
    defined = {}
    for obj, source, folder, target in objs:
        if target == LIBRARY and folder in ONE_WAY_ROOMS:
            for name in symbols[obj][0]:
                defined[name] = source
    calls = {}
    for obj, source, folder, target in objs:
        if target == LIBRARY and folder in ONE_WAY_ROOMS:
            calls[source] = {defined[n] for n in symbols[obj][1]
                             if n in defined and defined[n] != source}
    problems = []
    for start in sorted(calls):
        seen, todo = set(), list(calls[start])
        while todo:
            here = todo.pop()
            if here not in seen:
                seen.add(here)
                todo.extend(calls.get(here, ()))
        if start in seen:
            problems.append("%s calls itself back through other files of its room (a circle; "
                            "the room calls one way: layer_symbols.py ONE_WAY_ROOMS)" % start)
    return problems


def self_test():
    """A planted climb is caught: store/file calling a function of cache/."""
    objs = [("a.o", "src/store/file/a.c", "store/file", LIBRARY),
            ("b.o", "src/cache/b.c", "cache", LIBRARY)]
    symbols = {"a.o": (set(), {"progcache_x", "memcpy"}), "b.o": ({"progcache_x"}, set())}
    layers = {"store/file": {"util"}, "cache": {"store/file", "util"}}
    found = judge_calls(objs, symbols, layers, None)
    # And a room's internal function called past its "only" line.
    objs2 = objs + [("c.o", "src/cuda/c.c", "cuda", LIBRARY)]
    symbols2 = {"a.o": ({"progcache__y"}, set()), "b.o": (set(), {"progcache__y"}),
                "c.o": (set(), {"progcache__y"})}
    layers2 = dict(layers, cuda={"store/file", "cache", "util"})
    found2 = judge_calls(objs2, symbols2, layers2, None, {"store/file": {"cache"}})
    return len(found) == 1 and "src/store/file/a.c calls progcache_x" in found[0] and \
        len(found2) == 1 and "src/cuda/c.c calls progcache__y" in found2[0]


API = re.compile(r"PROGCACHE_API\b[^;{]*?\b(progcache_\w+)\s*\(", re.S)


def judge_homes(root, objs, symbols, public, defines):
    """A public function is defined in the room of its header (tests/layers.txt
    "public"), or in a room a "define" line allows until it is mended."""
    header_of = {}
    for header in public:
        text = open(os.path.join(root, "include", "progcache", header), encoding="utf-8").read()
        for m in API.finditer(text):
            header_of.setdefault(m.group(1), header)
    problems, seen = [], set()
    for obj, source, folder, target in objs:
        if target != LIBRARY:
            continue
        for name in sorted(symbols[obj][0] & set(header_of)):
            header = header_of[name]
            if folder == public[header]:
                continue
            if folder in defines.get(header, set()):
                seen.add((header, folder))
                continue
            problems.append("%s defines %s, declared in progcache/%s of %s/: define it there"
                            % (source, name, header, public[header]))
    for header, folders in sorted(defines.items()):
        for folder in sorted(folders):
            if (header, folder) not in seen:
                problems.append("tests/layers.txt: define %s: %s defines none of its functions "
                                "any more: remove it" % (header, folder))
    return problems


def check_objects(root, build, table, trees, folder_of):
    """Problems of the build tree's objects; one line when it has none."""
    layers, public, defines = table[0], table[1], table[4]
    objs = objects(root, build, trees, folder_of)
    if not any(src.startswith("src" + os.sep) for _, src, _, _ in objs):
        return ["%s: no object of src/ in this build tree (build it first)" % build]
    unknown = sorted({f for _, _, f, _ in objs if f not in layers})
    problems = ["%s: folder is in no layer of tests/layers.txt" % f for f in unknown]
    symbols = read_symbols([o for o, _, _, _ in objs])
    only = table[5] if len(table) > 5 else None
    return (problems + judge_calls(objs, symbols, layers, exported(build), only) +
            judge_one_place(objs, symbols) + judge_homes(root, objs, symbols, public, defines) +
            judge_circles(objs, symbols))
