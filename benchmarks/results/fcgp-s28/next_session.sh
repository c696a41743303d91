#!/usr/bin/env bash
# The next GPU session's first three calls (written in session 28), everything logged straight to
# $OUT so that a call cut at its limit still brings its logs back. Run them back to back on one
# warm machine (`kind: nvidia-h100-x1`):
#   A (cold): main's tree (gz's register hand-off fixed) and three patches built side by side and
#      A/B'd under plain order and the chain (benchmarks/fcgp_ab_trees.sh), then the in-place gW lab
#   B: the hang loops on main's tree, the three FCGP test files, racecheck one case at a time
#   C: memcheck --hopper, the SASS check, the issue-4 bench
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
case "${1:-}" in
A)
    PATCHES="benchmarks/results/fcgp-s27/gelu_transpose_wide.patch benchmarks/results/fcgp-s28/gw_prev_prefetch.patch benchmarks/results/fcgp-s28/gz_w_direct.patch" \
    SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0;base" OUT="$R/ab" timeout 520 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        tee "$R/ab.log" | grep -E "=====|#####|^Cl|gz_|gw_|prep_wz|gelu|fail|rror|patch"
    OUT="$R/lab" timeout 60 bash benchmarks/lab/run_gw_inplace_lab.sh
    ;;
B)
    export OUT="$R"
    RACECHECK=0 LOOP_S=60 timeout 130 bash benchmarks/fcgp_hang_check.sh
    GPU_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" STAGES=test \
        timeout 200 bash tests/gpu_check.sh | tail -n 6
    LOOPS=0 CASE_S=28 timeout 235 bash benchmarks/fcgp_hang_check.sh
    ;;
C)
    export OUT="$R"
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 120 bash tests/gpu_check.sh | tail -n 4
    STAGES=sass,bench_fcgp timeout 300 bash tests/gpu_check.sh | tail -n 14
    ;;
*)
    echo "usage: $0 A|B|C"; exit 2 ;;
esac
