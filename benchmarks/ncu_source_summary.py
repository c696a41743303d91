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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)

    rows, header, cols, current = [], None, None, "?"
    with open(args.csv, newline="", errors="replace") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if len(rec) == 1:  # a file name or a note between the tables
                current = rec[0].strip() or current
                continue
            sampling = [i for i, c in enumerate(rec) if "Warp Stall Sampling (All" in c]
            if sampling and any(c.strip() in ("Source", "#", "Line") for c in rec):
                header = rec
                src = next(i for i, c in enumerate(rec) if c.strip() == "Source")
                num = next((i for i, c in enumerate(rec) if c.strip() in ("#", "Line")), None)
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
    print("columns:", ", ".join(h.strip() for h in header)[:300])
    print(f"samples: {total:.0f}")
    per_file = {}
    for fname, _, _, s in rows:
        per_file[fname] = per_file.get(fname, 0.0) + s
    for fname, s in sorted(per_file.items(), key=lambda kv: -kv[1]):
        if s > 0:
            print(f"  {100 * s / total:5.1f}%  {fname[-90:]}")
    print(f"top {args.top} lines:")
    for fname, n, text, s in sorted(rows, key=lambda r: -r[3])[: args.top]:
        print(f"  {100 * s / total:5.1f}%  {fname.split('/')[-1][:24]}:{n:<5} {text.strip()[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
