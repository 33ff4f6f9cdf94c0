#!/usr/bin/env python3
"""Signed bundles through the real binary (issue 23, item 4): export --sign
writes a manifest and an Ed25519 signature; import --verify takes exactly
that archive and refuses, before writing anything, an unsigned one, another
key's, and one changed in any way (a member's bytes, a member added,
removed, renamed or appended, bytes after the end-of-archive blocks, the
manifest or the signature edited), from a file and from standard input;
zero padding after the end blocks is accepted; bad keys are clear errors.

Environment: PROGCACHE_BIN (the progcache tool)."""

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check, entry_files, run  # noqa: E402

BIN = pt.BIN

KERNELS = pt.KERNELS


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def members(path):
    with tarfile.open(path, "r:") as t:
        return [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]


def rebuild(src, dst, edit):
    """The members of src, edited by edit(list), written anew as a ustar
    archive (the signature members are carried over as they are)."""
    ms = edit(members(src))
    with tarfile.open(dst, "w:", format=tarfile.USTAR_FORMAT) as t:
        for m, data in ms:
            m.size = len(data) if data is not None else 0
            t.addfile(m, io.BytesIO(data) if data is not None else None)


def refused(tmp, archive, pub, what, label, stdin=False):
    target = os.path.join(tmp, "refused-" + label)
    if stdin:
        with open(archive, "rb") as f:
            rc, out, err = run(["import", "--dir", target, "--verify", pub, "-"], stdin=f.read())
    else:
        rc, out, err = run(["import", "--dir", target, "--verify", pub, archive])
    check(rc == 3 and "refused (nothing imported)" in err and what in err,
          "import --verify refuses %s (exit 3, says '%s')" % (label, what), (rc, out, err))
    # Nothing written: from a file, not even the cache directory; from a
    # stream (read once, so the cache holds its copy) no entry.
    if stdin:
        check(entry_files(target) == {}, "refused %s from stdin: no entry written" % label)
    else:
        check(not os.path.exists(target), "refused %s: the cache was not even created" % label)


def make_cache(tmp):
    manifest = pt.write_programs(os.path.join(tmp, "src"), KERNELS,
                                "a.cu\na.cu --target ptx\nt.cu --name-expression 'fill<float>'\n")
    cache = os.path.join(tmp, "farm")
    rc, out, err = run(["warm", "--arch", "sm_90", manifest, "--dir", cache])
    return cache if rc == 0 else None


