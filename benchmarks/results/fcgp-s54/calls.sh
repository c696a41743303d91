#!/usr/bin/env bash
# Session 54's device calls, prepared in session 53 (not run). Kind nvidia-h100-x1; carry
# [".nvcc_cache.tgz"] (fill it first: benchmarks/nvcc_cache_fill.sh), timeout 600. Run as
# `bash benchmarks/results/fcgp-s54/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: main with session 53's rule (the one-pass statistics and go^T at D 8), its first default
#      runs: the issue-4 bench alone on the GPU; the forward's and backward's start-up settings
#      on the H100 (GW_PSEQ=3 read 8 us faster at Cl(3,0) bf16 in session 53's one run; the
#      forward's were last chosen in sessions 19-47, most on H200s); the Hopper file's forward
#      tests.
#   B: the Hopper file's backward tests (the rule's default path among them); memcheck,
#      synccheck and initcheck over the Hopper cases.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, sanitize, pack
case "${1:-}" in
A)
    begin
    room 110 bench && bench 105
    room 150 settings && SETTINGS="base;FLASHCLIFFORD_FCGP_GW_PSEQ=3;FLASHCLIFFORD_FCGP_FWD_CLUSTER=1;FLASHCLIFFORD_FCGP_FWD_CLUSTER=2;FLASHCLIFFORD_FCGP_FWD_CLUSTER=3;FLASHCLIFFORD_FCGP_FWD_GROUPS=1;FLASHCLIFFORD_FCGP_FWD_WMN=0;FLASHCLIFFORD_FCGP_FWD_WMN=1;FLASHCLIFFORD_FCGP_FWD_PIPE=0;base" \
        PARTS_S=40 timeout 200 bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "===|forward  |backward  "
    room 100 "forward tests" && tests_in sm90_fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward"
    pack
    ;;
B)
    begin
    room 250 "backward tests" && tests_in sm90_bwd "" tests/test_gpu_fcgp_sm90.py -k backward
    room 100 "memcheck, synccheck, initcheck" && sanitize "memcheck synccheck initcheck" $((END - SECONDS - 10))
    pack
    ;;
*)
    echo "usage: $0 A | B"; exit 2 ;;
esac
