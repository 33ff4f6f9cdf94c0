"""The HTTP tier (src/store/http) against nginx from Debian, over HTTP and
HTTPS (a CA made here), and against a server that misbehaves (a real socket
server, http_servers.BadServer): the store contract, two cache directories
as two nodes (a MISS on one is a HIT on the other), TLS verified (the right
CA, no CA, a wrong one), credentials never shown, and drips, lying lengths,
500s, redirects and a server that never answers: each a miss within the
deadline, told once, never a crash or a hang.

Usage: test_http_tier.py HTTP_PROBE   (CTest passes tests/http/http_probe)."""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
sys.path.insert(0, HERE)
import progcache_test as pt  # noqa: E402
import http_servers as hs  # noqa: E402

PROBE = sys.argv[1] if len(sys.argv) > 1 else None
CLEAN = ("PROGCACHE_DIR", "PROGCACHE_REMOTE", "PROGCACHE_REMOTE_CA",
         "PROGCACHE_REMOTE_AUTH_FILE", "PROGCACHE_REMOTE_SECRET_FILE")


def probe(args, env=None, timeout=60):
    e = pt.tool_env(env, drop=CLEAN)
    p = subprocess.run([PROBE] + args, env=e, capture_output=True, text=True, timeout=timeout)
    return p


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def test_contract(d):
    with hs.Nginx(d) as ng:
        p = probe(["contract", ng.url])
        pt.check(p.returncode == 0, "the store contract over nginx", p.stdout + p.stderr)


def test_nodes(d):
    secret = os.path.join(d, "secret")
    pt.write(secret, "0123456789abcdef0123456789abcdef\n")
    os.chmod(secret, 0o600)
    with hs.Nginx(os.path.join(d, "ng")) as ng:
        env = {"PROGCACHE_REMOTE": ng.url, "PROGCACHE_REMOTE_SECRET_FILE": secret}
        p = probe(["nodes", os.path.join(d, "a"), os.path.join(d, "b")], env)
        f = fields(p.stdout)
        pt.check(f.get("a") == "MISS" and f.get("b") == "HIT" and f.get("same") == "1" and
                 f.get("remote_hits") == "1", "a MISS on node a is a HIT on node b",
                 p.stdout + p.stderr)
        # progcache remote: the tier listed, what it holds.
        r = subprocess.run([pt.BIN, "remote", "--url", ng.url], capture_output=True, text=True,
                           env=pt.tool_env(None, drop=CLEAN), timeout=60)
        pt.check(r.returncode == 0 and "usable" in r.stdout and " 1 (" in r.stdout,
                 "progcache remote lists the tier's one entry", r.stdout + r.stderr)
        objects = os.listdir(os.path.join(ng.dir, "www", "cache"))
        r = subprocess.run([pt.BIN, "ls", "--remote", ng.url], capture_output=True, text=True,
                           env=pt.tool_env(None, drop=CLEAN), timeout=60)
        pt.check(r.returncode == 0 and objects and objects[0][:8] in r.stdout,
                 "progcache ls --remote lists the tier", r.stdout + r.stderr)
        pt.check(len(objects) == 1 and len(objects[0]) == 64,
                 "one object named by its 64 hex digits", str(objects))
        # The object is an envelope with an HMAC tag: a node with another
        # secret rejects it.
        other = os.path.join(d, "other")
        pt.write(other, "another secret, 32 bytes long...\n")
        os.chmod(other, 0o600)
        env["PROGCACHE_REMOTE_SECRET_FILE"] = other
        p = probe(["nodes", os.path.join(d, "c"), os.path.join(d, "e")], env)
        pt.check("remote_rejected=0" in p.stdout, "its own puts verify", p.stdout)
        p = probe(["get", ng.url], {"PROGCACHE_REMOTE_SECRET_FILE": other})
        pt.check(fields(p.stdout).get("rc") == "-1", "an absent key is a miss", p.stdout)


