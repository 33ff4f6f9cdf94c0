#!/usr/bin/env python3
"""Draw docs/PERFORMANCE.md's figures as SVG from the benchmarks' JSON.

    python3 scripts/plot_perf.py [RESULTS_DIR [OUT_DIR]]

RESULTS_DIR (default bench/results/current) holds what the benchmarks write
with --json FILE (bench_store_file, bench_cuda_core_store.py,
bench_single_flight, bench_redis, bench_matmul, bench_hit_anatomy,
bench_headers, and bench/run_sample_compare.sh with JSON=FILE;
bench/run_gpu_all.sh writes them all to OUT/json/). Every *.json file there is read and recognised by
its "bench" field; a figure whose data is missing is left as it is.
OUT_DIR (default docs/perf) receives one SVG per figure. Plain Python 3,
no packages: the SVG is written by hand, so the script runs wherever the
benchmarks do."""

import glob
import html
import json
import math
import os
import sys

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79"]
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


def esc(text):
    return html.escape(str(text), quote=True)


def nice_step(v, ticks=5):
    """A round step (1, 2, 2.5 or 5 times a power of ten) for about ticks
    steps up to v."""
    raw = max(v, 1e-12) / ticks
    exp = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= raw:
            return m * exp
    return 10 * exp


def nice_ceiling(v):
    """A multiple of a round step at or above v, for an axis."""
    step = nice_step(v)
    return math.ceil(v / step - 1e-9) * step


def fmt(v):
    """A figure as the tables print it: 1,475; 192.9; 78; 0.051."""
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 1:
        text = f"{v:.1f}"
        return text[:-2] if text.endswith(".0") else text
    return f"{v:.3g}"


def fmt_tick(v):
    """An axis label: no trailing zeros (50, 2.5, 0.06)."""
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.6g}"


class Svg:
    def __init__(self, width, height):
        self.w, self.h = width, height
        self.parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}" {FONT} font-size="12">',
                      f'<rect width="{width}" height="{height}" fill="white"/>']

    def text(self, x, y, s, anchor="start", size=12, weight="normal", color="#222", rotate=None):
        tr = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate else ""
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
                          f'font-weight="{weight}" fill="{color}"{tr}>{esc(s)}</text>')

    def rect(self, x, y, w, h, color, title=None):
        t = f"<title>{esc(title)}</title>" if title else ""
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
                          f'height="{max(h, 0):.1f}" fill="{color}">{t}</rect>')

    def line(self, x1, y1, x2, y2, color="#ccc", width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                          f'stroke="{color}" stroke-width="{width}"{d}/>')

    def polyline(self, points, color, width=2):
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" '
                          f'stroke-width="{width}"/>')

    def circle(self, x, y, r, color, title=None):
        t = f"<title>{esc(title)}</title>" if title else ""
        self.parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}">{t}</circle>')

    def legend(self, x, y, names, colors, per_row=3, col_width=230):
        for i, (name, color) in enumerate(zip(names, colors)):
            cx = x + (i % per_row) * col_width
            cy = y + (i // per_row) * 18
            self.rect(cx, cy - 10, 12, 12, color)
            self.text(cx + 17, cy, name, size=11)
        return y + ((len(names) + per_row - 1) // per_row) * 18

    def header(self, title, caption):
        """Title and caption; a long caption is wrapped (at "; " or a
        blank) onto a second line, which the charts leave room for."""
        self.text(16, 24, title, size=15, weight="bold")
        limit = int((self.w - 32) / 6.1)
        lines = [caption]
        if len(caption) > limit:
            cut = caption.rfind("; ", 0, limit)
            cut = cut + 1 if cut > 0 else caption.rfind(" ", 0, limit)
            lines = [caption[:cut].rstrip(), caption[cut:].strip()]
        for i, line in enumerate(lines[:2]):
            self.text(16, 42 + 14 * i, line, size=11, color="#555")

    def save(self, path):
        self.parts.append("</svg>")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.parts) + "\n")
        print("wrote", path)


def caption_of(*docs):
    """"2026-11-30, the H200 machine (16 CPUs): bench_store_file --samples 20000" of the sources."""
    seen = []
    for d in docs:
        if not d:
            continue
        machine = d.get("machine") or "%s (%s CPUs)" % (d["host"]["name"], d["host"]["cpus"])
        s = "%s, %s" % (d["date"], machine)
        if s not in seen:
            seen.append(s)
    return "; ".join(seen)


