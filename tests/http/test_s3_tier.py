"""The S3 tier (s3://BUCKET/PREFIX?endpoint=URL&region=REGION, SigV4 by
libcurl) against moto's S3 server with authentication enforced: the store
contract (listing through ListObjectsV2), two cache directories as two
nodes, credentials from the variables and from the shared credentials file
with AWS_PROFILE, and a wrong secret refused by the server
(SignatureDoesNotMatch): a miss, told once, the secret never shown.

Usage: test_s3_tier.py HTTP_PROBE VENV_PYTHON (moto[server] installed in
that venv: scripts/moto-venv.sh; skipped without it)."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
sys.path.insert(0, HERE)
import progcache_test as pt  # noqa: E402
import http_servers as hs  # noqa: E402

PROBE = sys.argv[1] if len(sys.argv) > 1 else None
PYTHON = sys.argv[2] if len(sys.argv) > 2 else None
FLEET = sys.argv[3] if len(sys.argv) > 3 else None
CLEAN = ("PROGCACHE_DIR", "PROGCACHE_REMOTE", "PROGCACHE_REMOTE_CA", "PROGCACHE_REMOTE_SECRET_FILE",
         "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
         "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION", "AWS_DEFAULT_REGION", "HOME")


def probe(args, env=None, timeout=120):
    e = pt.tool_env(env, drop=CLEAN)
    return subprocess.run([PROBE] + args, env=e, capture_output=True, text=True,
                          timeout=timeout)


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def fleet(d, env):
    """8 processes on 4 nodes (4 cache directories), started together
    through progcache_compile_or_load with NVRTC: "compiles=C same=S"."""
    p = subprocess.run([FLEET, d, "4", "2"], env=pt.tool_env(env, drop=CLEAN),
                       capture_output=True, text=True, timeout=240)
    if p.returncode == 77:
        return None
    pt.check(p.returncode == 0, "every process of the fleet ran", p.stdout + p.stderr)
    return fields(p.stdout)


def listed(url, env):
    r = subprocess.run([pt.BIN, "ls", "--remote", url], capture_output=True, text=True,
                       env=pt.tool_env(env, drop=CLEAN), timeout=120)
    pt.check(r.returncode == 0, "ls --remote", r.stdout + r.stderr)
    return set(w for w in r.stdout.split() if len(w) >= 12 and all(
        c in "0123456789abcdef." for c in w))


def prune_by_age(d, moto, keys):
    """prune --remote --older-than: the object written before the age is
    removed (its LastModified from ListObjectsV2), the newer one kept."""
    url = "s3://kernels/age?endpoint=%s&region=us-east-1" % moto.url
    p = probe(["put", url], keys)
    pt.check("stores=1" in p.stdout, "the old object", p.stdout + p.stderr)
    old = listed(url, keys)
    time.sleep(3.5)
    env = dict(keys, PROGCACHE_REMOTE=url)
    p = probe(["nodes", os.path.join(d, "age-a"), os.path.join(d, "age-b")], env)
    both = listed(url, keys)
    pt.check(len(old) == 1 and len(both) == 2, "two objects under the prefix", str(both))
    r = subprocess.run([pt.BIN, "prune", "--remote", url, "--older-than", "2s"],
                       capture_output=True, text=True, env=pt.tool_env(keys, drop=CLEAN),
                       timeout=120)
    pt.check(r.returncode == 0 and "removed 1 entry" in r.stdout and "1 entry" in r.stdout,
             "prune --remote --older-than 2s removes the older object", r.stdout + r.stderr)
    pt.check(listed(url, keys) == both - old, "the newer object is kept", r.stdout)


def run_all(d):
    with hs.Moto(d, PYTHON) as moto:
        url = "s3://kernels/prod?endpoint=%s&region=us-east-1" % moto.url
        keys = {"AWS_ACCESS_KEY_ID": moto.key_id, "AWS_SECRET_ACCESS_KEY": moto.secret}
        if FLEET:
            # S3 alone: its leases make one compile in the whole fleet
            # (a loaded machine: a generous deadline per request).
            f = fleet(os.path.join(d, "fleet"),
                      dict(keys, PROGCACHE_REMOTE=url + "&timeout_ms=20000"))
            if f is None:
                print("no NVRTC here: the fleet through compile-or-load is not run")
            else:
                pt.check(f.get("compiles") == "1" and f.get("same") == "8",
                         "8 processes on 4 nodes, S3 alone: one compile", str(f))
                # Without the shared tier, the same count sees one per node.
                f = fleet(os.path.join(d, "alone"), {})
                pt.check(f.get("compiles") == "4" and f.get("same") == "8",
                         "without S3: one compile per node", str(f))
        p = probe(["contract", url], keys)
        pt.check(p.returncode == 0, "the store contract over S3", p.stdout + p.stderr)

        env = dict(keys, PROGCACHE_REMOTE=url)
        p = probe(["nodes", os.path.join(d, "a"), os.path.join(d, "b")], env)
        f = fields(p.stdout)
        pt.check(f.get("a") == "MISS" and f.get("b") == "HIT" and f.get("same") == "1",
                 "a MISS on node a is a HIT on node b through S3", p.stdout + p.stderr)

        # The shared credentials file, profile chosen by AWS_PROFILE.
        creds = os.path.join(d, "credentials")
        pt.write(creds, "[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"
                 "[ci]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                 % (moto.key_id, moto.secret))
        os.chmod(creds, 0o600)  # credentials: private, or refused
        fenv = {"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "ci"}
        p = probe(["put", url], fenv)
        pt.check("stores=1" in p.stdout, "a put with the credentials file's profile",
                 p.stdout + p.stderr)
        p = probe(["get", url], fenv)
        pt.check(fields(p.stdout).get("rc") == "0" and "hits=1" in p.stdout,
                 "a get with the credentials file's profile", p.stdout + p.stderr)

        # Leases by conditional create: 8 processes, one compile.
        p = probe(["leases", url, "8"], keys)
        pt.check("held=1 waited=7" in p.stdout, "8 processes after one lease: one holds it, "
                 "7 wait for its value", p.stdout + p.stderr)

        prune_by_age(d, moto, keys)
        wrong = {"AWS_ACCESS_KEY_ID": moto.key_id,
                 "AWS_SECRET_ACCESS_KEY": "wrong-secret-never-shown"}
        p = probe(["get", url, "2"], wrong)
        f = fields(p.stdout)
        pt.check(f.get("rc") == "-1" and f.get("warn") == "1",
                 "a wrong secret: a miss, told once", p.stdout + p.stderr)
        pt.check("SignatureDoesNotMatch" in p.stderr, "the server's refusal is named",
                 p.stderr)
        pt.check("wrong-secret-never-shown" not in p.stdout + p.stderr,
                 "the secret is never shown", p.stderr)
        p = probe(["get", url], {})
        pt.check(p.returncode == 2 and "has no credentials" in p.stdout,
                 "no credentials: the open says where they are looked for", p.stdout)


if __name__ == "__main__":
    if not PROBE or not PYTHON:
        pt.skip("usage: test_s3_tier.py HTTP_PROBE VENV_PYTHON")
    if not os.path.exists(os.path.join(os.path.dirname(PYTHON), "moto_server")):
        pt.skip("no moto_server next to %s (run scripts/moto-venv.sh BUILD_DIR)" % PYTHON)
    sys.exit(pt.run_tests([run_all], "test_s3_tier"))
