"""Figure: the 16-component algebras Cl(1,3) (Lorentz), Cl(3,0,1) (projective) and Cl(4,0),
SGP and FCGP (tf32), float32, forward and forward+backward, against the torch baselines.

    python benchmarks/algebras16.py [RUN ...] [more harness flags, e.g. --compile dynamic]

One harness run per op and algebra, each to benchmarks/results/algebras16-<run>/, where a run
is named sgp-cl13, sgp-cl301, sgp-cl40, fcgp-cl13, fcgp-cl301 or fcgp-cl40. Leading run names,
or the prefixes sgp and fcgp, select runs (default: all six); the flags reach every run made.
"""

import sys
from pathlib import Path

from flashclifford.bench import main

RESULTS = Path(__file__).resolve().parent / "results"
ALGEBRAS = {"cl13": "Cl(1,3)", "cl301": "Cl(3,0,1)", "cl40": "Cl(4,0)"}
OPS = {"sgp": [], "fcgp": ["--precision", "tf32"]}
RUNS = {
    f"{op}-{short}": ["--op", op, "--algebra", name, "--dtype", "float32", *extra,
                      "--out", str(RESULTS / f"algebras16-{op}-{short}")]
    for op, extra in OPS.items()
    for short, name in ALGEBRAS.items()
}


def select(argv):
    """(run names, remaining flags) from leading run names or op prefixes."""
    names = []
    while argv and (argv[0] in RUNS or argv[0] in OPS):
        word = argv.pop(0)
        names += [r for r in RUNS if r == word or r.startswith(word + "-")]
    return names or list(RUNS), argv


if __name__ == "__main__":
    runs, flags = select(sys.argv[1:])
    sys.exit(max(main(RUNS[r] + flags) for r in runs))