def test_stacked(d):
    """PROGCACHE_REMOTE as a list: a put writes through to every tier; a hit
    in a lower tier is back-filled into the faster one above it."""
    with hs.Nginx(os.path.join(d, "fast")) as fast, hs.Nginx(os.path.join(d, "slow")) as slow:
        env = {"PROGCACHE_REMOTE": "%s %s" % (fast.url, slow.url)}
        p = probe(["nodes", os.path.join(d, "a"), os.path.join(d, "b")], env)
        f = fields(p.stdout)
        pt.check(f.get("b") == "HIT" and f.get("same") == "1", "a HIT through stacked tiers",
                 p.stdout + p.stderr)
        fast_dir = os.path.join(fast.dir, "www", "cache")
        slow_dir = os.path.join(slow.dir, "www", "cache")
        pt.check(len(os.listdir(fast_dir)) == 1 and os.listdir(fast_dir) == os.listdir(slow_dir),
                 "a put written through to both tiers", str(os.listdir(slow_dir)))
        for name in os.listdir(fast_dir):
            os.unlink(os.path.join(fast_dir, name))
        p = probe(["hit", os.path.join(d, "c")], env)
        pt.check("hit=HIT" in p.stdout, "the slow tier answers when the fast one misses",
                 p.stdout + p.stderr)
        pt.check(len(os.listdir(fast_dir)) == 1, "the hit below back-filled the fast tier",
                 str(os.listdir(fast_dir)))
        p = probe(["hit", os.path.join(d, "e")],
                  {"PROGCACHE_REMOTE": "http://127.0.0.1:1/none/?timeout_ms=300 " + slow.url})
        pt.check("hit=HIT" in p.stdout, "a dead upper tier does not hide the one below",
                 p.stdout + p.stderr)
        # progcache remote checks each tier of the list, says what each holds.
        listed = {"PROGCACHE_REMOTE": "http://127.0.0.1:1/none/?timeout_ms=300 %s %s"
                  % (fast.url, slow.url)}
        r = subprocess.run([pt.BIN, "remote"], capture_output=True, text=True,
                           env=pt.tool_env(listed, drop=CLEAN), timeout=60)
        tiers = r.stdout.split("\ntier ")
        pt.check(r.returncode == 1 and len(tiers) == 3 and "UNUSABLE" in tiers[0] and
                 all("usable" in t and " 1 (" in t for t in tiers[1:]),
                 "progcache remote: each tier of the list, the dead one unusable",
                 r.stdout + r.stderr)
        r = subprocess.run([pt.BIN, "remote", "--json"], capture_output=True, text=True,
                           env=pt.tool_env(listed, drop=CLEAN), timeout=60)
        rows = [json.loads(line) for line in r.stdout.splitlines()]
        pt.check([t["usable"] for t in rows] == [False, True, True] and
                 [t.get("entries") for t in rows[1:]] == [1, 1],
                 "progcache remote --json: one object a tier", r.stdout + r.stderr)
    p = probe(["nodes", os.path.join(d, "j"), os.path.join(d, "k")],
              {"PROGCACHE_REMOTE": " ".join(["http://127.0.0.1:1/t%d/" % i for i in range(5)])})
    pt.check("more than 4 tiers" in p.stdout, "at most 4 tiers", p.stdout)


def test_prune_by_age(d):
    """prune --remote URL --older-than AGE over nginx: an object whose file
    is two hours old (nginx's listing says so) is removed, a fresh one and a
    file that is not an entry's (not 64 hex digits) are kept; --remote
    without --older-than is refused."""
    with hs.Nginx(os.path.join(d, "ng")) as ng:
        p = probe(["put", ng.url])
        pt.check("stores=1" in p.stdout, "one object", p.stdout + p.stderr)
        www = os.path.join(ng.dir, "www", "cache")
        (old,) = os.listdir(www)
        env = {"PROGCACHE_REMOTE": ng.url}
        probe(["nodes", os.path.join(d, "a"), os.path.join(d, "b")], env)
        past = os.stat(os.path.join(www, old)).st_mtime - 7200
        os.utime(os.path.join(www, old), (past, past))
        pt.write(os.path.join(www, "notes.txt"), "not ours\n")
        os.utime(os.path.join(www, "notes.txt"), (past, past))
        pt.check(len(os.listdir(www)) == 3, "two objects and a foreign file", str(os.listdir(www)))
        run = lambda args: subprocess.run([pt.BIN, "prune"] + args, capture_output=True,
                                          text=True, env=pt.tool_env(None, drop=CLEAN),
                                          timeout=60)
        r = run(["--remote", ng.url])
        pt.check(r.returncode == 2 and "--older-than" in r.stderr,
                 "--remote without --older-than: a usage error", r.stdout + r.stderr)
        r = run(["--remote", ng.url, "--older-than", "1h", "--json"])
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        pt.check(out.get("removed") == 1 and out.get("entries") == 1,
                 "the two-hour-old object removed, the fresh one kept", r.stdout + r.stderr)
        left = sorted(os.listdir(www))
        pt.check(old not in left and "notes.txt" in left and len(left) == 2,
                 "the foreign file is never removed", str(left))


