#!/usr/bin/env python3
"""The progcache command used as a hostile or careless user would
(issue 12, items 3, 8, 9 and 11):

- outputs that are not regular files (devices, FIFOs, directories, links)
  are written in place or refused, never replaced; '-' is standard output
  for export and standard input for import;
- every input is read with a bound (--max-artifact-size), in bounded
  memory: /dev/zero, huge files, oversized archive members;
- a subcommand whose standard output cannot be written exits non-zero
  and says so;
- --json output is valid JSON carrying "schema": 1, whatever bytes the
  paths hold, and paths round-trip through os.fsencode.

Never touches the machine's /dev/full or /dev/null in a way an old,
broken build could damage: device nodes that a regression might replace
are private ones made with mknod (root only; skipped otherwise).

Environment: PROGCACHE_BIN (the progcache tool)."""

import io
import json
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check, entry_files as entries  # noqa: E402

BIN = pt.BIN
# A guard against hangs only (a test that needs it has failed); nothing
# here asserts how long anything takes.
GUARD_S = 120

KERNEL = 'extern "C" __global__ void scale(float *a, float s) { a[threadIdx.x] *= s; }\n'
PTX = b"//\n.version 8.0\n.target sm_90\n.address_size 64\n"


def env():
    return pt.tool_env(drop=("PROGCACHE_DIR", "PROGCACHE_REMOTE"))


