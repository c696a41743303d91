"""Writing and reading results: long-format CSV, JSON (rows + metadata), the console table.

JSON layout: {"schema": SCHEMA, "meta": {...}, "rows": [...]}; each row has the CSV columns
(sweep.COLUMNS) plus "times_us" (every repetition, microseconds), "errors" (max abs and
relative error of the output and of each gradient) and, where measured, "parts" and
"new_graphs" (sweep.py). The CSV holds the same rows without those. meta.settings.compile
is the compiled baseline's --compile mode (static / dynamic), meta.settings.compile_ours
whether our layer ran under torch.compile. Plots and compare read either file.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from .impls import BASELINES, OURS
from .sweep import COLUMNS, FWD_BWD

SCHEMA = "flashclifford-bench/1"


def _clean(v):
    """JSON has no NaN/inf: write them as null / strings."""
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def write_json(path, rows, meta):
    path = Path(path)
    path.write_text(json.dumps(_clean({"schema": SCHEMA, "meta": meta, "rows": rows}), indent=1) + "\n")
    return path


def write_csv(path, rows):
    path = Path(path)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(r.get(k)) for k in COLUMNS})
    return path


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.6g}"
    return v


_INT = {"batch", "features", "reps"}
_BOOL = {"normalize", "host_ok", "err_ok"}
_STR = {
    "op",
    "algebra",
    "dtype",
    "precision",
    "pass",
    "impl",
    "status",
    "device",
    "device_name",
    "framework",
    "cache",
    "commit",
    "flashclifford",
    "torch",
    "timestamp",
}


def _parse_csv_value(k, v):
    if k in _STR:
        return v
    if v == "":
        return None
    if k in _BOOL:
        return v == "True"
    if k in _INT:
        return int(v)
    try:
        return float(v)
    except ValueError:
        return v


def load(path):
    """(rows, meta) from a results JSON or CSV file."""
    path = Path(path)
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            rows = [{k: _parse_csv_value(k, v) for k, v in r.items()} for r in csv.DictReader(f)]
        return rows, {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or "rows" not in data:
        raise ValueError(f"{path}: not a flashclifford bench result (no 'rows')")
    return data["rows"], data.get("meta", {})


# --- console ----------------------------------------------------------------------------------


def _fmt(v, spec):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def _time(r):
    if r is None:
        return "-"
    if r["status"] != "ok":
        return r["status"][:12]
    return f"{r['time_us']:.1f} [{r['time_p20_us']:.0f}-{r['time_p80_us']:.0f}]"


def _vs(r):
    if r is None:
        return ""
    if r["status"] != "ok":
        return "OOM" if r["status"] == "OOM" else "err"
    if r.get("speedup") is None:  # our op failed in this cell: show the baseline's own time
        return f"({r['time_us']:.0f} us)"
    return f"{r['speedup']:.2f}x"


COMPILE_NOTE = {
    "static": "static (torch.compile dynamic=False: a graph per shape)",
    "dynamic": "dynamic (one graph per configuration, batch and feature sizes symbolic)",
}


def compile_line(meta):
    """The header line naming how torch.compile was used, or None when nothing was compiled."""
    st = (meta or {}).get("settings") or {}
    compiled = "compiled" in (st.get("baselines") or [])
    if not (compiled or st.get("compile_ours")):
        return None
    mode = st.get("compile", "static")
    line = f"compile: {COMPILE_NOTE.get(mode, mode)}"
    if st.get("compile_ours"):
        line += "; flashclifford layer under torch.compile(fullgraph=True)"
    if meta.get("dynamo_graphs") is not None:
        line += f"; {meta['dynamo_graphs']} graphs captured"
    return line


def console_table(rows, meta=None):
    """One line per cell and pass: our time [p20-p80] (us), host us, speedup over each
    baseline (baseline time / ours), the roofline column, memory in passes, relative error,
    and for layer forward rows our time over its parts (vs parts)."""
    groups, order = {}, []
    for r in rows:
        key = (
            r["op"],
            r["algebra"],
            r["dtype"],
            r["precision"],
            r["normalize"],
            r["pass"],
            r["batch"],
            r["features"],
        )
        if key not in groups:
            groups[key] = {}
            order.append(key)
        groups[key][r["impl"]] = r
    present = [b for b in BASELINES if any(b in g for g in groups.values())]
    einsum_np = any("einsum" in g and g["einsum"].get("framework") == "numpy" for g in groups.values())
    head = ["op", "algebra", "dtype", "pass", "B", "N", "flashclifford us [p20-p80]", "host us"]
    head += [f"vs {b}" + ("-np" if b == "einsum" and einsum_np else "") for b in present]
    head += ["roofline", "mem", "rel err"]
    parts = any(r.get("vs_parts") is not None for r in rows)
    if parts:
        head.append("vs parts")
    lines = [head]
    for key in order:
        g = groups[key]
        ours = g.get(OURS)
        op, alg, dtype, prec, _norm, p, B, N = key
        roof = "-"
        if ours is not None and ours["status"] == "ok":
            if ours.get("frac_copy_bw") is not None:
                roof = f"{100 * ours['frac_copy_bw']:.0f}% copy"
            elif ours.get("bmm_ratio") is not None:
                roof = f"{ours['bmm_ratio']:.2f}x bmm" + ("x3" if p == FWD_BWD else "")
        err = "-"
        if ours is not None and ours.get("err_rel") is not None:
            err = _fmt(ours["err_rel"], ".1e") + ("" if ours.get("err_ok") else " FAIL")
        mem = _fmt(ours.get("mem_passes") if ours else None, ".2f")
        line = [
            op,
            alg,
            dtype + (f"/{prec}" if prec else ""),
            "fwd" if p == "forward" else "fwd+bwd",
            str(B),
            str(N),
            _time(ours),
            _fmt(ours.get("host_us") if ours else None, ".1f"),
        ]
        line += [_vs(g.get(b)) for b in present]
        line += [roof, mem, err]
        if parts:
            vs = ours.get("vs_parts") if ours is not None and ours["status"] == "ok" else None
            line.append("-" if vs is None else f"{vs:.2f}x")
        lines.append(line)
    widths = [max(len(str(x[i])) for x in lines) for i in range(len(head))]
    out = []
    if meta:
        bw = meta.get("copy_bandwidth", {}).get("bytes_per_s")
        dev = meta.get("gpu") or meta.get("cpu")
        out.append(f"device: {dev}" + (f"  copy bandwidth {bw / 1e9:.1f} GB/s" if bw else ""))
        if compile_line(meta):
            out.append(compile_line(meta))
    for i, line in enumerate(lines):
        out.append(
            "  ".join(
                str(x).rjust(w) if i and j >= 4 else str(x).ljust(w)
                for j, (x, w) in enumerate(zip(line, widths, strict=True))
            )
        )
    out.append(
        "vs X: X's time / flashclifford's (>1: fused op faster); mem: peak extra memory in passes "
        "over D*B*N; roofline: SGP bytes/s as % of copy bandwidth, FCGP time over torch.bmm"
        + ("; vs parts: layer forward time / (grade_linear + fused op, each timed alone)" if parts else "")
    )
    return "\n".join(out)
