#!/usr/bin/env bash
# Session 29's last GPU calls, logs straight to $OUT (run on one warm `kind: nvidia-h100-x1`):
#   A: main and two patches built side by side (fcgp_ab_trees.sh): the forward epilogue's one
#      fence (fwd_one_fence.patch), and that with gW's fragment loads by shared address
#      (fwd_fence_gw_lds.patch); per-kernel times three times each under the defaults; then in
#      the combined tree the Hopper FCGP tests and memcheck --hopper
#   B: racecheck over the small set, a case at a time, in the combined tree
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
P=benchmarks/results/fcgp-s29
T=/tmp/fc_tree_fwd_fence_gw_lds
case "${1:-}" in
A)
    PATCHES="$P/fwd_one_fence.patch $P/fwd_fence_gw_lds.patch" SETTINGS="base;base;base" PARTS_S=60 \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py" OUT="$R/ab" timeout 470 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        tee "$R/ab.log" | grep -E "=====|#####|^Cl|fwd_tma|gw_tma|passed|failed|rror|patch"
    (cd "$T" && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize OUT="$R/checks" timeout 60 \
        bash tests/gpu_check.sh | tail -n 4)
    ;;
B)
    (cd "$T" && OUT="$R" LOOPS=0 CASE_S=28 timeout 235 bash benchmarks/fcgp_hang_check.sh)
    ;;
*)
    echo "usage: $0 A|B"; exit 2 ;;
esac