def test_sign_verify(tmp, cache, keys):
    key, pub, key2, pub2 = keys
    bundle = os.path.join(tmp, "bundle.tar")
    rc, out, err = run(["export", "--dir", cache, "--sign", key, bundle])
    check(rc == 0 and "exported 3 entries" in out, "export --sign exit 0", out + err)
    ms = members(bundle)
    names = [m.name for m, _ in ms]
    check(names[-2:] == ["progcache-bundle/manifest", "progcache-bundle/signature"],
          "the manifest and signature are the last two members", names)
    check(len(ms[-1][1]) == 64, "the signature is 64 bytes (Ed25519)")
    text = ms[-2][1].decode()
    lines = text.splitlines()
    check(lines[0] == "progcache-bundle 1" and lines[-1] == "end 3", "manifest head and end", text)
    check(any(l.startswith("nvrtc ") and l != "nvrtc unknown" for l in lines), "manifest: NVRTC", text)
    files = entry_files(cache)
    listed = {}
    for l in lines:
        w = l.split()
        if w[0] == "entry":
            listed[w[1]] = w
    check(set(listed) == set(files), "manifest lists every entry", (listed.keys(), files.keys()))
    for name, data in files.items():
        w = listed.get(name, [""] * 7)
        check(w[2] == str(len(data)) and w[3] == hashlib.sha256(data).hexdigest(),
              "manifest: size and SHA-256 of " + name, w)
        check(w[5] in ("CUBIN", "PTX") and w[6] == "sm_90", "manifest: kind and arch", w)
    check(any(l.startswith("lowered ") and "fill%3Cfloat%3E" not in l and "fill<float>" in l
              for l in lines), "manifest: the lowered name of fill<float>", text)
    signer = hashlib.sha256(subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", pub, "-outform", "DER"], capture_output=True,
        check=True).stdout[-32:]).hexdigest()
    check("signer " + signer in lines, "manifest: signer is SHA-256 of the public key", text)

    # The good case, from a file and from standard input.
    good = os.path.join(tmp, "node")
    rc, out, err = run(["import", "--dir", good, "--verify", pub, bundle])
    check(rc == 0 and "imported 3 entries" in out and "verified: signed by " + signer in out,
          "import --verify of the signed bundle", out + err)
    check(entry_files(good) == files, "the verified import holds the exact entries")
    with open(bundle, "rb") as f:
        rc, out, err = run(["import", "--dir", os.path.join(tmp, "node-stdin"), "--verify", pub,
                            "-"], stdin=f.read())
    check(rc == 0 and "verified" in out, "import --verify from standard input", out + err)
    # Without --verify a signed bundle is an ordinary archive.
    rc, out, err = run(["import", "--dir", os.path.join(tmp, "plain"), bundle])
    check(rc == 0 and "imported 3 entries" in out, "plain import of a signed bundle", out + err)
    check(entry_files(os.path.join(tmp, "plain")) == files, "plain import: the entries")
    check(not os.path.exists(os.path.join(tmp, "plain", "progcache-bundle")),
          "plain import writes no bundle member")

    # Unsigned, another key.
    plain = os.path.join(tmp, "plain.tar")
    check(run(["export", "--dir", cache, plain])[0] == 0, "plain export")
    refused(tmp, plain, pub, "not signed", "an unsigned archive")
    refused(tmp, plain, pub, "not signed", "an unsigned archive (stdin)", stdin=True)
    refused(tmp, bundle, pub2, "signed by another key", "another key's archive")
    return bundle


