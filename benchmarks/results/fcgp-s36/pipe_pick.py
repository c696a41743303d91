"""The FLASHCLIFFORD_FCGP_FWD_PIPE value (0-3) whose forward kernels sum to the least time over the
cells of fcgp_ab.sh's parts files in a folder (parts_FWD_PIPE-<v>*.txt, runs averaged): 1 is 0
outside Cl(2,0), and 3 is 1 at Cl(2,0) and 2 elsewhere, as fcgp_sm90a.cu's fwd_pipe reads them.
Prints the value, then each value's sum (us) on stderr."""

import collections
import glob
import re
import sys

folder = sys.argv[1]
times = collections.defaultdict(list)  # (mode, cell) -> forward kernel us of each run
for path in glob.glob(f"{folder}/parts_FWD_PIPE-*.txt"):
    mode = int(re.search(r"parts_FWD_PIPE-(\d)", path).group(1))
    cell = None
    for line in open(path):
        m = re.match(r"(Cl\(\d,\d\) \w+) +\S+ +forward ", line)
        if m:
            cell = m.group(1)
        m = re.search(r"fwd_tma_kernel +x1 +([\d.]+) us", line)
        if m and cell:
            times[mode, cell].append(float(m.group(1)))
cells = sorted({c for _, c in times})
mean = {k: sum(v) / len(v) for k, v in times.items()}


def at(value, cell):
    two = cell.startswith("Cl(2,0)")  # where two register sets fit
    mode = {0: 0, 1: 1 if two else 0, 2: 2, 3: 1 if two else 2}[value]
    return mean.get((mode, cell))


sums = {}
for value in range(4):
    parts = [at(value, c) for c in cells]
    if cells and None not in parts:
        sums[value] = sum(parts)
for value, total in sorted(sums.items()):
    print(f"FWD_PIPE={value}: forward kernels {total:.1f} us over {len(cells)} cells", file=sys.stderr)
print(min(sums, key=sums.get) if sums else 1)
