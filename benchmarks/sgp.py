"""Figure: the weighted geometric product (SGP) in Cl(2,0) and Cl(3,0), float32 and bfloat16,
forward and forward+backward, against the compiled, eager and einsum torch baselines.

    python benchmarks/sgp.py [more harness flags, e.g. --quick, --device cpu, -B 4096 -N 512]

Flags given here override the figure's (the last occurrence wins). A sweep on a small GPU
budget: --compile dynamic --reps 30 --max-seconds 0.5 (one compiled-baseline graph per
configuration instead of one per shape). Results go to
benchmarks/results/sgp/ (results.json, results.csv, heatmaps).
"""

import sys
from pathlib import Path

from flashclifford.bench import main

ARGS = [
    "--op",
    "sgp",
    "--algebra",
    "2",
    "3",
    "--dtype",
    "float32",
    "bfloat16",
    "--out",
    str(Path(__file__).resolve().parent / "results" / "sgp"),
]

if __name__ == "__main__":
    sys.exit(main(ARGS + sys.argv[1:]))
