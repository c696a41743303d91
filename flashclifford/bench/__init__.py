"""The benchmark sweep harness: ``python -m flashclifford.bench``.

Times the fused ops (sgp, fcgp, the nn.Layer) against the torch baselines over a grid of
batch x feature sizes, per algebra, dtype, precision and pass, and writes a console table,
a long-format CSV, a JSON file with the run's provenance, and heatmaps.

  cli.py      the command line (run, ``compare OLD NEW``, ``plot RESULTS``)
  sweep.py    the cells, what is measured per cell, the column definitions
  timing.py   how time, host overhead and copy bandwidth are measured
  impls.py    the implementations and their inputs
  report.py   CSV / JSON / console table; compare.py the regression check; plots.py heatmaps
  env.py      device, versions, commit

torch is optional: without it (or with ``--framework numpy``) the harness times
``flashclifford.ops`` on NumPy arrays on the CPU against the NumPy float64 einsum.
"""

from .cli import main
from .compare import compare
from .sweep import COLUMNS, KEY, Settings, Sweep

__all__ = ["main", "compare", "Settings", "Sweep", "COLUMNS", "KEY"]