def test_tamper(tmp, bundle, pub):
    raw = open(bundle, "rb").read()
    all_members = [m for m, _ in members(bundle)]
    first = [m for m in all_members if m.name.startswith("entries/")][0]
    nvrtc = [m for m in all_members if m.name == "progcache/nvrtc"]

    def write(name, data):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    # A member's bytes: one bit of the first entry's data.
    data_at = first.offset_data
    flipped = bytearray(raw)
    flipped[data_at + 100] ^= 1
    path = write("bytes.tar", flipped)
    refused(tmp, path, pub, "changed after it was signed", "a changed byte")
    refused(tmp, path, pub, "changed after it was signed", "a changed byte (stdin)", stdin=True)
    # The NVRTC records travel signed too: one changed digit of a version.
    if nvrtc:
        rec = bytearray(raw)
        at = nvrtc[0].offset_data + bytes(raw[nvrtc[0].offset_data:]).index(b"13.") + 3
        rec[at] = ord("9") if rec[at] != ord("9") else ord("8")
        refused(tmp, write("nvrtc.tar", rec), pub, "changed after it was signed",
                "a changed NVRTC record")
    # A header field (the entry's mtime) with its checksum fixed.
    hdr = bytearray(raw)
    hdr[first.offset + 136:first.offset + 148] = b"%011o\0" % 12345
    hdr[first.offset + 148:first.offset + 156] = b" " * 8
    hdr[first.offset + 148:first.offset + 155] = b"%06o\0" % sum(hdr[first.offset:first.offset + 512])
    refused(tmp, write("header.tar", hdr), pub, "changed after it was signed", "a changed header")

    def renamed(ms):
        m = [m for m, _ in ms if m.name.startswith("entries/")][0]
        m.name = m.name[:-1] + ("0" if m.name[-1] != "0" else "1")
        return ms

    def removed(ms):
        return ms[1:]

    def added(ms):
        extra = tarfile.TarInfo("entries/ff/" + "e" * 62)
        return [(extra, ms[0][1])] + ms

    def appended(ms):
        extra = tarfile.TarInfo("entries/ff/" + "e" * 62)
        return ms + [(extra, ms[0][1])]

    def between(ms):
        extra = tarfile.TarInfo("entries/ff/" + "e" * 62)
        return ms[:-1] + [(extra, ms[0][1])] + ms[-1:]

    def manifest_edited(ms):
        m, data = ms[-2]
        ms[-2] = (m, data.replace(b"sm_90", b"sm_80", 1))
        return ms

    def manifest_grown(ms):
        m, data = ms[-2]
        ms[-2] = (m, data + b"lowered x y z\n")
        return ms

    def signature_edited(ms):
        m, data = ms[-1]
        ms[-1] = (m, bytes([data[0] ^ 1]) + data[1:])
        return ms

    def no_signature(ms):
        return ms[:-1]

    def two_manifests(ms):
        return ms[:-2] + [ms[-2]] + ms[-2:]

    for label, edit, what in (
            ("a renamed member", renamed, "changed after it was signed"),
            ("a removed member", removed, "changed after it was signed"),
            ("an added member", added, "changed after it was signed"),
            ("a member after the signature", appended, "must be its last two"),
            ("a member between manifest and signature", between, "must be its last two"),
            ("an edited manifest", manifest_edited, "does not verify"),
            ("a grown manifest", manifest_grown, "does not verify"),
            ("an edited signature", signature_edited, "does not verify"),
            ("a missing signature", no_signature, "no signature"),
            ("a manifest twice", two_manifests, "appears twice")):
        path = os.path.join(tmp, label.replace(" ", "-") + ".tar")
        rebuild(bundle, path, edit)
        refused(tmp, path, pub, what, label)
    # The rebuild itself (same members, new bytes from Python's tarfile)
    # keeps every member: only the bytes before the manifest differ.
    same = os.path.join(tmp, "rebuilt.tar")
    rebuild(bundle, same, lambda ms: ms)
    refused(tmp, same, pub, "changed after it was signed", "an archive rewritten by another tar")

    # After the end-of-archive blocks: garbage, or a whole member (which
    # tar -t lists), refused at its offset; zero padding is the bundle still.
    at = "(at byte %d)" % len(raw)
    refused(tmp, write("garbage.tar", raw + b"garbage"), pub, at, "garbage after the end")
    extra = io.BytesIO()
    with tarfile.open(fileobj=extra, mode="w:", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("extra.txt")
        info.size = 6
        t.addfile(info, io.BytesIO(b"extra\n"))
    path = write("member-after.tar", raw + extra.getvalue())
    refused(tmp, path, pub, at, "a member after the end blocks")
    refused(tmp, path, pub, at, "a member after the end blocks (stdin)", stdin=True)
    padded = write("padded.tar", raw + bytes(10240))
    rc, out, err = run(["import", "--dir", os.path.join(tmp, "padded"), "--verify", pub, padded])
    check(rc == 0 and "verified" in out, "import --verify of a bundle with zero padding", out + err)


def test_keys(tmp, cache, keys):
    key, pub, key2, pub2 = keys
    rsa = os.path.join(tmp, "rsa.pem")
    rsa_pub = os.path.join(tmp, "rsa.pub")
    openssl("genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:1024", "-out", rsa)
    openssl("pkey", "-in", rsa, "-pubout", "-out", rsa_pub)
    garbage = os.path.join(tmp, "garbage.pem")
    with open(garbage, "w") as f:
        f.write("-----BEGIN PRIVATE KEY-----\nnot base64 at all!\n-----END PRIVATE KEY-----\n")
    out_tar = os.path.join(tmp, "k.tar")
    for k, what, label in ((rsa, "Ed25519", "an RSA signing key"),
                           (garbage, "not a PEM private key", "a malformed PEM"),
                           (pub, "not a PEM private key", "a public key to sign with"),
                           (os.path.join(tmp, "none.pem"), "none.pem", "a missing key file")):
        rc, out, err = run(["export", "--dir", cache, "--sign", k, out_tar])
        check(rc != 0 and what in err and not os.path.exists(out_tar),
              "export --sign with %s: refused, nothing written" % label, (rc, err))
    bundle = os.path.join(tmp, "b.tar")
    check(run(["export", "--dir", cache, "--sign", key, bundle])[0] == 0, "export for key tests")
    for k, what, label in ((rsa_pub, "Ed25519", "an RSA verifying key"),
                           (garbage, "not a PEM public key", "a malformed PEM"),
                           (key, "not a PEM public key", "a private key to verify with")):
        target = os.path.join(tmp, "kt")
        rc, out, err = run(["import", "--dir", target, "--verify", k, bundle])
        check(rc != 0 and what in err and not os.path.exists(target),
              "import --verify with %s: refused, nothing written" % label, (rc, err))
    check(run(["import", "--sign", key, bundle])[0] == 2, "import --sign: usage error")
    check(run(["export", "--verify", pub, bundle])[0] == 2, "export --verify: usage error")


def test_bounds(tmp, pub):
    # A manifest member larger than any manifest is refused from its header.
    big = os.path.join(tmp, "big.tar")
    with tarfile.open(big, "w:", format=tarfile.USTAR_FORMAT) as t:
        m = tarfile.TarInfo("progcache-bundle/manifest")
        m.size = (64 << 20) + 1
        t.addfile(m, io.BytesIO(b"\0" * m.size))
    rc, out, err = run(["import", "--dir", os.path.join(tmp, "big"), "--max-artifact-size", "1G",
                        "--verify", pub, big])
    check(rc == 3 and "more than a manifest may hold" in err, "an oversized manifest", err)
    # A signature member that is not 64 bytes.
    odd = os.path.join(tmp, "odd.tar")
    with tarfile.open(odd, "w:", format=tarfile.USTAR_FORMAT) as t:
        m = tarfile.TarInfo("progcache-bundle/signature")
        m.size = 65
        t.addfile(m, io.BytesIO(b"x" * 65))
    rc, out, err = run(["import", "--dir", os.path.join(tmp, "odd"), "--verify", pub, odd])
    check(rc == 3 and "not an Ed25519 signature" in err, "a signature of the wrong size", err)
    # A reserved name that is a link.
    link = os.path.join(tmp, "link.tar")
    with tarfile.open(link, "w:", format=tarfile.USTAR_FORMAT) as t:
        m = tarfile.TarInfo("progcache-bundle/manifest")
        m.type = tarfile.SYMTYPE
        m.linkname = "/etc/passwd"
        t.addfile(m)
    rc, out, err = run(["import", "--dir", os.path.join(tmp, "link"), link])
    check(rc == 3 and "refused" in err, "a reserved name as a symbolic link is refused", err)


def main():
    pt.need_bin()
    if not shutil.which("openssl"):
        pt.skip("no openssl command to make keys with")
    with tempfile.TemporaryDirectory(prefix="progcache-bundle-") as tmp:
        keys = [os.path.join(tmp, n) for n in ("k.pem", "pub.pem", "k2.pem", "pub2.pem")]
        openssl("genpkey", "-algorithm", "ed25519", "-out", keys[0])
        openssl("pkey", "-in", keys[0], "-pubout", "-out", keys[1])
        openssl("genpkey", "-algorithm", "ed25519", "-out", keys[2])
        openssl("pkey", "-in", keys[2], "-pubout", "-out", keys[3])
        cache = make_cache(tmp)
        if not cache:
            pt.skip("NVRTC cannot compile here (progcache warm failed)")
        bundle = test_sign_verify(tmp, cache, keys)
        test_tamper(tmp, bundle, keys[1])
        test_keys(tmp, cache, keys)
        test_bounds(tmp, keys[1])
    return pt.finish("test_tool_bundle")


if __name__ == "__main__":
    sys.exit(main())