def run(args, stdin=None, stdout=subprocess.PIPE, input=None, preexec_fn=None):
    """Run progcache; stdout bytes (or None), stderr text."""
    try:
        p = subprocess.run([BIN] + list(args), stdin=stdin, stdout=stdout,
                           stderr=subprocess.PIPE, input=input, env=env(),
                           preexec_fn=preexec_fn, timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        return -1, b"", "(hung: killed after %d s)" % GUARD_S
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def kind(path):
    st = os.lstat(path)
    for name, test in (("link", stat.S_ISLNK), ("chr", stat.S_ISCHR), ("fifo", stat.S_ISFIFO),
                       ("dir", stat.S_ISDIR), ("reg", stat.S_ISREG), ("sock", stat.S_ISSOCK),
                       ("blk", stat.S_ISBLK)):
        if test(st.st_mode):
            return name
    return "?"


def make_cache(path, n=3):
    for i in range(n):
        blob = path + ".blob" if isinstance(path, str) else path + b".blob"
        with open(blob, "wb") as f:
            f.write(PTX + b"// %d\n" % i)
        rc, _, err = run(["put", "%02x" % (i + 1) * 32, blob, "--dir", path])
        check(rc == 0, "put into the test cache", err)
        os.unlink(blob)


def private_node(path, minor):
    """A character device node with the given mem minor (3 null, 7 full),
    or None where mknod is not allowed."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        return path
    except OSError:
        return None


def tar_names(data):
    """The member names of a tar archive, or None when data is not one."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            return sorted(m.name for m in t.getmembers())
    except tarfile.TarError:
        return None


# ---- item 3: outputs that are not regular files ----------------------------------

def test_export_targets(tmp):
    cache = os.path.join(tmp, "cache")
    make_cache(cache)
    want = sorted("entries/%s/%s" % (n[:2], n[2:]) for n in entries(cache))

    full = private_node(os.path.join(tmp, "full"), 7)
    if full:
        rc, out, err = run(["export", "--dir", cache, full])
        check(rc == 3 and "No space left on device" in err and full in err,
              "export to a full device: exit 3 naming it and the cause", err)
        check(kind(full) == "chr", "export leaves the device node a device", kind(full))
    elif os.geteuid() != 0:
        # Not root: nothing can replace /dev/full, so the real one is safe.
        rc, out, err = run(["export", "--dir", cache, "/dev/full"])
        check(rc == 3 and "No space left on device" in err, "export to /dev/full: exit 3", err)
        check(kind("/dev/full") == "chr", "/dev/full is still a device")
    # Through a link, the real devices are safe with any build: the link
    # is what an old build replaced.
    to_full = os.path.join(tmp, "to-full")
    os.symlink("/dev/full", to_full)
    rc, _, err = run(["export", "--dir", cache, to_full])
    check(rc == 3 and "No space left on device" in err, "export to a link to /dev/full fails", err)
    check(kind(to_full) == "link" and kind("/dev/full") == "chr", "the link stays a link")
    to_null = os.path.join(tmp, "to-null")
    os.symlink("/dev/null", to_null)
    rc, out, err = run(["export", "--dir", cache, to_null])
    check(rc == 0 and b"exported 3 entries" in out, "export to a link to /dev/null", err)
    check(kind(to_null) == "link", "the /dev/null link stays a link")
    for link in (to_full, to_null):  # by name, before any clean-up could follow them
        os.unlink(link)

    # A FIFO with a reader: the archive streams through it.
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    got = os.path.join(tmp, "from-fifo.tar")
    reader = subprocess.Popen(["sh", "-c", 'cat "$1" > "$2"', "sh", fifo, got])
    # The reader must have the FIFO open before export looks (export does not
    # wait for one): open our own writer end first, which blocks until cat
    # has opened it for reading, and keep it open while export writes.
    keep = os.open(fifo, os.O_WRONLY)
    rc, out, err = run(["export", "--dir", cache, fifo])
    os.close(keep)
    reader.wait(timeout=GUARD_S)
    check(rc == 0 and b"exported 3 entries" in out, "export to a FIFO with a reader", err)
    with open(got, "rb") as f:
        check(tar_names(f.read()) == want, "the FIFO carried a whole archive")
    check(kind(fifo) == "fifo", "the FIFO is still a FIFO")
    # Nobody reading: refused at once, not waited on.
    rc, _, err = run(["export", "--dir", cache, fifo])
    check(rc == 3 and "nothing is reading" in err, "export to a FIFO without reader: refused", err)
    check(kind(fifo) == "fifo", "the unread FIFO is still a FIFO")

    # A directory, a socket, a dangling link: refused, left as they are.
    d = os.path.join(tmp, "dir")
    os.mkdir(d)
    rc, _, err = run(["export", "--dir", cache, d])
    check(rc == 3 and "directory" in err and kind(d) == "dir" and os.listdir(d) == [],
          "export to a directory: refused", err)
    sock_path = os.path.join(tmp, "sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock_path)
    rc, _, err = run(["export", "--dir", cache, sock_path])
    check(rc == 3 and "socket" in err and kind(sock_path) == "sock", "export to a socket: refused", err)
    s.close()
    dangling = os.path.join(tmp, "dangling")
    os.symlink(os.path.join(tmp, "nowhere"), dangling)
    rc, _, err = run(["export", "--dir", cache, dangling])
    check(rc == 3 and "symbolic link" in err and not os.path.exists(os.path.join(tmp, "nowhere")),
          "export to a dangling link: refused, nothing created", err)

    # '-': the archive on standard output, the report on standard error.
    rc, out, err = run(["export", "--dir", cache, "-"])
    check(rc == 0 and tar_names(out) == want, "export - writes a valid tar to stdout", err)
    check("exported 3 entries" in err and "standard output" in err, "export -: report on stderr", err)

    # import -: from a pipe and from a redirected file.
    into = os.path.join(tmp, "into")
    rc, out, err = run(["import", "--dir", into, "-"], input=out)
    check(rc == 0 and b"imported 3 entries" in out and entries(into) == entries(cache),
          "import - reads a tar from a pipe", err)
    archive = os.path.join(tmp, "a.tar")
    check(run(["export", "--dir", cache, archive])[0] == 0, "export to a file")
    into2 = os.path.join(tmp, "into2")
    with open(archive, "rb") as f:
        rc, out, err = run(["import", "--dir", into2, "-"], stdin=f)
    check(rc == 0 and entries(into2) == entries(cache), "import - from a redirected file", err)
    with open(archive, "rb") as f:
        data = f.read()
    into3 = os.path.join(tmp, "into3")
    rc, out, err = run(["import", "--dir", into3, "-"], input=data[:700])
    check(rc == 3 and "standard input" in err and entries(into3) == {},
          "import - of a cut archive: refused, nothing imported", err)


def test_get_targets(tmp):
    cache = os.path.join(tmp, "cache")
    make_cache(cache, 1)
    key = "01" * 32
    rc, _, err = run(["get", key, "--dir", cache, "-o", "/dev/null"])
    check(rc == 0 and kind("/dev/null") == "chr", "get -o /dev/null", err)
    full = private_node(os.path.join(tmp, "full"), 7)
    if full:
        rc, _, err = run(["get", key, "--dir", cache, "-o", full])
        check(rc == 3 and "No space left on device" in err and kind(full) == "chr",
              "get -o a full device: exit 3, still a device", err)
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    rc, _, err = run(["get", key, "--dir", cache, "-o", fifo])
    check(rc == 3 and "nothing is reading" in err and kind(fifo) == "fifo",
          "get -o a FIFO without reader: refused, not waited on", err)
    d = os.path.join(tmp, "d")
    os.mkdir(d)
    rc, _, err = run(["get", key, "--dir", cache, "-o", d])
    check(rc == 3 and "directory" in err and kind(d) == "dir", "get -o a directory: refused", err)
    # A link to a regular file: the file gets the bytes, the link stays.
    real, link = os.path.join(tmp, "real"), os.path.join(tmp, "link")
    with open(real, "wb") as f:
        f.write(b"old")
    os.chmod(real, 0o640)
    os.symlink(real, link)
    rc, _, err = run(["get", key, "--dir", cache, "-o", link])
    with open(real, "rb") as f:
        check(rc == 0 and f.read() == list(entries(cache).values())[0] and kind(link) == "link",
              "get -o a link: target written, link kept", err)
    check(stat.S_IMODE(os.stat(real).st_mode) == 0o640, "get -o keeps the file's mode")
    # A miss leaves an existing file alone; no temp file is left behind.
    rc, _, _ = run(["get", "ee" * 32, "--dir", cache, "-o", real])
    check(rc == 1 and os.path.getsize(real) > 3, "a miss leaves -o FILE as it was")
    check(not [n for n in os.listdir(tmp) if "progcache" in n], "no temporary files left",
          os.listdir(tmp))
    # put reads a FIFO as a pipe: with a writer, it works.
    writer = subprocess.Popen(["sh", "-c", 'printf "%s" "$2" > "$1"', "sh", fifo, PTX.decode()])
    rc, _, err = run(["put", "aa" * 32, fifo, "--dir", cache])
    writer.wait(timeout=GUARD_S)
    rc2, out, _ = run(["get", "aa" * 32, "--dir", cache])
    check(rc == 0 and rc2 == 0 and out == PTX, "put from a FIFO with a writer", err)


# ---- item 8: every input bounded -----------------------------------------------------

def limited_memory():
    # 256 MiB of address space: enough for the tool (with NVRTC mapped),
    # far too little for an unbounded read of /dev/zero.
    resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))