def value_axis(svg, x0, y0, x1, y1, top, ticks=5, label=None, log_min=None):
    """Horizontal grid lines and labels for a vertical value axis from y1
    (value 0, or log_min) up to y0 (value top)."""
    if log_min:
        lo, hi = math.log10(log_min), math.log10(top)
        values = [10 ** e for e in range(int(math.floor(lo)), int(math.ceil(hi)) + 1)]
        pos = lambda v: y1 - (math.log10(v) - lo) / (hi - lo) * (y1 - y0)
    else:
        step = nice_step(top, ticks)
        values = [step * i for i in range(int(round(top / step)) + 1)]
        pos = lambda v: y1 - v / top * (y1 - y0)
    for v in values:
        y = pos(v)
        svg.line(x0, y, x1, y, "#e5e5e5")
        svg.text(x0 - 6, y + 4, fmt_tick(v), anchor="end", size=10, color="#555")
    if label:
        svg.text(x0 - 44, (y0 + y1) / 2, label, anchor="middle", size=11, color="#333", rotate=-90)
    return pos


def grouped_bars(path, title, caption, groups, series, ylabel, log=False, value_labels=True,
                 width=760, height=400):
    """groups: category names along x; series: [(name, [value per group])]."""
    svg = Svg(width, height)
    svg.header(title, caption)
    x0, x1, y0, y1 = 70, width - 20, 84, height - 80
    values = [v for _, vs in series for v in vs if v is not None]
    top = nice_ceiling(max(values) * (1.15 if not log else 1.0))
    if log:
        top = 10 ** math.ceil(math.log10(max(values)))
        low = 10 ** math.floor(math.log10(min(v for v in values if v > 0)))
        pos = value_axis(svg, x0, y0, x1, y1, top, label=ylabel, log_min=low)
    else:
        pos = value_axis(svg, x0, y0, x1, y1, top, label=ylabel)
    gw = (x1 - x0) / len(groups)
    bw = gw * 0.8 / len(series)
    for g, name in enumerate(groups):
        gx = x0 + g * gw + gw * 0.1
        for s, (sname, vs) in enumerate(series):
            v = vs[g]
            if v is None:
                continue
            y = pos(v)
            svg.rect(gx + s * bw, y, bw - 2, y1 - y, PALETTE[s % len(PALETTE)], f"{sname}: {fmt(v)}")
            if value_labels:
                svg.text(gx + s * bw + bw / 2 - 1, y - 3, fmt(v), anchor="middle", size=9,
                         color="#333")
        svg.text(x0 + g * gw + gw / 2, y1 + 16, name, anchor="middle", size=11)
    svg.line(x0, y1, x1, y1, "#888")
    svg.legend(x0, y1 + 40, [n for n, _ in series], PALETTE, per_row=3)
    svg.save(path)


def hbars(path, title, caption, labels, values, xlabel, log=False, width=760, row=26):
    height = 104 + row * len(labels) + 30
    svg = Svg(width, height)
    svg.header(title, caption)
    x0, x1, y0 = 290, width - 70, 76
    top = max(values)
    if log:
        lo, hi = 0, math.ceil(math.log10(top))
        xpos = lambda v: x0 + (math.log10(max(v, 1)) - lo) / (hi - lo) * (x1 - x0)
        ticks = [10 ** e for e in range(lo, hi + 1)]
    else:
        top = nice_ceiling(top * 1.1)
        xpos = lambda v: x0 + v / top * (x1 - x0)
        ticks = [nice_step(top) * i for i in range(int(round(top / nice_step(top))) + 1)]
    yb = y0 + row * len(labels)
    for t in ticks:
        x = xpos(t)
        svg.line(x, y0 - 4, x, yb, "#e5e5e5")
        svg.text(x, yb + 14, fmt_tick(t), anchor="middle", size=10, color="#555")
    svg.text((x0 + x1) / 2, yb + 30, xlabel, anchor="middle", size=11)
    for i, (label, v) in enumerate(zip(labels, values)):
        y = y0 + i * row
        svg.text(x0 - 8, y + row * 0.62, label, anchor="end", size=11)
        svg.rect(x0, y + 3, xpos(v) - x0, row - 8, PALETTE[i % len(PALETTE)], f"{label}: {fmt(v)}")
        svg.text(xpos(v) + 5, y + row * 0.62, fmt(v), size=10)
    svg.save(path)


