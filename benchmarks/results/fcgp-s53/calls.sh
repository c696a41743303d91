#!/usr/bin/env bash
# Session 53's device calls (kind nvidia-h100-x1; carry [".nvcc_cache.tgz"], timeout 600). Run as
# `bash benchmarks/results/fcgp-s53/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: (ran on 1ec61e1, branch s53-xg-in-gz) the later chunk's xg^T, yg^T by gz's idle producer
#      warps (GzCfg::XG_NEXT, D 4; the switch FLASHCLIFFORD_FCGP_BWD_XG_IN_GZ): the build; the
#      Hopper backward's chunked tests (the new test first); the A/B against the switch off,
#      alternating, twice each; the issue-4 bench alone on the GPU; memcheck over the Hopper cases
#      (the chunked shapes among them).
#   B: (ran on cd60fb8, branch s53-xg-in-gw; A: no gain, gz's L2-bound K loop slowed by what the
#      pass had cost) the same in gw_pseq_kernel's producer warps, every algebra (switch
#      FLASHCLIFFORD_FCGP_BWD_XG_IN_GW), with gW's one-path tests; then the SASS check for the time
#      left.
#   C: (B: about 1% faster in bf16, 0.5-2% slower in tf32 than main: not merged) main's kernels
#      (unchanged since session 52): the backward's start-up settings on the H100 (most were last
#      chosen on it in sessions 17-37, on older kernels), then what session 52 left unrun on the
#      H100: racecheck over the small cases 4-7, and the side-stream rerun of test_gpu_gate.py and
#      test_gpu_sgp.py for the time left. Run with CALL_S=470 (the device time left).
#   D: (C: one pass at Cl(3,0) bf16 34 us faster) on C's warm machine and build, the last 60 s,
#      run as this command line (not through this script):
#        export PYTHONPATH=$PWD; for s in 0 1 0 1 0 1; do echo "GO_FUSED=$s"; \
#          FLASHCLIFFORD_FCGP_BWD_GO_FUSED=$s timeout 25 python3 benchmarks/fcgp_parts.py \
#          --cells 3,bfloat16,4096,512 2,bfloat16,4096,512 2>&1 | grep -E "backward|forward "; done
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, sanitize, pack
# lever SWITCH TESTS GREP MEMCHECK_S: the build; the chunked tests (-k TESTS); the A/B of the
# defaults against FLASHCLIFFORD_FCGP_BWD_SWITCH=0, alternating, twice each (the lines GREP
# matches); the issue-4 bench; memcheck over the Hopper cases for MEMCHECK_S seconds ("rest": until
# 10 s before the call's end)
lever() {
    begin
    room 150 "chunked tests" && tests_in chunked "" tests/test_gpu_fcgp_sm90.py -k "$2"
    room 120 "A/B" && SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_$1=0;base;FLASHCLIFFORD_FCGP_BWD_$1=0" \
        PARTS_S=50 timeout 230 bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "$3"
    room 110 bench && bench 105
    local s=$4
    [ "$s" = rest ] && s=$((END - SECONDS - 10))
    room 60 memcheck && sanitize memcheck "$s"
}
case "${1:-}" in
A)
    lever XG_IN_GZ "xg_in_gz or chunked or pdl_chain or grads_as_scratch" "===|^Cl|gz_tma|gelu_tr" rest
    pack
    ;;
B)
    lever XG_IN_GW "xg_in_gw or chunked or pdl_chain or grads_as_scratch or pseq" "===|^Cl|gz_tma|gw_pseq|gelu_tr" 60
    room 40 sass && { STAGES=sass timeout $((END - SECONDS - 10)) bash tests/gpu_check.sh >"$R/sass.txt" 2>&1
        tail -n 4 "$R/sass.txt"; }
    pack
    ;;
C)
    begin
    room 200 "settings" && SETTINGS="base;FLASHCLIFFORD_FCGP_GZ_KK=1;FLASHCLIFFORD_FCGP_GZ_KK=2;FLASHCLIFFORD_FCGP_GZ_KK=4;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=1;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=2;FLASHCLIFFORD_FCGP_GW_PSEQ=3;base" \
        PARTS_S=40 timeout 190 bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "===|backward  "
    room 150 racecheck && LOOPS=0 RACECHECK=1 OUT="$R" CASES="4 5 6 7" CASE_S=40 timeout 170 \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 5
    room 100 "side-stream tests" && tests_in side FLASHCLIFFORD_TEST_SIDE_STREAM=1 -m "gpu and not large" \
        tests/test_gpu_gate.py tests/test_gpu_sgp.py
    pack
    ;;
*)
    echo "usage: $0 A | B | C"; exit 2 ;;
esac
