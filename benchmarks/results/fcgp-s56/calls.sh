#!/usr/bin/env bash
# Session 56's device call, prepared in session 55 (not run: session 55's failed H100 start
# spent its device time). Kind nvidia-h100-x1 (an A/B within the call: nvidia-h200 does too);
# carry [".nvcc_cache.tgz"] with both trees' objects. Session 55 left it filled for main's sources
# at 2a99734: if csrc/ has not changed since, carry it as it is; else fill it again, from the
# repository root:
#   touch /tmp/stamp && sleep 1 && git worktree add --detach /tmp/bn48 HEAD
#   (cd /tmp/bn48 && git apply "$OLDPWD/benchmarks/results/fcgp-s56/gz_bn48.patch")
#   CACHE=$PWD/.nvcc_cache KEEP=1 bash /tmp/bn48/benchmarks/nvcc_cache_fill.sh
#   SINCE=/tmp/stamp bash benchmarks/nvcc_cache_fill.sh
# timeout 600. Run as `bash benchmarks/results/fcgp-s56/calls.sh A 2>&1 | tee $OUT/output_tail.txt`.
#   A: gz's tile at D 4 48 columns wide instead of 32 (gz_bn48.patch: GzCfg's BN, and the wgmmas of
#      N 144 it needs): 1.5 times the flops a ring step for the same waits, the accumulators 168
#      registers a consumer where 112 were (ptxas: no spills in the four D 4 forms, KK 2 and 4).
#      The Cl(2,0) backward against main under GZ_KK 4 (the rule at D 4; at BN 48 only two 92-KB
#      stages fit) and 2 (four 46-KB stages), alternating; then the patched tree's Cl(2,0) Hopper
#      backward tests (N_in 512 is not a multiple of 48: every issue-4 run has a column tail);
#      the issue-4 bench in the patched tree for the time left.
# (B and C written in session 56, after A: the whole GPU check on main's final tree, f012d48,
# whose tma::Ring and fc::aligned edits of session 55 had not run on a GPU; session 55's calls A,
# C and D in two.)
#   B: the issue-4 bench, the Hopper backward tests, memcheck over the Hopper cases.
#   C: every other -m gpu test and the SASS check, synccheck and initcheck, racecheck on cases 13
#      and 14 (go_rows' two-column form), the hang loops.
#   D: gpu_check.sh's remaining stages on the same tree: every -m gpu test again with each test on
#      a side stream (FLASHCLIFFORD_TEST_SIDE_STREAM=1; three processes at once, as rest_of_suite
#      splits them), then racecheck over the Hopper cases (gw_pseq_kernel left out, as the stage does).
#      The tests took 413 s, so the racecheck ran out of time after its canary.
#   E: (run as this command line, written here after) racecheck over fcgp_hang_check's cases 0-12,
#      gw_pseq_kernel left out; cases 13 and 14 ran in C.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, sanitize, pack
case "${1:-}" in
A)
    begin
    # gz_bn48.patch against main, the Cl(2,0) cells, each tree under KK 4 (the rule at D 4) and 2
    room 200 "A/B" && CELLS="2,float32,4096,512 2,bfloat16,4096,512" PARTS_S=30 OUT="$R/ab" \
        PATCHES="benchmarks/results/fcgp-s56/gz_bn48.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_GZ_KK=2;base;FLASHCLIFFORD_FCGP_GZ_KK=2" \
        timeout $((END - SECONDS - 90)) bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "===|#####|backward|gz_tma"
    # the patched tree's Cl(2,0) backward tests on the Hopper kernels (node ids: -k cannot name
    # "Cl(2,0)")
    room 60 "tests" && (cd /tmp/fc_tree_gz_bn48 && python3 -m pytest -q -m gpu -p no:cacheprovider --collect-only \
        tests/test_gpu_fcgp_sm90.py -k "backward and not mma" 2>/dev/null | grep "Cl(2,0)" >/tmp/ids.txt;
        echo "$(wc -l </tmp/ids.txt) ids"; PYTHONPATH=$PWD timeout $((END - SECONDS - 10)) xargs -a /tmp/ids.txt \
        python3 -m pytest -q -m gpu -p no:cacheprovider >"$R/pytest_bn48.log" 2>&1; echo "tests rc $? $(tail -n 1 "$R/pytest_bn48.log")";
        grep -E "^FAILED|^E " "$R/pytest_bn48.log" | head -n 8)
    # the issue-4 bench in the patched tree, for the time left
    room 110 "bench in the patched tree" && (cd /tmp/fc_tree_gz_bn48 && { PYTHONPATH=$PWD OUT="$R/bench_bn48" STAGES=bench_fcgp \
        timeout 105 bash tests/gpu_check.sh >/dev/null 2>&1; echo "bench rc $?"; } &&
        grep -hE "copy bandwidth|^fcgp" "$R"/bench_bn48/bench_fcgp*.log)
    pack
    ;;
B)
    begin
    room 110 bench && bench 105
    room 250 "backward tests" && tests_in sm90_bwd "" tests/test_gpu_fcgp_sm90.py -k backward
    room 60 memcheck && sanitize memcheck $((END - SECONDS - 10))
    pack
    ;;
C)
    begin
    room 250 "the rest of the suite" && rest_of_suite sm90_fwd "not backward"
    room 60 "synccheck, initcheck" && sanitize "synccheck initcheck" 100
    room 100 "racecheck 13, 14" && LOOPS=0 CASES="13 14" CASE_S=$(((END - SECONDS - 70) / 2)) \
        RACE_ARGS="--kernel-name-exclude kns=gw_pseq_kernel" bash benchmarks/fcgp_hang_check.sh
    room 50 "hang loops" && RACECHECK=0 ITERS=300 LOOP_S=$(((END - SECONDS - 15) / 2)) bash benchmarks/fcgp_hang_check.sh
    pack
    ;;
D)
    begin
    room 330 "side-stream suite" && {
        export FLASHCLIFFORD_TEST_SIDE_STREAM=1
        tests_in side_sm90 "" tests/test_gpu_fcgp_sm90.py &
        tests_in side_fcgp_gate_streams "" tests/test_gpu_fcgp.py tests/test_gpu_gate.py tests/test_gpu_streams.py &
        tests_in side_sgp_rest "" tests/test_gpu_sgp.py tests/test_gpu_reliability.py tests/test_nn.py \
            tests/test_threads.py tests/test_dlpack.py tests/test_errors.py &
        wait
        unset FLASHCLIFFORD_TEST_SIDE_STREAM
    }
    room 60 racecheck && sanitize racecheck $((END - SECONDS - 10))
    pack
    ;;
E)
    build
    LOOPS=0 CASES="0 1 2 3 4 5 6 7 8 9 10 11 12" CASE_S=30 RACE_ARGS="--kernel-name-exclude kns=gw_pseq_kernel" \
        timeout 220 bash benchmarks/fcgp_hang_check.sh
    ;;
*)
    echo "usage: $0 A | B | C | D | E"; exit 2 ;;
esac
