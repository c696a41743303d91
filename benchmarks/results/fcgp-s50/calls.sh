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
#   B: (A: the wait is round trips, not skew, at Cl(2,0)) acqrel.patch: the handshake without
#      fences (a releasing and acquiring add, the wait's value kept, Whole stored relaxed) against
#      main, twice each; its tree's forward tests and the issue-4 bench in it.
#   C: (B: -0.6 to -2 us a kernel, every cell; merged) on main: the hang loops under both chain
#      settings, racecheck over the small Cl(2,0) cases, memcheck and synccheck over the Hopper
#      cases, the op tests.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack, ab_fwd
S50=benchmarks/results/fcgp-s50
case "${1:-}" in
A)
    begin
    ab_fwd "$S50/trace.patch" 240
    tree=/tmp/fc_tree_trace
    room 60 trace && (cd "$tree" && PYTHONPATH="$tree" timeout $((END - SECONDS - 10)) python3 benchmarks/lab/fwd_trace.py \
        2,bfloat16,4096,512 2,bfloat16,4096,512,nonorm 2,float32,4096,512 2,float32,4096,512,nonorm \
        3,bfloat16,4096,512 3,bfloat16,4096,512,nonorm 3,float32,4096,512 3,float32,4096,512,nonorm \
        2,bfloat16,4096,512,bwd 2,float32,4096,512,bwd 3,bfloat16,4096,512,bwd 3,float32,4096,512,bwd) 2>&1 |
        tee "$R/trace.txt"
    pack
    ;;
B)
    begin
    ab_fwd "$S50/acqrel.patch" 200
    tree=/tmp/fc_tree_acqrel
    cd "$tree" || exit 1
    export PYTHONPATH="$tree"
    room 120 "forward tests" && tests_in fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward"
    room 100 bench && bench 95
    cd - >/dev/null && pack
    ;;
C)
    begin
    room 200 "hang loops, racecheck" && RACECHECK=1 OUT="$R" CASES="0 1 2 3" CASE_S=18 LOOP_S=60 ITERS=300 \
        timeout 200 bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 10
    room 90 "memcheck, synccheck" && sanitize "memcheck synccheck" 80
    room 100 "op tests" && tests_in op "" tests/test_gpu_fcgp.py
    pack
    ;;
*)
    echo "usage: $0 A | B | C"; exit 2 ;;
esac
