"""Which FLASHCLIFFORD_FCGP_FWD_WMN setting call F's bench runs under, from fcgp_ab.sh's parts files
in the folder given: the forward op times of the bf16 cells under WMN=1 (two runs), 0 and 2. Prints
1 if reading W as stored is no slower in either cell, else 2 if it is faster at Cl(2,0), else 0.
In call F its pattern lacked the parts lines' "4096x512" and runs of spaces, so every time read as
missing and it printed 1 (fixed since: on callF/'s files it prints 2)."""

import re
import sys
from pathlib import Path


def forwards(path):
    """{algebra: forward op us} of one parts file."""
    out = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"(Cl\(\d,0\)) bfloat16\s+(?:\d+x\d+\s+)?forward\s+([\d.]+) us", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def main(folder):
    runs = {}
    for f in Path(folder).glob("parts_*.txt"):
        m = re.search(r"WMN-(\d)", f.name)
        if m:
            runs.setdefault(m.group(1), []).append(forwards(f))

    def best(setting, alg):
        times = [r[alg] for r in runs.get(setting, []) if alg in r]
        return min(times) if times else float("inf")

    if best("1", "Cl(3,0)") <= best("0", "Cl(3,0)") and best("1", "Cl(2,0)") <= best("0", "Cl(2,0)"):
        return "1"
    if min(best("2", "Cl(2,0)"), best("1", "Cl(2,0)")) < best("0", "Cl(2,0)"):
        return "2"
    return "0"


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "gpu_check_out"))
