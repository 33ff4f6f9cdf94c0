#!/usr/bin/env python3
"""docs/PERFORMANCE.md's figures: scripts/plot_perf.py draws every figure
from the committed results (bench/results/current) as well-formed SVG,
and from a benchmark's own --json output (bench_store_file, run here with
tiny parameters: no GPU needed), so a rerun of the benchmarks redraws the
page's plots.

Environment: PROGCACHE_BENCH_STORE_FILE (the bench_store_file binary;
without it that half is skipped and said so)."""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOT = os.path.join(ROOT, "scripts", "plot_perf.py")
FIGURES = ["store_latency", "store_capped_puts", "single_flight", "remote_latency", "sample_hit",
           "hit_anatomy", "matmul_tflops", "headers_hit"]
# The figures' dates (bench/results/current): the headers' run is a day later.
DATES = {"headers_hit": "2026-12-01"}
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402


def svg_texts(path):
    root = ET.parse(path).getroot()
    check(root.tag.endswith("svg"), "%s is an SVG" % path)
    return [t.text or "" for t in root.iter() if t.tag.endswith("text")]


def main():
    with tempfile.TemporaryDirectory(prefix="progcache-plot-") as tmp:
        out = os.path.join(tmp, "plots")
        p = subprocess.run([sys.executable, PLOT, os.path.join(ROOT, "bench", "results", "current"),
                            out], capture_output=True, text=True)
        check(p.returncode == 0, "plot_perf.py on bench/results/current", p.stderr)
        for name in FIGURES:
            path = os.path.join(out, name + ".svg")
            check(os.path.isfile(path), "drew " + name)
            if os.path.isfile(path):
                texts = svg_texts(path)
                date = DATES.get(name, "2026-11-30")
                check(any(date in t for t in texts), name + ": the figures' date", texts[:3])
        # The committed figures are these: docs/perf matches what the script draws.
        for name in FIGURES:
            committed = os.path.join(ROOT, "docs", "perf", name + ".svg")
            drawn = os.path.join(out, name + ".svg")
            if os.path.isfile(drawn):
                check(os.path.isfile(committed) and open(committed).read() == open(drawn).read(),
                      "docs/perf/%s.svg is what plot_perf.py draws from bench/results/current" % name)
        # A benchmark's own output, fresh.
        bench = os.environ.get("PROGCACHE_BENCH_STORE_FILE")
        if not bench:
            print("note: PROGCACHE_BENCH_STORE_FILE unset; a fresh benchmark run was not plotted")
        else:
            res = os.path.join(tmp, "results")
            os.makedirs(res)
            j = os.path.join(res, "store_file.json")
            p = subprocess.run([bench, "--sizes", "10,50", "--samples", "50", "--cap-puts", "40",
                                "--dir", os.path.join(tmp, "store"), "--json", j],
                               capture_output=True, text=True)
            check(p.returncode == 0, "bench_store_file --json", p.stderr)
            doc = json.load(open(j))
            check(doc["schema"] == 1 and doc["bench"] == "store_file" and doc["date"]
                  and [r["entries"] for r in doc["results"]["sizes"]] == [10, 50]
                  and doc["results"]["capped"]["puts_per_s_fsync"] > 0
                  and "--json" in doc["command"], "the benchmark's JSON", doc)
            out2 = os.path.join(tmp, "plots2")
            p = subprocess.run([sys.executable, PLOT, res, out2], capture_output=True, text=True)
            check(p.returncode == 0 and os.path.isfile(os.path.join(out2, "store_latency.svg"))
                  and os.path.isfile(os.path.join(out2, "store_capped_puts.svg")),
                  "plot_perf.py draws a fresh run", p.stdout + p.stderr)
            texts = svg_texts(os.path.join(out2, "store_latency.svg"))
            check(any(doc["date"] in t for t in texts) and any("50 entries" in t for t in texts),
                  "the fresh figure shows its date and sizes", texts[:6])
        p = subprocess.run([sys.executable, PLOT, tmp, os.path.join(tmp, "none")],
                           capture_output=True, text=True)
        check(p.returncode != 0 and "no benchmark output" in p.stderr,
              "an empty results directory is an error", p.stderr)
    return pt.finish("test_plot_perf")


if __name__ == "__main__":
    sys.exit(main())
