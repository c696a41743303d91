"""Rules about the C and CUDA sources that no compiler warning enforces.

An `if constexpr` whose body is not braced and opens with a `#pragma` line (`#pragma unroll` before
a loop) lost the statement after it with nvcc 13.0 where the condition was false, inside a lambda
of a template: the front end dropped that statement with the discarded branch. In session 40 it
took the barrier before gz's epilogue out of one kernel (racecheck hazards, wrong gradients;
benchmarks/NOTES_FCGP.md), without a warning. So such bodies are braced, everywhere.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for ext in ("c", "h", "cu", "cuh") for p in (ROOT / "csrc").rglob(f"*.{ext}"))
# `if constexpr (...)` or `else if constexpr (...)` ending the line (a trailing comment allowed),
# with no brace after it
UNBRACED_IF_CONSTEXPR = re.compile(r"^\s*(\}\s*)?(else\s+)?if\s+constexpr\s*\(.*\)\s*(/\*.*\*/|//.*)?$")


def unbraced_pragma_bodies(text):
    """(line number, line) of each unbraced `if constexpr` whose next line is a #pragma."""
    lines = text.splitlines()
    return [(i + 1, line.strip()) for i, line in enumerate(lines[:-1])
            if UNBRACED_IF_CONSTEXPR.match(line) and lines[i + 1].lstrip().startswith("#pragma")]


def test_the_rule_finds_the_pattern():
    bad = "    if constexpr (O::EARLY)\n#pragma unroll\n        for (int j = 0; j < 2; ++j)\n"
    good = "    if constexpr (O::EARLY) {\n#pragma unroll\n        for (int j = 0; j < 2; ++j)\n"
    assert unbraced_pragma_bodies(bad) == [(1, "if constexpr (O::EARLY)")]
    assert unbraced_pragma_bodies(good) == []


def test_no_unbraced_if_constexpr_opens_with_a_pragma():
    assert SOURCES, "no sources found under csrc/"
    found = [f"{p.relative_to(ROOT)}:{n}: {line}" for p in SOURCES
             for n, line in unbraced_pragma_bodies(p.read_text())]
    assert not found, "brace these bodies:\n" + "\n".join(found)
