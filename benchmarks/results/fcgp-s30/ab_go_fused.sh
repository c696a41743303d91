#!/usr/bin/env bash
# Session 30, second GPU call: build, the tests of the one-pass norm statistics + go^T (go_rows) and
# of the chain, then the A/B of its switches in one tree (fcgp_ab.sh: the defaults, go_rows off,
# the forward's PDL off), and the defaults' timeline. Logs straight to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ "${SKIP_BUILD:-0}" = 1 ] || { STAGES=build timeout 400 bash tests/gpu_check.sh | tail -n 2; }
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp_sm90.py \
    -k "go_fused or go_slices or pdl_chain" 2>&1 | tee "$R/pytest_go.log" | tail -n 4
SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=0;FLASHCLIFFORD_FCGP_FWD_PDL=0" PARTS_S=120 \
    timeout 400 bash benchmarks/fcgp_ab.sh 2>&1 | tail -n 80
timeout 90 python3 benchmarks/fcgp_parts.py --timeline --reps 10 2>&1 | grep -v -i warn > "$R/timeline_fused.txt"
grep -E "^Cl|go_rows|go_transpose|norm_stats|gelu_transpose|gw_tma|gz_tma|span" "$R/timeline_fused.txt"