def test_bounds(tmp):
    cache = os.path.join(tmp, "cache")
    os.makedirs(cache)
    limit = limited_memory if run(["--version"], preexec_fn=limited_memory)[0] == 0 else None
    check(limit is not None, "the tool runs with 256 MiB of address space")

    rc, _, err = run(["put", "ab" * 32, "/dev/zero", "--dir", cache, "--max-artifact-size", "16M"],
                     preexec_fn=limit)
    check(rc == 3 and '"/dev/zero"' in err and "more than 16777216 bytes" in err
          and "--max-artifact-size" in err, "put /dev/zero: exit 3, bounded, named", err)
    with open("/dev/zero", "rb") as zero:
        rc, _, err = run(["put", "ab" * 32, "-", "--dir", cache, "--max-artifact-size", "16M"],
                         stdin=zero, preexec_fn=limit)
    check(rc == 3 and "standard input" in err and "more than 16777216 bytes" in err,
          "put - < /dev/zero: exit 3", err)
    check(entries(cache) == {}, "nothing stored from /dev/zero")
    big = os.path.join(tmp, "big.bin")
    with open(big, "wb") as f:
        f.truncate(2 << 20)
    rc, _, err = run(["put", "ab" * 32, big, "--dir", cache, "--max-artifact-size", "1M"])
    check(rc == 3 and "2.0 MiB (2097152 bytes)" in err and "1.0 MiB (1048576 bytes)" in err,
          "put of a file over the bound: its size and the bound", err)
    rc, _, err = run(["put", "ab" * 32, big, "--dir", cache, "--max-artifact-size", "3M"])
    check(rc == 0, "put under a raised bound", err)
    for bad in ("0", "lots", "-1", "1Q"):
        rc, _, err = run(["put", "ab" * 32, big, "--dir", cache, "--max-artifact-size", bad])
        check(rc == 2 and "--max-artifact-size" in err, "--max-artifact-size %s: exit 2" % bad, err)

    rc, _, err = run(["key", "/dev/zero", "--max-artifact-size", "1M", "--", "-arch=sm_90"],
                     preexec_fn=limit)
    check(rc == 3 and "source file" in err and "more than 1048576 bytes" in err,
          "key /dev/zero: bounded", err)
    fifo = os.path.join(tmp, "header.fifo")
    os.mkfifo(fifo)
    src = os.path.join(tmp, "k.cu")
    with open(src, "w") as f:
        f.write(KERNEL)
    rc, _, err = run(["key", src, "--digest-file", fifo, "--", "-arch=sm_90"])
    check(rc == 3 and "not a regular file" in err, "key --digest-file FIFO: refused, not waited on", err)
    rc, _, err = run(["key", src, "--header", "h.h=" + fifo, "--", "-arch=sm_90"])
    check(rc == 3 and "not a regular file" in err, "key --header NAME=FIFO: refused, not waited on", err)
    with open(src, "w") as f:
        f.write('#include "h.h"\n' + KERNEL)
    rc, _, err = run(["key", src, "--", "-arch=sm_90", "-I" + tmp, "--pre-include=header.fifo"])
    check(rc == 2 and "not a regular file" in err, "key: a FIFO where a header is: refused", err)

    with open("/dev/zero", "rb") as zero:
        rc, _, err = run(["warm", "--dir", cache, "--max-artifact-size", "1M", "-"], stdin=zero,
                         preexec_fn=limit)
    check(rc == 3 and "manifest" in err and "more than 1048576 bytes" in err,
          "warm - < /dev/zero: the manifest is bounded", err)
    manifest = os.path.join(tmp, "m.txt")
    with open(manifest, "w") as f:
        f.write("/dev/zero\n")
    rc, _, err = run(["warm", "--dir", cache, "--max-artifact-size", "1M", manifest],
                     preexec_fn=limit)
    check(rc == 3 and "m.txt:1" in err and "more than 1048576 bytes" in err,
          "warm: a source is bounded, its line named", err)

    # import: a member over the bound is refused from its header, from a file
    # and from standard input; nothing is imported.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("entries/ab/" + "0" * 62)
        info.size = 2 << 20
        t.addfile(info, io.BytesIO(b"/" * info.size))
    archive = os.path.join(tmp, "big.tar")
    with open(archive, "wb") as f:
        f.write(buf.getvalue())
    into = os.path.join(tmp, "into")
    rc, out, err = run(["import", "--dir", into, "--max-artifact-size", "1M", archive])
    check(rc == 3 and "maximum artifact size" in err and "2097152 bytes" in err,
          "import: a member over the bound is refused", err)
    rc, out, err = run(["import", "--dir", into, "--max-artifact-size", "1M", "-"],
                       input=buf.getvalue())
    check(rc == 3 and "maximum artifact size" in err, "import -: a member over the bound", err)
    check(entries(into) == {}, "import over the bound: nothing imported")
    rc, out, err = run(["import", "--dir", into, "--max-artifact-size", "4M", archive])
    check(rc == 0 and len(entries(into)) == 1, "import under a raised bound", err)


