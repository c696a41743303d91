#!/usr/bin/env bash
# Session 30's first look: each kernel's start and end within one forward and one backward call
# (fcgp_parts.py --timeline) under the programmatic chain and in plain order, issue 4's four cells.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ "${SKIP_BUILD:-0}" = 1 ] || { STAGES=build timeout 400 bash tests/gpu_check.sh | tail -n 2; }
for pdl in 1 0; do
    echo "=== FLASHCLIFFORD_FCGP_BWD_PDL=$pdl"
    FLASHCLIFFORD_FCGP_BWD_PDL=$pdl timeout 150 python3 benchmarks/fcgp_parts.py --timeline --reps 10 2>&1 |
        grep -v -i warn | tee "$R/timeline_pdl$pdl.txt"
done
