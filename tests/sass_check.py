"""Which matrix instructions the built FCGP kernels use (issue 4: the tf32, bf16 and fp16 paths
on tensor cores, HGMMA where wgmma is used), read off the extension's SASS.

    python tests/sass_check.py [path/to/_C*.so]    (default: the built extension)
    python tests/sass_check.py --mix REGEX [so]     the instruction mix of the kernels whose
                                                    demangled name matches REGEX (no check)
    python tests/sass_check.py --sites REGEX [so]   where their local-memory accesses lie: each
                                                    LDL/STL with the opcodes around it and whether
                                                    it is in the HGMMA loop's span (no check)

Runs `cuobjdump -sass` (CUDA toolkit; none on a machine without it: exit 2), groups the
instructions by kernel, and prints a line per FCGP GEMM kernel: HGMMA, HMMA, FFMA/DFMA counts
and local-memory accesses (LDL/STL: spills). Exit 1 when a kernel breaks its rule:
  - fc::fcgp::sm90 fwd_tma_kernel (Hopper forward), gz_tma_kernel, gw_tma_kernel and
    gw_pseq_kernel (its input and weight gradients): HGMMA;
  - fc::fcgp fwd_kernel / gz_kernel / gw_kernel with MODE tf32, bf16 or fp16: HMMA present;
Local-memory accesses are listed as notes (known: the fp64 gz of Cl(1,3) and Cl(4,0), and a
few bytes of the bf16 Hopper forward's producer state; NOTES_FCGP.md), not failures.
"""

import collections
import glob
import re
import shutil
import subprocess
import sys
from pathlib import Path

MODES = {0: "fma", 1: "tf32", 2: "bf16", 3: "f16"}
GEMM = re.compile(r"fc::fcgp::(?:sm90::)?((?:fwd|gz|gw)_tma_kernel|gw_pseq_kernel|fwd_kernel|gz_kernel|gw_kernel)"
                  r"<(\d+), ([^,>]+)(?:, (\d+))?")


def sass_by_kernel(so):
    """{(kernel, arch): its opcodes in program order}."""
    text = subprocess.run(["cuobjdump", "-sass", so], capture_output=True, text=True, check=True).stdout
    ops, name, arch = {}, None, None
    for line in text.splitlines():
        if line.strip().startswith("code for sm_"):
            arch = line.split()[-1]
        elif "Function :" in line:
            name = line.split("Function :", 1)[1].strip()
            ops[(name, arch)] = []
        elif name is not None:
            m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
            if m:
                ops[(name, arch)].append(m.group(1))
    return ops


def demangle(names):
    if not shutil.which("c++filt"):
        return dict(zip(names, names, strict=True))
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return dict(zip(names, out.stdout.splitlines(), strict=True))


def print_mix(counts, names, pattern, top=25):
    """The most frequent opcodes of each kernel whose demangled name matches pattern."""
    found = 0
    for (mangled, arch), c in sorted(counts.items(), key=lambda kv: names[kv[0][0]]):
        if re.search(pattern, names[mangled]):
            found += 1
            total = sum(c.values())
            print(f"{arch} {names[mangled][:160]}: {total} instructions")
            print("  " + "  ".join(f"{op} {n}" for op, n in c.most_common(top)))
    return 0 if found else 1


def print_sites(seqs, names, pattern, around=4):
    """Each local-memory access of the kernels matching pattern, with its neighbours, and whether it
    lies between the kernel's first and last HGMMA (the main loop) or outside (set-up, producer,
    epilogue)."""
    found = 0
    for (mangled, arch), ops in sorted(seqs.items(), key=lambda kv: names[kv[0][0]]):
        if not re.search(pattern, names[mangled]):
            continue
        found += 1
        hg = [i for i, op in enumerate(ops) if op == "HGMMA"]
        lo, hi = (hg[0], hg[-1]) if hg else (-1, -1)
        sites = [i for i, op in enumerate(ops) if op in ("LDL", "STL")]
        print(f"{arch} {names[mangled][:160]}: {len(ops)} instructions, HGMMA {lo}-{hi}, {len(sites)} LDL/STL")
        for i in sites:
            where = "inside" if lo <= i <= hi else "outside"
            print(f"  {i:6} {ops[i]} {where}: {' '.join(ops[max(0, i - around):i + around + 1])}")
    return 0 if found else 1


def main(argv):
    mix = sites = None
    if argv[:1] == ["--mix"] and len(argv) >= 2:
        mix, argv = argv[1], argv[2:]
    elif argv[:1] == ["--sites"] and len(argv) >= 2:
        sites, argv = argv[1], argv[2:]
    if not shutil.which("cuobjdump"):
        print("sass_check: no cuobjdump on this machine")
        return 2
    root = Path(__file__).resolve().parent.parent
    so = argv[0] if argv else (glob.glob(str(root / "flashclifford" / "_C*.so")) or [None])[0]
    if so is None:
        print("sass_check: no built extension (flashclifford/_C*.so)")
        return 2
    seqs = sass_by_kernel(so)
    names = demangle([n for n, _ in seqs])
    if sites is not None:
        return print_sites(seqs, names, sites)
    counts = {k: collections.Counter(ops) for k, ops in seqs.items()}
    if mix is not None:
        return print_mix(counts, names, mix)
    bad, notes, rows = [], [], []
    for (mangled, arch), c in sorted(counts.items(), key=lambda kv: names[kv[0][0]]):
        full = names[mangled]
        m = GEMM.search(full)
        if not m:
            continue
        kind, alg, etype, mode = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        hopper = kind.endswith("_tma_kernel") or kind == "gw_pseq_kernel"
        if hopper:  # <ID, MODE, ...>: the mode is the second parameter
            mode, etype = int(etype), None
        mode = int(mode) if mode is not None else 0
        hg, hm = c["HGMMA"], c["HMMA"]
        fma = c["FFMA"] + c["DFMA"]
        local = c["LDL"] + c["STL"]
        rows.append(f"{arch:7} {kind:15} alg {alg} {MODES.get(mode, mode):5} {etype or '':16} "
                    f"HGMMA {hg:4} HMMA {hm:4} FMA {fma:6} LDL/STL {local:3}")
        if hopper and hg == 0:
            bad.append(f"{full}: no HGMMA")
        elif not hopper and mode in (1, 2, 3) and hm == 0:
            bad.append(f"{full}: no HMMA")
        if local:
            notes.append(f"{full} ({arch}): {local} local-memory accesses")
    print("\n".join(rows))
    kinds = collections.Counter(r.split()[1] for r in rows)
    print(f"sass_check: {len(rows)} FCGP GEMM kernels ({dict(kinds)}), {len(bad)} problems")
    for b in bad:
        print("  problem: " + b)
    for n in notes:
        print("  note: " + n)
    if not rows:
        print("sass_check: no FCGP GEMM kernel found (a CUDA build?)")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