# ---- item 9: standard output that cannot be written ---------------------------------

def test_stdout_full(tmp):
    cache = os.path.join(tmp, "cache")
    make_cache(cache, 2)
    src = os.path.join(tmp, "k.cu")
    with open(src, "w") as f:
        f.write(KERNEL)
    manifest = os.path.join(tmp, "m.txt")
    with open(manifest, "w") as f:
        f.write("k.cu\n")
    commands = [
        ["stats", "--dir", cache], ["stats", "--dir", cache, "--json"],
        ["stats", "--dir", cache, "--zero"], ["ls", "--dir", cache], ["ls", "--dir", cache, "--json"],
        ["verify", "--dir", cache], ["verify", "--dir", cache, "--json"],
        ["get", "01" * 32, "--dir", cache], ["get", "01" * 32, "--dir", cache, "-o", "-"],
        ["export", "--dir", cache, os.path.join(tmp, "x.tar")],
        ["import", "--dir", os.path.join(tmp, "other"), os.path.join(tmp, "x.tar")],
        ["key", src, "--", "-arch=sm_90"],
        ["warm", "--arch", "sm_90", "--dir", cache, manifest],
        ["warm", "--arch", "sm_90", "--dir", cache, "--json", manifest],
        ["prune", "--dir", cache, "--older-than", "9w"],
        ["prune", "--dir", cache, "--older-than", "9w", "--json"],
        ["clear", "--dir", cache],
        ["config", "--dir", cache], ["config", "--list-settings"], ["config", "--help"],
        ["--version"], ["--help"], ["ls", "--help"],
    ]
    for args in commands:
        with open("/dev/full", "wb") as full:
            rc, _, err = run(args, stdout=full)
        name = args[0] if not args[0].startswith("--") else None
        want = "progcache%s: cannot write standard output: No space left on device" % (
            " " + name if name else "")
        label = " ".join(a for a in args if not a.startswith(tmp) and a != cache)
        check(rc == 3 and want in err, "%s > /dev/full: exit 3 and says so" % label, err)
    # export -: the archive itself is standard output.
    make_cache(cache, 1)
    with open("/dev/full", "wb") as full:
        rc, _, err = run(["export", "--dir", cache, "-"], stdout=full)
    check(rc == 3 and "standard output" in err and "No space left on device" in err,
          "export - > /dev/full: exit 3", err)
    # A usage error keeps its status 2.
    with open("/dev/full", "wb") as full:
        rc, _, err = run(["ls", "--dir", cache, "--bogus"], stdout=full)
    check(rc == 2, "a usage error stays exit 2", err)
    # A closed standard output is an error too.
    rc, _, err = run(["ls", "--dir", cache], stdout=None, preexec_fn=lambda: os.close(1))
    check(rc == 3 and "cannot write standard output" in err, "ls >&-: exit 3", err)


