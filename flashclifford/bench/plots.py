"""Heatmaps from result rows (never from a live run): speedup and memory ratio of the fused
op over each baseline, batch x features, one PNG per op, algebra, dtype, pass and metric,
one panel per baseline; OOM and failed baseline cells are marked as such.

matplotlib is optional: without it, make_heatmaps returns no files and a note.
`python -m flashclifford.bench plot results.json [--out DIR]` redraws them from a file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from .impls import BASELINES, OURS

PASS_SLUG = {"forward": "fwd", "forward+backward": "fwd-bwd"}  # file names: letters, digits, . _ -
METRICS = {
    "speedup": "speedup (baseline time / flashclifford)",
    "mem_ratio": "memory ratio (baseline / flashclifford)",
}


def _slug(s):
    return re.sub(r"[^A-Za-z0-9.-]+", "_", str(s)).strip("_")


def _groups(rows):
    groups = {}
    for r in rows:
        key = (r["op"], r["algebra"], r["dtype"], r.get("precision") or "", r["normalize"], r["pass"])
        groups.setdefault(key, []).append(r)
    return groups


def make_heatmaps(rows, out_dir):
    """(list of PNG paths, note or None)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "matplotlib is not installed: no heatmaps (pip install matplotlib, then `bench plot`)"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for key, grp in _groups(rows).items():
        op, alg, dtype, prec, norm, p = key
        baselines = [b for b in BASELINES if any(r["impl"] == b for r in grp)]
        if not baselines:
            continue
        Bs = sorted({r["batch"] for r in grp})
        Ns = sorted({r["features"] for r in grp})
        for metric, title in METRICS.items():
            if not any(r.get(metric) is not None for r in grp if r["impl"] != OURS):
                continue  # e.g. memory on the CPU
            fig, axes = plt.subplots(
                1,
                len(baselines),
                figsize=(max(4.5, 1.2 + 1.1 * len(Ns) * len(baselines)), 1.4 + 0.6 * len(Bs)),
                squeeze=False,
            )
            for ax, b in zip(axes[0], baselines, strict=True):
                _panel(ax, grp, b, metric, Bs, Ns)
            norm_text = "" if norm in (True, "True") else " no-norm"
            name = f"{alg} {dtype}{'/' + prec if prec else ''} {op} {p}{norm_text}"
            fig.suptitle(f"{name}\n{title}", fontsize=9)
            fig.tight_layout()
            parts = [op, alg, dtype, prec, PASS_SLUG.get(p, p), "" if norm_text == "" else "no-norm", metric]
            stem = "_".join(_slug(x) for x in parts if x)
            path = out_dir / f"{stem}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            files.append(path)
    return files, None


def _panel(ax, grp, baseline, metric, Bs, Ns):
    import numpy as np

    val = np.full((len(Bs), len(Ns)), np.nan)
    text = [["" for _ in Ns] for _ in Bs]
    for r in grp:
        if r["impl"] != baseline:
            continue
        i, j = Bs.index(r["batch"]), Ns.index(r["features"])
        v = r.get(metric)
        if r["status"] != "ok":
            text[i][j] = "OOM" if r["status"] == "OOM" else "err"
        elif v is None or (isinstance(v, float) and math.isnan(v)):
            text[i][j] = "-"
        else:
            val[i, j] = v
            text[i][j] = f"{v:.2f}"
    # log scale centred on 1: red where the baseline wins, green where the fused op wins
    finite = np.log2(val[np.isfinite(val)]) if np.isfinite(val).any() else np.zeros(1)
    lim = max(1.0, float(np.max(np.abs(finite))))
    ax.imshow(np.log2(val), cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
    for i in range(len(Bs)):
        for j in range(len(Ns)):
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(Ns)), [str(n) for n in Ns])
    ax.set_yticks(range(len(Bs)), [str(b) for b in Bs])
    ax.set_xlabel("features N")
    ax.set_ylabel("batch B")
    ax.set_title(f"vs {baseline}", fontsize=9)
