#!/usr/bin/env python3
"""Summarizes Nsight Compute's per-instruction source page (`ncu -i R --page source --csv --print-source sass`).

    python3 bench/dev/ncu_source_summary.py SOURCE.csv [--top N]

Prints the columns the export holds, the warp-state samples per opcode (all samples and those of warps not issued,
and each stall-reason column the export has), then the N instructions holding the most samples, each with its
address, samples and the instructions just before it (a stall is charged to the instruction that waits, so the
one before it often names what it waits for).
"""
import argparse
import collections
import csv
import re
import sys


def number(text):
    try:
        return float(text.replace(",", "")) if text not in ("", None) else 0.0
    except ValueError:
        return 0.0


def opcode(source):
    words = [w for w in source.split() if not w.startswith("@")]
    return words[0].rstrip(";") if words else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    with open(args.csv, newline="") as f:
        lines = [line for line in f if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(lines))
    # The export opens with the kernel's name ("Kernel Name", name), then the header row.
    start = next((i for i, r in enumerate(rows) if any("Address" in n for n in r)), None)
    if start is None:
        sys.exit("no header row (with an Address column) in " + args.csv)
    head, body = rows[start], [r for r in rows[start + 1:] if len(r) == len(rows[start])]
    print("columns:", " | ".join(head))
    col = {name: i for i, name in enumerate(head)}
    addr = next(i for i, n in enumerate(head) if "Address" in n)
    src = col.get("Source", next(i for i, n in enumerate(head) if "Source" in n))
    sample_cols = [i for i, n in enumerate(head) if "Samples" in n]
    stall_cols = [i for i, n in enumerate(head) if re.search(r"stall", n, re.I) and i not in sample_cols]
    shown = sample_cols + stall_cols
    if not sample_cols:
        sys.exit("no sample columns")
    total = sum(number(r[sample_cols[0]]) for r in body) or 1.0
    print(f"instructions: {len(body)}, samples ({head[sample_cols[0]]}): {total:.0f}")
    reasons = [c for c in stall_cols if "Not Issued" not in head[c]]
    by_reason = {head[c]: sum(number(r[c]) for r in body) for c in reasons}
    stalls = sum(by_reason.values()) or 1.0
    print("stall reasons (share of their samples): " +
          ", ".join(f"{k} {100 * v / stalls:.1f}%" for k, v in sorted(by_reason.items(), key=lambda kv: -kv[1]) if v))

    by_op = collections.defaultdict(lambda: [0.0] * len(shown))
    for r in body:
        acc = by_op[opcode(r[src])]
        for j, c in enumerate(shown):
            acc[j] += number(r[c])
    print("\n== samples by opcode (share of all samples, then each column)")
    print("opcode".ljust(28) + "share  " + "  ".join(head[c][:24].rjust(24) for c in shown))
    for op, acc in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:30]:
        print(op[:28].ljust(28) + f"{100 * acc[0] / total:5.1f}% " + "  ".join(f"{v:24.0f}" for v in acc))

    print(f"\n== the {args.top} instructions with the most samples (three before each)")
    order = sorted(range(len(body)), key=lambda i: -number(body[i][sample_cols[0]]))[: args.top]
    for i in order:
        r = body[i]
        print(f"-- {r[addr]}  {100 * number(r[sample_cols[0]]) / total:5.2f}%  " +
              "  ".join(f"{head[c][:20]}={number(r[c]):.0f}" for c in shown if number(r[c])))
        for j in range(max(0, i - 3), i + 1):
            print(("  > " if j == i else "    ") + body[j][addr] + "  " + body[j][src].strip())


if __name__ == "__main__":
    main()
