"""Figure: the fully connected geometric product (FCGP) in Cl(2,0) and Cl(3,0): float32 with
tf32 matrix products, and bfloat16; forward and forward+backward, against the torch baselines
and against torch.bmm doing the same T' products in the same precision (the bmm_ratio column).

    python benchmarks/fcgp.py [more harness flags, e.g. --precision highest tf32 bf16, --compile dynamic]

Results go to benchmarks/results/fcgp/.
"""

import sys
from pathlib import Path

from flashclifford.bench import main

ARGS = [
    "--op",
    "fcgp",
    "--algebra",
    "2",
    "3",
    "--dtype",
    "float32",
    "bfloat16",
    "--precision",
    "tf32",
    "--out",
    str(Path(__file__).resolve().parent / "results" / "fcgp"),
]

if __name__ == "__main__":
    sys.exit(main(ARGS + sys.argv[1:]))
