#!/usr/bin/env python3
"""`progcache stats --format openmetrics|prometheus` (issue 35, item 3),
through the real binary:

- every counter of `stats --json` is a counter family with the same value,
  with its tier as a label; entries, size and cap are gauges; a directory
  whose name needs escaping stays one label;
- the OpenMetrics output is accepted by prometheus_client's OpenMetrics
  parser (a virtual environment in the build tree, --venv; when pip cannot
  install it, only this file's own grammar check runs and it says so) and
  ends in "# EOF";
- the Prometheus text output passes `promtool check metrics` when promtool
  is installed (Debian's prometheus package), else prometheus_client's
  text parser;
- contrib/node_exporter/progcache-textfile.sh replaces its file whole;
- a bad --format is a usage error (2), and --format with --zero too.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

VENV = None
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RENAMED = {"pch_ms_saved": ("pch_saved_seconds", 1000)}
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r'^(%s)\{dir="((?:[^"\\\n]|\\[\\"n])*)"(?:,tier="([a-z]+)")?\} '
                    r'(\d+)(?:\.\d+)?$' % NAME)


def run(args, env=None):
    return pt.run(args, env, timeout=120, drop=("PROGCACHE_REMOTE", "PROGCACHE_DIR"))


def client_python():
    """A python with prometheus_client, or None (said once)."""
    probe = "import prometheus_client.openmetrics.parser"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0:
        return sys.executable
    if not VENV:
        return None
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        if subprocess.run([sys.executable, "-m", "venv", VENV], capture_output=True).returncode:
            return None
    if subprocess.run([py, "-c", probe], capture_output=True).returncode:
        try:
            subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--timeout", "30", "--retries", "1", "prometheus_client"],
                           capture_output=True, timeout=240)
        except subprocess.TimeoutExpired:
            pass
    if subprocess.run([py, "-c", probe], capture_output=True).returncode:
        print("NOTE: prometheus_client cannot be installed: the grammar check only")
        return None
    return py


PARSE = r'''
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
from prometheus_client.parser import text_string_to_metric_families as prom
text = sys.stdin.read()
fams = list((om if sys.argv[1] == "openmetrics" else prom)(text))
for f in fams:
    for s in f.samples:
        print(f.type, s.name, s.labels.get("tier", "-"), int(s.value))
'''


def grammar(text, om):
    """This file's own check of the exposition: (samples {name: (tier,
    value)}, problems)."""
    samples, problems, typed = {}, [], {}
    lines = text.split("\n")
    check(lines[-1] == "", "the output ends with a newline")
    lines = lines[:-1]
    if om:
        check(lines and lines[-1] == "# EOF", "OpenMetrics ends with # EOF", lines[-1:])
        lines = lines[:-1]
    for line in lines:
        m = re.match(r"^# (HELP|TYPE) (%s) (.+)$" % NAME, line)
        if m:
            if m.group(1) == "TYPE":
                if m.group(2) in typed:
                    problems.append("TYPE twice: " + line)
                typed[m.group(2)] = m.group(3)
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append("not a sample: " + line)
            continue
        name = m.group(1)
        family = re.sub(r"_(total|created)$", "", name) if om else name
        if family not in typed and name not in typed:
            problems.append("no TYPE before " + line)
        samples[name] = (m.group(3), int(m.group(4)))
    return samples, problems, typed


def fill(cache, tmp):
    path = os.path.join(tmp, "payload")
    with open(path, "wb") as f:
        f.write(b"x" * 3000)
    rc, _, err = run(["put", "-d", cache, "%064x" % 7, path])
    check(rc == 0, "put", err)
    rc, _, _ = run(["get", "-d", cache, "-o", os.path.join(tmp, "out"), "%064x" % 7])
    rc2, _, _ = run(["get", "-d", cache, "-o", os.path.join(tmp, "out"), "%064x" % 8])
    check(rc == 0 and rc2 == 1, "a hit and a miss", (rc, rc2))


def test_formats(tmp):
    # A quote, a backslash and a newline in the directory's name: one label.
    cache = os.path.join(tmp, 'ca"che\\x\ny')
    fill(cache, tmp)
    rc, out, err = run(["stats", "-d", cache, "--json"])
    check(rc == 0, "stats --json", err)
    js = json.loads(out)
    counters = [k for k, v in js.items() if type(v) is int and k not in (
        "schema", "entries", "total_size", "max_size", "since")]
    check(len(counters) >= 49 and js["hits"] == 1 and js["misses"] == 1, "the JSON counters",
          js)
    py = client_python()
    for fmt in ("openmetrics", "prometheus"):
        om = fmt == "openmetrics"
        rc, text, err = run(["stats", "-d", cache, "--format", fmt])
        check(rc == 0 and not err, "stats --format " + fmt, err)
        samples, problems, typed = grammar(text, om)
        check(not problems, fmt + ": grammar", problems[:5])
        for k in counters:
            # Milliseconds are exported in seconds (Prometheus's base unit).
            name, scale = RENAMED.get(k, (k, 1))
            got = samples.get("progcache_%s_total" % name)
            check(got is not None and got[1] == js[k] // scale, "%s: %s is the JSON's" % (fmt, k),
                  got)
            fam = "progcache_%s" % name if om else "progcache_%s_total" % name
            check(typed.get(fam) == "counter", "%s: %s is a counter" % (fmt, fam), typed.get(fam))
        check(samples["progcache_remote_hits_total"][0] == "remote" and
              samples["progcache_pch_hits_total"][0] == "pch" and
              samples["progcache_hits_total"][0] == "cache" and
              samples["progcache_evictions_total"][0] == "directory", fmt + ": tiers")
        check(samples["progcache_entries"][1] == 1 and
              samples["progcache_size_bytes"][1] == js["total_size"] and
              samples["progcache_max_size_bytes"][1] == js["max_size"], fmt + ": gauges",
              (samples.get("progcache_entries"), js))
        check(text.count('dir="%s"' % cache.replace("\\", "\\\\").replace('"', '\\"')
                         .replace("\n", "\\n")) == len(samples), fmt + ": the dir label")
        if py:
            p = subprocess.run([py, "-c", PARSE, fmt], input=text, capture_output=True,
                               text=True)
            check(p.returncode == 0, fmt + ": prometheus_client parses it", p.stderr[-800:])
            hits = [l for l in p.stdout.splitlines() if " progcache_hits_total " in l]
            check(hits == ["counter progcache_hits_total cache 1"],
                  fmt + ": prometheus_client reads hits as a counter", hits)
        if not om and shutil.which("promtool"):
            p = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True)
            check(p.returncode == 0, "promtool check metrics", p.stdout + p.stderr)
    # No cap: no cap sample (rather than a 0 that a ratio turns infinite).
    rc, text, err = run(["stats", "-d", cache, "--format", "openmetrics"],
                        env={"PROGCACHE_MAX_SIZE": "none"})
    check(rc == 0 and "progcache_max_size_bytes{" not in text and
          "progcache_size_bytes{" in text, "no cap, no cap sample", err)


def test_textfile(tmp):
    """contrib/node_exporter/progcache-textfile.sh: the file replaced whole,
    no temporary file left, the old file kept when progcache fails."""
    script = os.path.join(SRC, "contrib", "node_exporter", "progcache-textfile.sh")
    cache, out_dir = os.path.join(tmp, "cache"), os.path.join(tmp, "textfile")
    os.makedirs(out_dir)
    fill(cache, tmp)
    out = os.path.join(out_dir, "progcache.prom")
    env = pt.tool_env({"PROGCACHE": pt.BIN}, drop=("PROGCACHE_REMOTE", "PROGCACHE_DIR"))
    p = subprocess.run(["sh", script, cache, out], env=env, capture_output=True, text=True)
    check(p.returncode == 0 and os.listdir(out_dir) == ["progcache.prom"], "textfile written",
          (p.returncode, p.stderr, os.listdir(out_dir)))
    with open(out) as f:
        text = f.read()
    samples, problems, _ = grammar(text, False)
    check(not problems and samples.get("progcache_entries", (0, 0))[1] == 1,
          "the textfile's metrics", problems[:3])
    p = subprocess.run(["sh", script, os.path.join(tmp, "no-such-cache"), out], env=env,
                       capture_output=True, text=True)
    with open(out) as f:
        kept = f.read()
    check(p.returncode != 0 and kept == text and os.listdir(out_dir) == ["progcache.prom"],
          "a failed export keeps the old file and leaves no temporary one",
          (p.returncode, os.listdir(out_dir)))
    p = subprocess.run(["sh", script, cache, os.path.join(out_dir, "x.txt")], env=env,
                       capture_output=True, text=True)
    check(p.returncode == 2, "an output the collector would not read is refused", p.stderr)


def test_usage(tmp):
    rc, _, err = run(["stats", "-d", tmp, "--format", "yaml"])
    check(rc == 2 and "--format yaml" in err, "--format yaml is a usage error", (rc, err))
    rc, _, err = run(["stats", "-d", tmp, "--format", "openmetrics", "-z"])
    check(rc == 2, "--format with --zero is a usage error", (rc, err))


def main():
    global VENV
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv")
    VENV = ap.parse_args().venv
    pt.need_bin()
    return pt.run_tests((test_formats, test_textfile, test_usage), "test_tool_metrics")


if __name__ == "__main__":
    sys.exit(main())
