"""Rank the source lines of one kernel by Nsight Compute's warp stall samples.

    python benchmarks/ncu_source_summary.py REPORT.csv [--top 30]

REPORT.csv is `ncu -i REPORT.ncu-rep --page source --csv --print-source cuda` (gpu_check.sh's
ncu_src_fcgp stage writes it). The page lists each source file's lines with their metrics; this
prints the header it found, each file's share of the samples and the lines with the most
samples, so that a kernel's time can be split between its K loop and its epilogue.
"""

import argparse
import csv
import itertools
import sys


def _num(s):
    try:
        return float(s.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def _opcode(text):
    words = text.strip().split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].rstrip(";") if words else "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--bins", type=int, default=20, help="slices of the instruction sequence")
    args = ap.parse_args(argv)

    rows, header, cols, current = [], None, None, "?"
    with open(args.csv, newline="", errors="replace") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if len(rec) == 1 or rec[0].strip() == "File Name":  # between the tables
                current = rec[-1].strip() or current
                continue
            sampling = [i for i, c in enumerate(rec) if "Warp Stall Sampling (All" in c]
            if sampling and any(c.strip() == "Source" for c in rec):
                header = rec
                src = next(i for i, c in enumerate(rec) if c.strip() == "Source")
                names = ("#", "Line", "Line No", "Address")
                num = next((i for i, c in enumerate(rec) if c.strip() in names), None)
                cols = (num, src, sampling[0])
                continue
            if cols is None or len(rec) <= max(c for c in cols if c is not None):
                continue
            num, src, smp = cols
            rows.append((current, rec[num] if num is not None else "", rec[src], _num(rec[smp])))

    if header is None:
        print("no table with 'Warp Stall Sampling (All Samples)' found; the file begins:")
        with open(args.csv, errors="replace") as f:
            for line in itertools.islice(f, 20):
                print("  " + line.rstrip()[:160])
        return 1
    total = sum(r[3] for r in rows) or 1.0
    print("columns:", ", ".join(h.strip() for h in header)[:400])
    print(f"instructions or lines: {len(rows)}, samples: {total:.0f}")

    print("by opcode:")
    ops = {}
    for _, _, text, s in rows:
        ops[_opcode(text)] = ops.get(_opcode(text), 0.0) + s
    for op, s in sorted(ops.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {100 * s / total:5.1f}%  {op}")

    print("barriers and syncs along the sequence (index: cumulative share before it):")
    cum = 0.0
    for i, (_, _, text, s) in enumerate(rows):
        op = _opcode(text)
        if op.startswith(("BAR", "UCGABAR", "WARPGROUP.ARRIVE", "EXIT")) or "SYNCS.ARRIVE" in op:
            print(f"  {i:5d}: {100 * cum / total:5.1f}%  {text.strip()[:70]}")
        cum += s

    n = len(rows)
    print(f"along the sequence, {args.bins} slices:")
    for b in range(args.bins):
        lo, hi = b * n // args.bins, (b + 1) * n // args.bins
        part = rows[lo:hi]
        s = sum(r[3] for r in part)
        top = {}
        for _, _, text, _ in part:
            top[_opcode(text)] = top.get(_opcode(text), 0) + 1
        common = ", ".join(op for op, _ in sorted(top.items(), key=lambda kv: -kv[1])[:4])
        print(f"  [{lo:5d}, {hi:5d})  {100 * s / total:5.1f}%  {common}")

    print(f"top {args.top}:")
    index = {id(r): i for i, r in enumerate(rows)}
    for r in sorted(rows, key=lambda r: -r[3])[: args.top]:
        fname, n_, text, s = r
        print(f"  {100 * s / total:5.1f}%  #{index[id(r)]:<5} {n_:<8} {text.strip()[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
