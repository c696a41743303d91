"""Figure: the 16-component algebras Cl(1,3) (Lorentz), Cl(3,0,1) (projective) and Cl(4,0),
SGP and FCGP (tf32), float32, forward and forward+backward, against the torch baselines.

    python benchmarks/algebras16.py [sgp|fcgp] [more harness flags, e.g. --compile dynamic]

With sgp or fcgp first, only that run; the flags reach every run made.

Results go to benchmarks/results/algebras16-sgp/ and benchmarks/results/algebras16-fcgp/.
"""

import sys
from pathlib import Path

from flashclifford.bench import main

RESULTS = Path(__file__).resolve().parent / "results"
COMMON = ["--algebra", "Cl(1,3)", "Cl(3,0,1)", "Cl(4,0)", "--dtype", "float32"]
RUNS = {
    "sgp": ["--op", "sgp", *COMMON, "--out", str(RESULTS / "algebras16-sgp")],
    "fcgp": ["--op", "fcgp", *COMMON, "--precision", "tf32", "--out", str(RESULTS / "algebras16-fcgp")],
}

if __name__ == "__main__":
    flags = sys.argv[1:]
    runs = [flags.pop(0)] if flags and flags[0] in RUNS else list(RUNS)
    sys.exit(max(main(RUNS[r] + flags) for r in runs))
