"""The regression check: `python -m flashclifford.bench compare old.json new.json`.

Rows are matched on sweep.KEY (op, algebra, dtype, precision, normalize, pass, batch,
features, impl). For each pair the ratio new / old of the median time is printed; a ratio
above 1 + threshold is a regression, and so is a row that ran before and fails now (OOM or
error). The exit code is 1 when there is any regression, else 0. By default only the
flashclifford rows are compared (the baselines move with torch, not with this code).
"""

from __future__ import annotations

import math
import statistics

from . import report
from .impls import OURS
from .sweep import KEY


def _key(r):
    return tuple(str(r.get(k)) for k in KEY)


def compare(old_path, new_path, threshold=0.10, impls=(OURS,), out=print):
    """Print the per-cell table; return the exit code (1: regression)."""
    old_rows, _ = report.load(old_path)
    new_rows, _ = report.load(new_path)
    old = {_key(r): r for r in old_rows if not impls or r["impl"] in impls}
    new = {_key(r): r for r in new_rows if not impls or r["impl"] in impls}
    common = [k for k in old if k in new]
    lines = [("op", "algebra", "dtype", "pass", "B", "N", "impl", "old us", "new us", "new/old", "")]
    ratios, regressions = [], 0
    for k in common:
        o, n = old[k], new[k]
        flag, ratio = "", None
        if o["status"] == "ok" and n["status"] == "ok" and o.get("time_us") and n.get("time_us") is not None:
            ratio = n["time_us"] / o["time_us"]
            ratios.append(ratio)
            if ratio > 1.0 + threshold:
                flag = "SLOWER"
        elif o["status"] == "ok" and n["status"] != "ok":
            flag = "FAILS NOW: " + n["status"][:30]
        if flag:
            regressions += 1
        dtype = n["dtype"] + (f"/{n['precision']}" if n.get("precision") else "")
        lines.append(
            (
                n["op"],
                n["algebra"],
                dtype,
                n["pass"],
                str(n["batch"]),
                str(n["features"]),
                n["impl"],
                _us(o),
                _us(n),
                "-" if ratio is None else f"{ratio:.3f}",
                flag,
            )
        )
    widths = [max(len(x[i]) for x in lines) for i in range(len(lines[0]))]
    for line in lines:
        out("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
    only_old, only_new = len(old) - len(common), len(new) - len(common)
    if only_old or only_new:
        out(f"unmatched rows: {only_old} only in {old_path}, {only_new} only in {new_path}")
    if ratios:
        spread = max(abs(r - 1.0) for r in ratios)
        out(
            f"{len(ratios)} cells compared: median ratio {statistics.median(ratios):.3f}, "
            f"geomean {math.exp(statistics.fmean(math.log(r) for r in ratios)):.3f}, "
            f"largest deviation {100 * spread:.1f}%"
        )
    else:
        out("no cells in common with a time in both files")
    out(
        f"{regressions} regression(s) over the threshold of {100 * threshold:.0f}%"
        if regressions
        else f"no regression over {100 * threshold:.0f}%"
    )
    return 1 if regressions else 0


def _us(r):
    if r["status"] != "ok" or r.get("time_us") is None:
        return r["status"][:12]
    return f"{r['time_us']:.1f}"
