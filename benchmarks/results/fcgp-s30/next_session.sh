#!/usr/bin/env bash
# The next GPU session's first calls (written in session 30), logs straight to $OUT; back to back
# on one warm machine (`kind: nvidia-h100-x1`):
#   A (cold): the build; Nsight Compute's memory view of the memory-bound passes at Cl(3,0) fp32
#      (go_rows under the default rule; norm_stats, go_transpose and gelu_transpose under the two
#      passes): how far each is from the copy rate, and what binds go_rows (52-60 us a chunk for
#      100 MB in session 30)
#   B: go_rows at two blocks an SM (launch bounds 256, 2: every load of a thread in flight) against
#      main, by fcgp_ab_trees.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
case "${1:-}" in
A)
    STAGES=build timeout 300 bash tests/gpu_check.sh | tail -n 2
    NCU_CELLS="3,float32,4096,512" NCU_MEM_KERNELS="go_rows gelu_transpose" STAGES=ncu_mem_fcgp \
        timeout 120 bash tests/gpu_check.sh | tail -n 30
    mv "$R/ncu_mem_3_float32_4096_512.txt" "$R/ncu_mem_go_rows.txt"
    FLASHCLIFFORD_FCGP_BWD_GO_FUSED=2 NCU_CELLS="3,float32,4096,512" NCU_MEM_KERNELS="norm_stats go_transpose" \
        STAGES=ncu_mem_fcgp timeout 120 bash tests/gpu_check.sh | tail -n 30
    ;;
B)
    PATCHES=benchmarks/results/fcgp-s30/go_rows_lb2.patch CELLS="3,float32,4096,512 2,float32,4096,512" \
        timeout 500 bash benchmarks/fcgp_ab_trees.sh 2>&1 | tail -n 40
    ;;
*)
    echo "usage: $0 A|B"; exit 2 ;;
esac
