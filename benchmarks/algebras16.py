"""Figure: the 16-component algebras Cl(1,3) (Lorentz), Cl(3,0,1) (projective) and Cl(4,0),
SGP and FCGP (tf32), float32, forward and forward+backward, against the torch baselines.

    python benchmarks/algebras16.py [more harness flags, e.g. --compile dynamic; they reach both runs]

Results go to benchmarks/results/algebras16-sgp/ and benchmarks/results/algebras16-fcgp/.
"""

import sys
from pathlib import Path

from flashclifford.bench import main

RESULTS = Path(__file__).resolve().parent / "results"
COMMON = ["--algebra", "Cl(1,3)", "Cl(3,0,1)", "Cl(4,0)", "--dtype", "float32"]
RUNS = [
    ["--op", "sgp", *COMMON, "--out", str(RESULTS / "algebras16-sgp")],
    ["--op", "fcgp", *COMMON, "--precision", "tf32", "--out", str(RESULTS / "algebras16-fcgp")],
]

if __name__ == "__main__":
    sys.exit(max(main(args + sys.argv[1:]) for args in RUNS))
