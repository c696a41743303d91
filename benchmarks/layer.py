"""Figure: flashclifford.nn.Layer (grade-wise linear -> fused product -> norm) against
nn.BaselineLayer (eager and torch.compile) and the einsum layer, in Cl(2,0) and Cl(3,0),
float32 and bfloat16; two runs: the SGP layer and the FCGP layer (--use-fc, tf32).

    python benchmarks/layer.py [more harness flags, e.g. --compile dynamic --compile-ours]

The flags reach both runs. Forward rows carry vs_parts: the layer's time over its parts
(grade_linear plus the fused op, each timed alone); --compile-ours times our Layer under
torch.compile(fullgraph=True). Results go to benchmarks/results/layer/ and benchmarks/results/layer-fc/.
"""

import sys
from pathlib import Path

from flashclifford.bench import main

RESULTS = Path(__file__).resolve().parent / "results"
COMMON = ["--op", "layer", "--algebra", "2", "3", "--dtype", "float32", "bfloat16"]
RUNS = [
    COMMON + ["--out", str(RESULTS / "layer")],
    COMMON + ["--use-fc", "--precision", "tf32", "--out", str(RESULTS / "layer-fc")],
]

if __name__ == "__main__":
    sys.exit(max(main(args + sys.argv[1:]) for args in RUNS))