def line_chart(path, title, caption, xs, series, ylabel, width=760, height=400, notes=None):
    svg = Svg(width, height)
    svg.header(title, caption)
    x0, x1, y0, y1 = 70, width - 30, 84, height - 80
    top = nice_ceiling(max(v for _, vs in series for v in vs if v is not None) * 1.1)
    pos = value_axis(svg, x0, y0, x1, y1, top, label=ylabel)
    step = (x1 - x0) / max(len(xs) - 1, 1)
    xpos = lambda i: x0 + 20 + i * (step - 40 / max(len(xs) - 1, 1))
    for i, x in enumerate(xs):
        svg.text(xpos(i), y1 + 16, str(x), anchor="middle", size=11)
    for s, (name, vs) in enumerate(series):
        color = PALETTE[s % len(PALETTE)]
        pts = [(xpos(i), pos(v)) for i, v in enumerate(vs) if v is not None]
        svg.polyline(pts, color)
        for (x, y), v in zip(pts, [v for v in vs if v is not None]):
            svg.circle(x, y, 3.5, color, f"{name}: {fmt(v)}")
    svg.line(x0, y1, x1, y1, "#888")
    svg.legend(x0, y1 + 40, [n for n, _ in series], PALETTE, per_row=3)
    if notes:
        svg.text(x1, y1 + 36, notes, anchor="end", size=10, color="#555")
    svg.save(path)


def stacked_hbars(path, title, caption, rows, parts, xlabel, width=760):
    """rows: [(label, [value per part])]; parts: the part names."""
    row = 34
    legend_rows = (len(parts) + 2) // 3
    height = 94 + row * len(rows) + 40 + legend_rows * 18 + 10
    svg = Svg(width, height)
    svg.header(title, caption)
    x0, x1, y0 = 180, width - 60, 76
    top = nice_ceiling(max(sum(vs) for _, vs in rows) * 1.05)
    xpos = lambda v: x0 + v / top * (x1 - x0)
    yb = y0 + row * len(rows)
    step = nice_step(top)
    for i in range(int(round(top / step)) + 1):
        t = step * i
        svg.line(xpos(t), y0 - 4, xpos(t), yb, "#e5e5e5")
        svg.text(xpos(t), yb + 14, fmt_tick(t), anchor="middle", size=10, color="#555")
    svg.text((x0 + x1) / 2, yb + 30, xlabel, anchor="middle", size=11)
    for r, (label, vs) in enumerate(rows):
        y = y0 + r * row
        svg.text(x0 - 8, y + row * 0.6, label, anchor="end", size=11)
        x = x0
        for p, v in enumerate(vs):
            w = xpos(v) - x0
            svg.rect(x, y + 4, w, row - 10, PALETTE[p % len(PALETTE)], f"{parts[p]}: {fmt(v)}")
            x += w
        svg.text(x + 5, y + row * 0.6, fmt(sum(vs)), size=10)
    svg.legend(24, yb + 52, parts, PALETTE, per_row=3, col_width=240)
    svg.save(path)


# ---- the figures ----------------------------------------------------------

def fig_store(data, out):
    c, py = data.get("store_file"), data.get("cuda_core_store")
    if not c:
        return
    rows = c["results"]["sizes"]
    groups = [f"{r['entries']:,} entries" for r in rows]
    series = [("progcache hit", [r["hit_median_us"] for r in rows]),
              ("progcache hit, no SHA-256 check", [r["hit_noverify_median_us"] for r in rows])]
    if py:
        by = {r["entries"]: r for r in py["results"]["sizes"]}
        series.append(("cuda.core hit", [by.get(r["entries"], {}).get("hit_median_us") for r in rows]))
    series.append(("progcache miss", [r["miss_median_us"] for r in rows]))
    if py:
        series.append(("cuda.core miss", [by.get(r["entries"], {}).get("miss_median_us") for r in rows]))
    grouped_bars(os.path.join(out, "store_latency.svg"),
                 "The file store: a lookup, median (µs; lower is better)", caption_of(c, py),
                 groups, series, "µs")
    cap = c["results"].get("capped")
    if cap:
        labels = [f"progcache, fsync, {cap['entries']:,} entries",
                  f"progcache, no fsync, {cap['entries']:,} entries"]
        values = [cap["puts_per_s_fsync"], cap["puts_per_s_nofsync"]]
        if py:
            for r in py["results"]["capped"]:
                labels.append(f"cuda.core, {r['entries']:,} entries")
                values.append(r["puts_per_s"])
        hbars(os.path.join(out, "store_capped_puts.svg"),
              "New puts into a full cache (puts/s, log scale; higher is better)",
              caption_of(c, py), labels, values, "puts per second", log=True)