def test_https(d):
    ca, cert, key = hs.make_ca(d, "good")
    wrong_ca, _, _ = hs.make_ca(d, "wrong")
    with hs.Nginx(os.path.join(d, "ng"), tls=(cert, key)) as ng:
        good = {"PROGCACHE_REMOTE_CA": ca}
        p = probe(["put", ng.url], good)
        pt.check("stores=1" in p.stdout, "a put over HTTPS with the test's CA", p.stdout + p.stderr)
        p = probe(["get", ng.url], good)
        pt.check(fields(p.stdout).get("rc") == "0" and "hits=1" in p.stdout,
                 "a get over HTTPS with the test's CA", p.stdout + p.stderr)
        for label, env in (("the system's CAs", {}), ("a wrong CA",
                                                     {"PROGCACHE_REMOTE_CA": wrong_ca})):
            p = probe(["get", ng.url, "2"], env)
            f = fields(p.stdout)
            pt.check(f.get("rc") == "-1" and f.get("warn") == "1",
                     "HTTPS with %s: a miss, told once" % label, p.stdout + p.stderr)
            pt.check("certificate" in p.stderr, "the message names the certificate problem",
                     p.stderr)
        p = probe(["contract", ng.url], good)
        pt.check(p.returncode == 0, "the store contract over HTTPS", p.stdout + p.stderr)


def test_credentials_hidden(d):
    r = subprocess.run([pt.BIN, "remote", "--url", "http://127.0.0.1:1/cache/?timeout_ms=300"],
                       capture_output=True, text=True, env=pt.tool_env(None, drop=CLEAN),
                       timeout=60)
    pt.check(r.returncode != 0 and "UNUSABLE" in r.stdout,
             "progcache remote: a server that is down is not usable", r.stdout + r.stderr)
    p = probe(["get", "http://user:hunter2secret@127.0.0.1:1/cache/"])
    pt.check(p.returncode == 2 and "credentials in the URL are refused" in p.stdout,
             "credentials in the URL refused", p.stdout)
    pt.check("hunter2secret" not in p.stdout + p.stderr, "the password is never shown",
             p.stdout + p.stderr)
    auth = os.path.join(d, "auth")
    pt.write(auth, "user:hunter2secret\n")
    os.chmod(auth, 0o600)
    with hs.BadServer() as bad:
        p = probe(["get", bad.url("500"), "1"], {"PROGCACHE_REMOTE_AUTH_FILE": auth})
        pt.check("hunter2secret" not in p.stdout + p.stderr,
                 "a failure with credentials never shows them", p.stdout + p.stderr)


def stats_of(cache):
    r = subprocess.run([pt.BIN, "stats", "--json", "-d", cache], capture_output=True,
                       text=True, env=pt.tool_env(None, drop=CLEAN), timeout=60)
    pt.check(r.returncode == 0, "progcache stats", r.stdout + r.stderr)
    return json.loads(r.stdout)


