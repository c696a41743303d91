#!/usr/bin/env bash
# Session 55's first device call, prepared in session 54 (not run). Kind nvidia-h100-x1; carry
# [".nvcc_cache.tgz"] (fill it first: benchmarks/nvcc_cache_fill.sh), timeout 600. Run as
# `bash benchmarks/results/fcgp-s55/calls.sh A 2>&1 | tee $OUT/output_tail.txt`.
#   A: main with session 54's go_rows rule (two columns a load only at D 8), its first GPU run:
#      the issue-4 bench alone on the GPU (Cl(3,0) bf16 estimated at about 1.69x three bmm);
#      benchmarks/lab/gw_pseq.cu's in-place mode (session 54): the one-path gW loop reading x, y and
#      the gate product as stored (tensor boxes, ldmatrix.trans) against today's xg^T in stage
#      order; the Hopper file's backward group (the go tests among them); memcheck over the Hopper
#      cases for the time left.
#   B: (with branch s54-gw-inplace checked out here and its objects filled into .nvcc_cache.tgz)
#      the in-place bf16 gW: its tests and the backward's chunked, chain and scratch tests; the
#      backward under FLASHCLIFFORD_FCGP_GW_INPLACE 0 and 1, alternating; the issue-4 bench under 1;
#      memcheck over the Hopper cases under 1. Session 55: A's lab printed nothing (its rings counted
#      2 releases a step where consume_fed gives 8: the lab hung, killed by the timeout with its
#      output buffered); the lab mended, B runs it after the bench.
#   C: (session 55, after B: the in-place gW did not pay, not merged) the rest of the GPU check on
#      main's tree (A ran the bench, the Hopper backward tests and memcheck): the Hopper file's
#      other tests, every other -m gpu file, the SASS check, synccheck and initcheck.
#   D: racecheck over go_rows' two-column form (session 54's CW 2 at D 8, which stages its loads
#      in shared memory; not yet under racecheck): fcgp_hang_check.py's case 13 (Cl(3,0) bf16,
#      512 x 512) and the new case 14 (the same in tf32), gw_pseq_kernel left out as gpu_check.sh
#      does; then the hang loops on this tree, both chain settings.
#   (E, gz's tile 48 columns wide at D 4, was written here but found no machine: a failed H100 start
#      spent the device time. It is results/fcgp-s56/calls.sh A.)
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, sanitize, pack, rest_of_suite
case "${1:-}" in
A)
    begin
    room 110 bench && bench 105
    room 60 "in-place lab" && lab_build gw_pseq && { timeout 40 "$T/gw_pseq" inplace; echo "lab rc $?"; } 2>&1 | tee "$R/gw_pseq_inplace.txt"
    room 250 "backward tests" && tests_in sm90_bwd "" tests/test_gpu_fcgp_sm90.py -k backward
    room 60 memcheck && sanitize memcheck $((END - SECONDS - 10))
    pack
    ;;
B)
    begin
    room 150 "in-place tests" && tests_in gw_inplace "" tests/test_gpu_fcgp_sm90.py \
        -k "gw_inplace or chunked or pdl_chain or grads_as_scratch"
    room 90 "A/B" && SETTINGS="base;FLASHCLIFFORD_FCGP_GW_INPLACE=1;base;FLASHCLIFFORD_FCGP_GW_INPLACE=1" PARTS_S=25 \
        timeout 150 bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "===|backward  |gw_pseq|gelu_t|gate_product"
    room 110 bench && FLASHCLIFFORD_FCGP_GW_INPLACE=1 bench 105
    room 70 "in-place lab" && lab_build gw_pseq && { timeout 45 "$T/gw_pseq" inplace; echo "lab rc $?"; } 2>&1 | tee "$R/gw_pseq_inplace.txt"
    room 60 memcheck && FLASHCLIFFORD_FCGP_GW_INPLACE=1 sanitize memcheck $((END - SECONDS - 10))
    pack
    ;;
C)
    begin
    room 250 "the rest of the suite" && rest_of_suite sm90_fwd "not backward"
    room 60 "synccheck, initcheck" && sanitize "synccheck initcheck" $((END - SECONDS - 10))
    pack
    ;;
D)
    begin
    room 120 "racecheck 13, 14" && LOOPS=0 CASES="13 14" CASE_S=$(((END - SECONDS - 100) / 2)) \
        RACE_ARGS="--kernel-name-exclude kns=gw_pseq_kernel" bash benchmarks/fcgp_hang_check.sh
    room 80 "hang loops" && RACECHECK=0 ITERS=300 LOOP_S=$(((END - SECONDS - 20) / 2)) bash benchmarks/fcgp_hang_check.sh
    pack
    ;;
*)
    echo "usage: $0 A | B | C | D"; exit 2 ;;
esac
