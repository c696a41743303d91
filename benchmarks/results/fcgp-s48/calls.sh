#!/usr/bin/env bash
# Session 48's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz"], timeout
# 600). Run as `bash benchmarks/results/fcgp-s48/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: (1) session 47's norm_rows_cb.patch against main (results/fcgp-s47/next_session.sh P: norm_rows
#      reads its column block from blockIdx.x; ptxas: every one-group form 0 bytes of spills, the
#      two-group bf16 forms 12 / 52 -> 20 / 68), each tree under the defaults and
#      FLASHCLIFFORD_FCGP_FWD_GROUPS=1, then the forward's tests in the patched tree; (2) main's
#      forward without the grade norm (fcgp_parts.py --no-norm, new), twice: what the norm epilogue
#      costs each cell; (3) initcheck and synccheck over the Hopper cases on main (last run on session
#      45's kernels; the two-group forward is new since).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
case "${1:-}" in
A)
    begin
    PATCHES=benchmarks/results/fcgp-s47/norm_rows_cb.patch SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_GROUPS=1" \
        PARTS_S=80 OUT="$R/ab" timeout 330 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        grep -E "===|#####|forward|fwd_tma|fwd_prep|bmm"
    tree=/tmp/fc_tree_norm_rows_cb
    room 200 "forward tests" && (cd "$tree" && PYTHONPATH="$tree" timeout 120 python3 -m pytest -q -m gpu \
        -p no:cacheprovider tests/test_gpu_fcgp_sm90.py -k "not backward" >"$R/pytest_fwd_patched.log" 2>&1
        echo "forward tests in the patched tree: rc $? $(tail -n 1 "$R/pytest_fwd_patched.log")")
    for r in 1 2; do
        for nn in "" --no-norm; do
            room 40 "parts $nn" || break
            echo "=== main ${nn:-with the norm}, run $r"
            timeout 40 python3 benchmarks/fcgp_parts.py --reps 20 --kernels $nn 2>&1 | grep -v -i warn |
                grep -v backward | tee "$R/parts_${r}${nn}.txt" | grep -E "bmm|forward|fwd_"
        done
    done
    room 70 "initcheck, synccheck" && sanitize "initcheck synccheck" 60
    pack
    ;;
*)
    echo "usage: $0 A"; exit 2 ;;
esac
