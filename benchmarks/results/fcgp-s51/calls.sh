#!/usr/bin/env bash
# Session 51's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz"], timeout
# 600). Run as `bash benchmarks/results/fcgp-s51/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: main against two patches, two runs each (forward and backward lines): rowsums.patch (the
#      Cl(2,0) forward norm's split grade summed by each warpgroup over its own components, one
#      float a row passed, no barrier before) and gzraw.patch (gz's x, y held as loaded across the
#      barrier that waits for every G, widened after it), and gzgate.patch (gzraw's change and each
#      position's gates evaluated once in gz's epilogue); the forward tests in rowsums' tree, the
#      backward tests in gzgate's, racecheck over the small Cl(2,0) cases in rowsums' tree.
#   B: (A: all three faster; rowsums and gzgate merged) on main: main against gz_revert.patch (main
#      without the gz change: the rowsums tree's sources) once, benchmarks/go_bits.py's digests in
#      both (the gz change claims the same bits), racecheck over the small Cl(2,0) cases, memcheck
#      and synccheck over the Hopper cases, the issue-4 bench, the hang loops, the op tests.
#   C: (B: the same bits, every check clean) on main: initcheck over the Hopper cases, then the whole
#      of test_gpu_fcgp_sm90.py (calls A and B ran its forward tests on rowsums' tree and its
#      backward tests on gzgate's, not on the two together).
#   D: (C: 549 passed, initcheck clean) on main: the other GPU files that run these kernels
#      (reliability, streams, the layers, the gate), as long as the call lasts.
#   E: session 50's trace lab rebased on main (trace.patch; its forward hunk placed after the
#      fence-free hand-off by hand): the Cl(2,0) forwards and the backwards' gz tiles on a
#      timeline, to see where this session's changes moved each tile's phases. Only the patched
#      tree is built (main's own object is not in the carried cache after a comment change).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack, ab_fwd
S51=benchmarks/results/fcgp-s51
case "${1:-}" in
A)
    begin
    PATCHES="$S51/rowsums.patch $S51/gzraw.patch $S51/gzgate.patch" SETTINGS="base;base" PARTS_S=60 OUT="$R/ab" timeout 240 \
        bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "===|#####|forward|backward|fwd_tma|gz_tma|bmm"
    (cd /tmp/fc_tree_rowsums && export PYTHONPATH=/tmp/fc_tree_rowsums &&
        room 80 "rowsums forward tests" && tests_in rows_fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward" &&
        room 120 "rowsums racecheck" && LOOPS=0 RACECHECK=1 OUT="$R/race" CASES="0 1 2 3" CASE_S=25 \
            timeout 115 bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 5)
    (cd /tmp/fc_tree_gzgate && export PYTHONPATH=/tmp/fc_tree_gzgate &&
        room 60 "gzgate backward tests" && tests_in gate_bwd "" tests/test_gpu_fcgp_sm90.py -k "backward and not mma.sync")
    pack
    ;;
B)
    begin
    PATCHES="$S51/gz_revert.patch" SETTINGS="base" PARTS_S=60 OUT="$R/ab" timeout 120 \
        bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "===|#####|forward|backward|fwd_tma|gz_tma|bmm"
    timeout 60 python3 benchmarks/go_bits.py >"$R/bits_main.txt" 2>&1
    (cd /tmp/fc_tree_gz_revert && PYTHONPATH=/tmp/fc_tree_gz_revert timeout 60 python3 benchmarks/go_bits.py) \
        >"$R/bits_gz_revert.txt" 2>&1
    echo "go_bits: $(wc -l <"$R/bits_main.txt") lines; diff against gz_revert: $(diff "$R/bits_main.txt" "$R/bits_gz_revert.txt" >/dev/null && echo same || echo DIFFERENT)"
    room 120 racecheck && LOOPS=0 RACECHECK=1 OUT="$R" CASES="0 1 2 3" CASE_S=25 timeout 115 \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 5
    room 90 "memcheck, synccheck" && sanitize "memcheck synccheck" 80
    room 100 bench && bench 95
    room 100 "hang loops" && LOOPS=1 RACECHECK=0 OUT="$R" LOOP_S=45 ITERS=300 timeout 100 \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 3
    room 60 "op tests" && tests_in op "" tests/test_gpu_fcgp.py
    pack
    ;;
C)
    begin
    room 60 initcheck && sanitize initcheck 55
    room 60 "sm90 tests" && tests_in sm90 "" tests/test_gpu_fcgp_sm90.py
    pack
    ;;
D)
    begin
    room 60 "other GPU tests" && tests_in other "" tests/test_gpu_reliability.py tests/test_gpu_streams.py \
        tests/test_nn.py tests/test_gpu_gate.py
    pack
    ;;
E)
    tree=/tmp/fc_tree_trace root=$PWD
    rm -rf "$tree" && mkdir -p "$tree"
    tar --exclude=./.git --exclude=./build --exclude=./gpu_check_out --exclude='*.so' -cf - . | tar -C "$tree" -xf -
    (cd "$tree" && patch -p1 <"$root/$S51/trace.patch" >/dev/null) || { echo "trace.patch does not apply"; exit 1; }
    cd "$tree" && export PYTHONPATH="$tree"
    begin
    room 60 trace && timeout $((END - SECONDS - 10)) python3 benchmarks/lab/fwd_trace.py \
        2,bfloat16,4096,512 2,float32,4096,512 2,bfloat16,4096,512,bwd 2,float32,4096,512,bwd \
        3,bfloat16,4096,512,bwd 2>&1 | tee "$R/trace.txt"
    pack
    ;;
*)
    echo "usage: $0 A | B | C | D | E"; exit 2 ;;
esac