def fig_single_flight(data, out):
    d = data.get("single_flight")
    if not d:
        return
    modes = d["results"]["modes"]
    labels = [f"{m['mode']} ({m['compiles_median']:.0f} compile{'s' if m['compiles_median'] != 1 else ''})"
              for m in modes]
    hbars(os.path.join(out, "single_flight.svg"),
          f"{d['results']['procs']} processes, one kernel, an empty cache: time until all have it (ms)",
          caption_of(d), labels, [m["wall_ms_median"] for m in modes], "milliseconds")


def fig_redis(data, out):
    d = data.get("redis")
    if not d:
        return
    tiers = d["results"]["tiers"]
    series = [("hit", [t["hit_median_us"] for t in tiers]),
              ("miss", [t["miss_median_us"] for t in tiers]),
              ("queued put (returns)", [t.get("queued_put_median_us") for t in tiers])]
    grouped_bars(os.path.join(out, "remote_latency.svg"),
                 "Each tier: a get or a put, median (µs; lower is better)", caption_of(d),
                 [t["tier"] for t in tiers], series, "µs")


def fig_sample(data, out):
    d = data.get("sample_compare")
    if not d:
        return
    for case in d["results"]["cases"]:
        if not case["case"].startswith("HIT, M=N=K=512"):
            continue
        ms = [m for m in case["metrics"] if m["unit"] == "ms" and m["metric"] != "kernel time"]
        grouped_bars(os.path.join(out, "sample_hit.svg"),
                     "persistentProgramCache, a HIT in a fresh process (ms; lower is better)",
                     caption_of(d) + "; medians of %d runs" % case["runs"],
                     [m["metric"] for m in ms],
                     [("C (progcache)", [m["c"] for m in ms]),
                      ("Python (cuda.core)", [m["python"] for m in ms])], "ms")


def fig_hit_anatomy(data, out):
    d = data.get("hit_anatomy")
    if not d:
        return
    rounds = d["results"]["rounds"]
    parts = [s["step"] for s in rounds[0]["steps"]]
    rows = [(r["round"], [s["us"] for s in r["steps"]]) for r in rounds]
    stacked_hbars(os.path.join(out, "hit_anatomy.svg"),
                  "Where a hit goes, step by step (µs, medians of fresh processes)",
                  caption_of(d), rows, parts, "microseconds")


def fig_headers(data, out):
    d, m = data.get("headers"), data.get("headers_memory")
    if not d and not m:
        return
    runs = [(x["results"]["tier"], x["results"]["programs"]) for x in (d, m) if x]
    counts = [p["headers"] for p in runs[0][1]]
    labels = ["none" if n == 0 else "%d" % n for n in counts]
    series = [(tier, [next((p["median_us"] for p in progs if p["headers"] == n), None)
                      for n in counts]) for tier, progs in runs]
    grouped_bars(os.path.join(out, "headers_hit.svg"),
                 "A hit of a program that includes N header files (µs, median, log scale)",
                 caption_of(d, m), labels, series, "µs", log=True)


def fig_matmul(data, out):
    d = data.get("matmul")
    if not d:
        return
    sizes = d["results"]["sizes"]
    names = ["tiled 16", "tiled 32", "fast", "autotuned", "cuBLAS + epilogue"]
    series = [(n, [s["tflops"].get(n) for s in sizes]) for n in names]
    line_chart(os.path.join(out, "matmul_tflops.svg"),
               "C = relu(A @ B + bias), FP32, M = N = K: TFLOP/s (higher is better)",
               caption_of(d), [s["size"] for s in sizes], series, "TFLOP/s")


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "bench", "results", "current")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "docs", "perf")
    data = {}
    for path in sorted(glob.glob(os.path.join(src, "*.json"))):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("schema") != 1 or "bench" not in doc:
            print("skipped (not a benchmark's output):", path)
            continue
        if doc["bench"] == "hit_anatomy" and doc["results"].get("heap_warm"):
            continue  # the warm-heap diagnostic is not a figure
        data[doc["bench"]] = doc
    if not data:
        sys.exit(f"plot_perf: no benchmark output (*.json with a \"bench\" field) in {src}")
    os.makedirs(out, exist_ok=True)
    for fig in (fig_store, fig_single_flight, fig_redis, fig_sample, fig_hit_anatomy, fig_matmul,
                fig_headers):
        fig(data, out)


if __name__ == "__main__":
    main()