# ---- item 11: JSON with any path bytes ------------------------------------------------

def load_json(out, what):
    try:
        text = out.decode("utf-8")  # strict: no raw invalid bytes
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        check(False, what + ": valid UTF-8 JSON", "%s: %r" % (e, out[:300]))
        return {}
    if not isinstance(obj, dict):
        check(False, what + ": one JSON object", repr(obj)[:300])
        return {}
    check(obj.get("schema") == 1, what + ': "schema": 1', obj)
    return obj


def test_json_paths(tmp):
    # é (valid), a lone 0xff, 0xc3 0x28 (a lead byte without continuation),
    # an overlong '/' (c0 af), a UTF-16 surrogate (ed a0 80), a code point
    # above U+10FFFF (f4 90 80 80), a quote, a backslash and a control byte.
    base = os.fsencode(tmp) + b"/caf\xc3\xa9-\xff-\xc3\x28-\xc0\xaf-\xed\xa0\x80-\xf4\x90\x80\x80-\"\\\x01"
    cache = base + b"-cache"
    make_cache(cache, 2)

    def dir_ok(obj, what):
        check("dir" in obj and os.fsencode(obj["dir"]) == cache, what + ": dir round-trips",
              repr(obj.get("dir")))

    for args in (["stats"], ["ls"], ["verify"], ["prune", "--older-than", "9w"]):
        rc, out, err = run(args + ["--dir", cache, "--json"])
        check(rc == 0, " ".join(args) + " --json on a non-UTF-8 path", err)
        dir_ok(load_json(out, args[0] + " --json"), args[0])
    rc, out, err = run(["stats", "--dir", cache, "--json", "--zero"])
    dir_ok(load_json(out, "stats --zero --json"), "stats --zero")
    ls = load_json(run(["ls", "--dir", cache, "--json"])[1], "ls --json")
    check(len(ls.get("entries", [])) == 2 and all(len(e["name"]) == 64 for e in ls["entries"]),
          "ls --json: entries", ls)
    # A bad entry: verify names it in JSON too.
    name = sorted(entries(cache))[0]
    with open(os.path.join(cache, b"entries", name[:2], name[2:]), "r+b") as f:
        f.write(b"\xff\xfe garbage")
    rc, out, _ = run(["verify", "--dir", cache, "--json"])
    v = load_json(out, "verify --json with a problem")
    check(rc == 1 and len(v.get("problems", [])) == 1, "verify --json lists the problem", v)

    # warm: the source as written in the manifest, any bytes.
    src = base + b"-k.cu"
    with open(src, "w") as f:
        f.write(KERNEL)
    manifest = base + b"-m.txt"
    with open(manifest, "wb") as f:
        f.write(b"'" + os.path.basename(src) + b"' -- -DX=1\n")
    rc, out, err = run(["warm", "--arch", "sm_90", "--dir", cache, "--json", manifest])
    w = load_json(out, "warm --json")
    dir_ok(w, "warm")
    check(rc == 0 and os.fsencode(w["programs"][0]["source"]) == os.path.basename(src),
          "warm --json: the source round-trips", err)

    # The escapes themselves, as documented.
    rc, out, _ = run(["stats", "--dir", cache, "--json"])
    for esc in (b"\\udcff-", b"\\udcc3(", b"\\udcc0\\udcaf", b"\\udced\\udca0\\udc80",
                b"\\udcf4\\udc90\\udc80\\udc80", b"caf\xc3\xa9", b'\\"\\\\\\u0001'):
        check(esc in out, "JSON escape %r" % esc, out)


def main():
    pt.need_bin()
    return pt.run_tests((test_export_targets, test_get_targets, test_bounds, test_stdout_full,
                        test_json_paths), "test_tool_adversarial", "progcache-adversarial-")


if __name__ == "__main__":
    sys.exit(main())