def test_trusted_files(d):
    """The CA and the credentials are files trusted by their path: checked
    and read through one descriptor (the CA handed to libcurl as bytes),
    refused with a message naming the file and the cause, and counted."""
    ca, cert, key = hs.make_ca(d, "good")
    with hs.Nginx(os.path.join(d, "ng"), tls=(cert, key)) as ng:
        # The remote_ca setting of each node's directory, no variable.
        a, b = os.path.join(d, "a"), os.path.join(d, "b")
        for node in (a, b):
            r = subprocess.run([pt.BIN, "config", "-d", node, "remote_ca", ca],
                               capture_output=True, text=True,
                               env=pt.tool_env(None, drop=CLEAN), timeout=60)
            pt.check(r.returncode == 0, "config remote_ca", r.stdout + r.stderr)
        p = probe(["nodes", a, b], {"PROGCACHE_REMOTE": ng.url})
        f = fields(p.stdout)
        pt.check(f.get("a") == "MISS" and f.get("b") == "HIT" and f.get("same") == "1",
                 "HTTPS through the remote_ca setting: a MISS on a is a HIT on b",
                 p.stdout + p.stderr)
        # A CA file another user could write: refused before any request.
        os.chmod(ca, 0o666)
        p = probe(["nodes", os.path.join(d, "c"), os.path.join(d, "c2")],
                  {"PROGCACHE_REMOTE": ng.url, "PROGCACHE_REMOTE_CA": ca})
        pt.check(p.returncode == 2 and "PROGCACHE_REMOTE_CA %s can be written by every user"
                 % ca in p.stdout and "chmod go-w" in p.stdout,
                 "a CA file others can write is refused, named", p.stdout + p.stderr)
        pt.check(stats_of(os.path.join(d, "c")).get("remote_files_refused") == 1,
                 "the refusal is counted", str(stats_of(os.path.join(d, "c"))))
        os.chmod(ca, 0o644)
    # Credentials readable by others, or another user's: refused, counted.
    auth = os.path.join(d, "auth")
    pt.write(auth, "user:hunter2secret\n")
    os.chmod(auth, 0o640)
    e = os.path.join(d, "e")
    p = probe(["nodes", e, os.path.join(d, "e2")],
              {"PROGCACHE_REMOTE": "http://127.0.0.1:1/cache/",
               "PROGCACHE_REMOTE_AUTH_FILE": auth})
    pt.check(p.returncode == 2 and "PROGCACHE_REMOTE_AUTH_FILE %s can be read by its group "
             "(mode 0640)" % auth in p.stdout and "chmod 600" in p.stdout,
             "credentials readable by the group are refused, named", p.stdout + p.stderr)
    pt.check("hunter2secret" not in p.stdout + p.stderr, "and never shown", p.stdout)
    pt.check(stats_of(e).get("remote_files_refused") == 1, "the refusal is counted",
             str(stats_of(e)))
    os.chmod(auth, 0o600)
    os.chown(auth, 1, 1)  # daemon's: another user's
    p = probe(["get", "http://127.0.0.1:1/cache/?timeout_ms=300"],
              {"PROGCACHE_REMOTE_AUTH_FILE": auth})
    pt.check(p.returncode == 2 and "belongs to another user (uid 1)" in p.stdout,
             "credentials of another user are refused", p.stdout + p.stderr)
    # Every other file the open cannot use is counted the same way: one
    # larger than its bound (never cut), one that is not there, a folder,
    # and the shared secret file (read by its own rules: every user may
    # read this one).
    big = os.path.join(d, "auth-big")
    pt.write(big, "user:" + "p" * 9000 + "\n")
    os.chmod(big, 0o600)
    folder = os.path.join(d, "auth-dir")
    os.mkdir(folder, 0o700)
    secret = os.path.join(d, "secret")
    pt.write(secret, "s" * 32)
    os.chmod(secret, 0o644)
    auth_var, secret_var = "PROGCACHE_REMOTE_AUTH_FILE", "PROGCACHE_REMOTE_SECRET_FILE"
    for node, var, path, said in (
            ("f", auth_var, big, "is larger than 8192 bytes"),
            ("g", auth_var, os.path.join(d, "no-such-auth"), "cannot be opened"),
            ("h", auth_var, folder, "is not a regular file"),
            ("i", secret_var, secret, "can be read by every user")):
        p = probe(["nodes", os.path.join(d, node), os.path.join(d, node + "2")],
                  {"PROGCACHE_REMOTE": "http://127.0.0.1:1/cache/", var: path})
        pt.check(p.returncode == 2 and "%s %s %s" % (var, path, said) in p.stdout,
                 "an unusable credentials or secret file fails the open, named", p.stdout)
        pt.check(stats_of(os.path.join(d, node)).get("remote_files_refused") == 1,
                 "and is counted in remote_files_refused", (path, stats_of(os.path.join(d, node))))


def test_misbehaving(d):
    cases = [("drip", "timeouts=1"), ("lie-short", "errors=1"), ("lie-long", "rejected=1"),
             ("huge", "over_bound=1"), ("nolen", "over_bound=1"), ("500", "errors=1"),
             ("redirect", "errors=1"), ("hang", "timeouts=1")]
    with hs.BadServer() as bad:
        for mode, counted in cases:
            p = probe(["get", bad.url(mode), "1"], timeout=30)
            f = fields(p.stdout)
            pt.check(p.returncode == 0, "%s: no crash" % mode, p.stdout + p.stderr)
            pt.check(f.get("rc") == "-1", "%s: a miss" % mode, p.stdout + p.stderr)
            pt.check(int(f.get("ms", "99999")) < 1500,
                     "%s: within the deadline (300 ms plus the bytes' allowance)" % mode,
                     p.stdout)
            pt.check(f.get("warn") == "1", "%s: told once" % mode, p.stdout + p.stderr)
            pt.check(counted in p.stdout, "%s: counted (%s)" % (mode, counted), p.stdout)
        p = probe(["get", bad.url("redirect"), "1"])
        pt.check("redirect, not followed" in p.stderr, "a redirect is said", p.stderr)
        # Twice in a row: the cause is told once, repeats only counted.
        p = probe(["get", bad.url("500"), "2"])
        pt.check(fields(p.stdout).get("warn") == "1" and "errors=2" in p.stdout,
                 "a repeated failure is told once and counted twice", p.stdout + p.stderr)
        # Three in a row: the tier backs off; the fourth get is not tried.
        p = probe(["get", bad.url("500"), "4"])
        pt.check("errors=4" in p.stdout and "is off for" in p.stderr,
                 "failures in a row switch the tier off", p.stdout + p.stderr)


if __name__ == "__main__":
    pt.need_bin()
    if not PROBE:
        pt.skip("usage: test_http_tier.py HTTP_PROBE")
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        pt.skip("nginx is not installed (apt-get install nginx)")
    if not shutil.which("openssl"):
        pt.skip("openssl is not installed")
    sys.exit(pt.run_tests([test_contract, test_nodes, test_stacked, test_prune_by_age,
                           test_https,
                           test_credentials_hidden, test_trusted_files,
                           test_misbehaving], "test_http_tier"))
