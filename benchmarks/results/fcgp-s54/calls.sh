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
#   C: (added in session 54, after A and B) the rest of the `-m gpu` suite on this tree (every file
#      but the Hopper one, which A and B ran) in two pytest processes beside the SASS check; then
#      fcgp_parts.py at larger shapes (B 8192, N 1024): is the backward's gap to bmm a fixed cost
#      of issue 4's shape or the kernels' own rate.
#   D: (after C) session 53's rule (go_rows at D 8) by default under racecheck and the hang loops:
#      racecheck's Cl(3,0) bf16 cases (6, 7; 13: one path a tile at 512 x 512; and 11, its small
#      shape) ran in session 53 before the rule was merged; the loops under both chain settings.
#   E: (D: cases 11 and 13 drew racecheck's known reports on gw_pseq_kernel's bulk copies, every
#      one a bulk_load write against an LDS read, as in session 43's lab) cases 11 and 13 again
#      with gw_pseq_kernel left out, as gpu_check.sh's racecheck does.
#   F: go_rows two columns a load (CW 2; FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0 turns it off): the
#      backward and its kernels under both, alternating, and the one pass at Cl(2,0) bf16; its
#      registers (cuobjdump); the go_rows tests (go_pairs, go_fused, pdl_chain).
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
C)
    begin
    (STAGES=sass timeout $((END - SECONDS - 15)) bash tests/gpu_check.sh >"$R/sass.txt" 2>&1) &
    room 200 "the rest of the suite" && {
        tests_in fcgp_gate_streams "" tests/test_gpu_fcgp.py tests/test_gpu_gate.py tests/test_gpu_streams.py &
        tests_in sgp_rest "" tests/test_gpu_sgp.py tests/test_gpu_reliability.py tests/test_nn.py \
            tests/test_threads.py tests/test_dlpack.py tests/test_errors.py &
        wait
    }
    wait
    tail -n 8 "$R/sass.txt"
    room 60 "larger shapes" && timeout $((END - SECONDS - 10)) python3 benchmarks/fcgp_parts.py --cells \
        2,bfloat16,8192,512 2,bfloat16,4096,1024 3,bfloat16,4096,1024 2,float32,4096,1024 \
        2,bfloat16,4096,512 >"$R/parts_scale.txt" 2>&1
    grep -E "^Cl" "$R/parts_scale.txt"
    pack
    ;;
D)
    begin
    room 90 "hang loops" && LOOPS=1 RACECHECK=0 OUT="$R" LOOP_S=40 ITERS=300 timeout 100 \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 3
    room 60 racecheck && LOOPS=0 RACECHECK=1 OUT="$R" CASES="6 7 13 11" CASE_S=90 timeout $((END - SECONDS - 10)) \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 5
    pack
    ;;
E)
    begin
    room 60 racecheck && LOOPS=0 RACECHECK=1 OUT="$R" CASES="11 13" CASE_S=90 \
        RACE_ARGS="--kernel-name-exclude kns=gw_pseq_kernel" timeout $((END - SECONDS - 10)) \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 5
    pack
    ;;
F)
    begin
    room 90 "A/B" && SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0;base;FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=1" \
        PARTS_S=25 timeout 150 bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "===|backward  |go_rows|go_transpose|norm_stats"
    cuobjdump -res-usage flashclifford/_C*.so 2>/dev/null | grep -A1 "go_rows" | grep -oE "REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+" | paste -sd' ' | head -c 400; echo
    room 60 "go_rows tests" && tests_in go_rows "" tests/test_gpu_fcgp_sm90.py -k "go_pairs or go_fused or pdl_chain"
    pack
    ;;
*)
    echo "usage: $0 A | B | C | D | E | F"; exit 2 ;;
esac
