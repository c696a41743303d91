#!/usr/bin/env bash
# The next GPU session's first three calls (written in session 28), everything logged straight to
# $OUT so that a call cut at its limit still brings its logs back. Run them back to back on one
# warm machine (`kind: nvidia-h100-x1`):
#   A (cold): main's tree (gz's register hand-off fixed) and four patches built side by side and
#      A/B'd under plain order and the chain (benchmarks/fcgp_ab_trees.sh)
#   B: the in-place gW patch under its switch (its backward tests, then its kernel times at both
#      gW sub-step counts), the in-place lab, the hang loops on main's tree, the three FCGP test
#      files, racecheck one case at a time
#   C: memcheck --hopper, the SASS check, the issue-4 bench
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
P=benchmarks/results
case "${1:-}" in
A)
    PATCHES="$P/fcgp-s27/gelu_transpose_wide.patch $P/fcgp-s28/gw_prev_prefetch.patch $P/fcgp-s28/gz_w_direct.patch $P/fcgp-s28/gw_inplace.patch" \
    SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0;base" OUT="$R/ab" timeout 560 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        tee "$R/ab.log" | grep -E "=====|#####|^Cl|gz_|gw_|prep_wz|gelu|fail|rror|patch"
    ;;
B)
    export OUT="$R"
    if [ -d /tmp/fc_tree_gw_inplace ]; then # call A's tree, still on this warm machine
        (cd /tmp/fc_tree_gw_inplace && OUT="$R/inplace" TESTS=1 CELLS="2,float32,4096,512 3,float32,4096,512" \
            TEST_K=backward TEST_TIMEOUT_S=100 PARTS_S=60 \
            SETTINGS="FLASHCLIFFORD_FCGP_GW_INPLACE=1 FLASHCLIFFORD_FCGP_BWD_PDL=0;FLASHCLIFFORD_FCGP_GW_INPLACE=1 FLASHCLIFFORD_FCGP_GW_KK=1 FLASHCLIFFORD_FCGP_BWD_PDL=0" \
            timeout 260 bash benchmarks/fcgp_ab.sh)
    fi
    OUT="$R/lab" timeout 40 bash benchmarks/lab/run_gw_inplace_lab.sh
    RACECHECK=0 LOOP_S=40 timeout 90 bash benchmarks/fcgp_hang_check.sh
    GPU_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" STAGES=test \
        TEST_TIMEOUT_S=170 timeout 180 bash tests/gpu_check.sh | tail -n 6
    ;;
C)
    export OUT="$R"
    LOOPS=0 CASE_S=28 timeout 235 bash benchmarks/fcgp_hang_check.sh
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh | tail -n 4
    STAGES=sass,bench_fcgp timeout 280 bash tests/gpu_check.sh | tail -n 14
    ;;
*)
    echo "usage: $0 A|B|C"; exit 2 ;;
esac
