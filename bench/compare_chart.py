#!/usr/bin/env python3
"""A chart of kernelkit against every baseline, per op and shape, from the JSON of bench/torch_baselines.py and
bench/op_baselines.py: one row per case, a bar from 1 to the fastest baseline's ratio (baseline time / kernelkit time:
green where kernelkit is faster, red where a baseline is) and a dot per baseline, on a log axis. No plotting library:
the SVG is written directly, so the GPU machine (no pip) renders it in the same run as the numbers.

  python3 bench/compare_chart.py RESULTS.json [MORE.json ...] --out compare.svg [--dtype bf16]
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from xml.sax.saxutils import escape

# Baseline colours by name prefix (first match); anything else takes the last one.
PALETTE = [("eager", "#7f7f7f"), ("compile", "#1f77b4"), ("liger", "#9467bd"), ("F.", "#8c564b"),
           ("sdpa flash", "#ff7f0e"), ("sdpa cudnn", "#d62728"), ("sdpa efficient", "#bcbd22"),
           ("torch varlen", "#e377c2"), ("torch._int_mm", "#17becf"), ("", "#2ca02c")]
RATIO_RANGE = (1 / 8, 8)  # ratios outside are drawn at the edge (the label gives the value)
ROW, LABEL_W, PLOT_W, RIGHT_W, TOP = 15, 330, 560, 240, 70


def colour(name):
    return next(c for prefix, c in PALETTE if name.startswith(prefix))


def cases_of(doc, dtype=None):
    """[(group, label, {baseline: ratio})] from either script's JSON; ratio = baseline time / kernelkit time."""
    out = []
    if "results" in doc:  # bench/torch_baselines.py
        for r in doc["results"]:
            if r.get("status") != "ok" or (dtype and r.get("dtype") != dtype):
                continue
            ratios = {n: b["ratio"] for n, b in r.get("baselines", {}).items() if b.get("ratio")}
            if ratios:
                out.append((r["op"], f"{r['label']} {r['dtype']}", ratios))
    for r in doc.get("rows", []):  # bench/op_baselines.py: the planner's own alternatives are not baselines
        ratios = {n: v["time_over_kernelkit"] for n, v in r["impls"].items()
                  if not n.startswith("kernelkit") and v.get("time_over_kernelkit")}
        base = next((n for n in r["impls"] if n.startswith("kernelkit")), "kernelkit")  # what the ratios are over
        if ratios:
            out.append((r["op"], r["shape"] + ("" if base == "kernelkit" else f" ({base})"), ratios))
    return out


def x_of(ratio):
    lo, hi = (math.log2(v) for v in RATIO_RANGE)
    t = (min(max(math.log2(ratio), lo), hi) - lo) / (hi - lo)
    return LABEL_W + t * PLOT_W


def svg(cases, title):
    names = sorted({n for _, _, r in cases for n in r})
    groups = []
    for g, label, ratios in cases:
        if not groups or groups[-1][0] != g:
            groups.append((g, []))
        groups[-1][1].append((label, ratios))
    legend_rows = (len(names) - 1) // 6 if names else 0
    height = TOP + 14 * legend_rows + ROW * (len(cases) + 2 * len(groups)) + 40
    width = LABEL_W + PLOT_W + RIGHT_W
    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
         f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
         f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
         '<text x="10" y="38">bar: the fastest baseline\'s time / kernelkit\'s (right of 1: kernelkit faster); '
         'dots: each baseline</text>']
    for i, n in enumerate(names):  # legend
        x = 10 + (i % 6) * 150
        y = 54 + (i // 6) * 14
        e.append(f'<circle cx="{x + 4}" cy="{y - 4}" r="4" fill="{colour(n)}"/><text x="{x + 12}" y="{y}">'
                 f'{escape(n)}</text>')
    top = TOP + 14 * legend_rows
    for tick in (0.125, 0.25, 0.5, 1, 2, 4, 8):  # axis
        x = x_of(tick)
        e.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 30}" stroke="'
                 f'{"#000" if tick == 1 else "#ddd"}"/><text x="{x:.1f}" y="{height - 16}" text-anchor="middle">'
                 f'{tick:g}x</text>')
    y = top
    for g, rows in groups:
        y += ROW
        e.append(f'<text x="10" y="{y + 11}" font-weight="bold">{escape(g)}</text>')
        y += ROW
        for label, ratios in rows:
            best = min(ratios.values())  # the fastest baseline has the smallest time, so the smallest ratio
            x1, x0 = x_of(best), x_of(1)
            e.append(f'<text x="20" y="{y + 11}">{escape(label)}</text>')
            e.append(f'<rect x="{min(x0, x1):.1f}" y="{y + 3}" width="{abs(x1 - x0):.1f}" height="{ROW - 6}" '
                     f'fill="{"#2ca02c" if best >= 1 else "#d62728"}" opacity="0.35"/>')
            for n, r in sorted(ratios.items()):
                e.append(f'<circle cx="{x_of(r):.1f}" cy="{y + ROW / 2:.1f}" r="3.5" fill="{colour(n)}">'
                         f'<title>{escape(n)}: {r:.2f}x</title></circle>')
            fastest = min(ratios, key=ratios.get)
            e.append(f'<text x="{LABEL_W + PLOT_W + 8}" y="{y + 11}">{best:.2f}x vs {escape(fastest)}</text>')
            y += ROW
    e.append("</svg>")
    return "\n".join(e)


def write_chart(docs, out, dtype=None):
    """Writes the chart of `docs` (parsed JSON of either script) to `out`; returns the number of cases drawn."""
    cases = [c for d in docs for c in cases_of(d, dtype)]
    metas = [d.get("meta", {}) for d in docs]
    commits = ", ".join(dict.fromkeys(m.get("commit") or "?" for m in metas))
    title = (f"kernelkit vs baselines: {metas[0].get('gpu', '?') if metas else '?'}, commit {commits}"
             + (f", {dtype}" if dtype else ""))
    Path(out).write_text(svg(cases, title))
    return len(cases)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", help="only this dtype's rows of bench/torch_baselines.py (op_baselines.py runs one)")
    a = p.parse_args()
    n = write_chart([json.loads(Path(f).read_text()) for f in a.json], a.out, a.dtype)
    print(f"compare_chart: {n} cases -> {a.out}")


if __name__ == "__main__":
    main()
