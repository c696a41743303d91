#!/usr/bin/env bash
# The next GPU session's first calls (written in session 30), logs straight to $OUT; back to back
# on one warm machine (`kind: nvidia-h100-x1`):
#   A (cold): the build; the Hopper backward tests on main; Nsight Compute's memory view of the memory-bound passes at Cl(3,0) fp32
#      (go_rows under the default rule; norm_stats, go_transpose and gelu_transpose under the two
#      passes): how far each is from the copy rate, and what binds go_rows (52-60 us a chunk for
#      100 MB in session 30)
#   B: go_rows_tma.patch (persistent, the copy engine bringing the next 16-row block while this one
#      is reduced and stored) against main, by fcgp_ab_trees.sh, under the default rule and with
#      the one pass forced in every cell (FLASHCLIFFORD_FCGP_BWD_GO_FUSED=1); then the go tests in
#      the go_rows_tma tree. (go_rows_lb2.patch, launch bounds (256, 2), is the smaller variant to
#      try if the profile of A shows go_rows' loads not all in flight.)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
case "${1:-}" in
A)
    STAGES=build timeout 300 bash tests/gpu_check.sh | tail -n 2
    # main's host refactor after session 30's last device call (67f2608: by_v) first
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp_sm90.py \
        -k "go_ or pdl_chain or backward" 2>&1 | tee "$R/pytest_main.log" | tail -n 3
    NCU_CELLS="3,float32,4096,512" NCU_MEM_KERNELS="go_rows gelu_transpose" STAGES=ncu_mem_fcgp \
        timeout 120 bash tests/gpu_check.sh | tail -n 30
    mv "$R/ncu_mem_3_float32_4096_512.txt" "$R/ncu_mem_go_rows.txt"
    FLASHCLIFFORD_FCGP_BWD_GO_FUSED=2 NCU_CELLS="3,float32,4096,512" NCU_MEM_KERNELS="norm_stats go_transpose" \
        STAGES=ncu_mem_fcgp timeout 120 bash tests/gpu_check.sh | tail -n 30
    ;;
B)
    PATCHES="benchmarks/results/fcgp-s30/go_rows_tma.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=1" TREE_TESTS="tests/test_gpu_fcgp_sm90.py -k go_" \
        timeout 580 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^#|^=|^Cl|go_rows|passed|failed"
    ;;
*)
    echo "usage: $0 A|B"; exit 2 ;;
esac
