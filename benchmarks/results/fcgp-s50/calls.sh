#!/usr/bin/env bash
# Session 50's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz"], timeout
# 600). Run as `bash benchmarks/results/fcgp-s50/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: the forward's tiles on a timeline (trace.patch, a lab never merged: each tile's global timer
#      and SM clock at its start, its warpgroups' K-loop ends, its partials, the row-block wait,
#      norm_inv and its stored out; benchmarks/lab/fwd_trace.py in the patched tree prints them wave
#      by wave) for the four cells with and without the norm, after an A/B of the patched tree
#      against main (the trace off: the same speed, or the trace's code costs something); and gz's
#      tiles the same way in one backward of each cell (start, the programmatic wait, the first
#      stage, the K loop, G's staging and barrier, the epilogue), both launches.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
S50=benchmarks/results/fcgp-s50
case "${1:-}" in
A)
    begin
    PATCHES="$S50/trace.patch" SETTINGS="base;base" PARTS_S=60 OUT="$R/ab" \
        timeout 240 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "===|#####|forward|fwd_tma|bmm"
    tree=/tmp/fc_tree_trace
    room 60 trace && (cd "$tree" && PYTHONPATH="$tree" timeout $((END - SECONDS - 10)) python3 benchmarks/lab/fwd_trace.py \
        2,bfloat16,4096,512 2,bfloat16,4096,512,nonorm 2,float32,4096,512 2,float32,4096,512,nonorm \
        3,bfloat16,4096,512 3,bfloat16,4096,512,nonorm 3,float32,4096,512 3,float32,4096,512,nonorm \
        2,bfloat16,4096,512,bwd 2,float32,4096,512,bwd 3,bfloat16,4096,512,bwd 3,float32,4096,512,bwd) 2>&1 |
        tee "$R/trace.txt"
    pack
    ;;
*)
    echo "usage: $0 A"; exit 2 ;;
esac
