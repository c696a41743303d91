#!/usr/bin/env bash
# Session 52's device calls (kind nvidia-h100-x1: the first H100 lent since session 37; carry
# [".nvcc_cache.tgz"], timeout 600). Run as
# `bash benchmarks/results/fcgp-s52/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: main (0a811b1's CUDA sources) on the H100: the build; the issue-4 bench first, alone on the
#      GPU (the table the issue asks for, on its own device); each backward kernel's start and end
#      in one call (fcgp_parts.py --timeline); then the whole `-m gpu` suite in four pytest
#      processes at once (the tests are host-bound; none is timed) beside the SASS check.
#   B: (A: the four processes slowed one another and the Hopper backward's tests were cut by the
#      call's end) the Hopper backward's tests alone; memcheck, synccheck and initcheck over the
#      Hopper cases; racecheck over the small Cl(2,0) cases 0-3; the hang loops under both chain
#      settings.
#   C: (B: all clean) the side-stream rerun (every test inside `torch.cuda.stream(side)`) of the
#      FCGP files and the layers, `-m "gpu and not large"`, for the device time left (CALL_S).
#   P: (prepared after the device time for session 53; not run) probe_prep2.patch, timing only: the
#      backward without the later chunk's gelu_transpose (FC_PROBE_PREP2=1) and also without its
#      norm statistics and go^T (=2), against main: what moving those passes off the critical path
#      could save at most (NOTES_FCGP.md session 52). Fill .nvcc_cache.tgz from a patched copy
#      first (nvcc_cache_fill.sh there, CACHE=$PWD/.nvcc_cache).
set -uo pipefail
cd "$(dirname "$0")/../../.."
S52=benchmarks/results/fcgp-s52
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, sanitize, pack
# the whole `-m gpu` suite as four pytest processes at once, split by file (the Hopper file by
# -k backward; call A: 137 to 402 s each, side by side; the Hopper backward's group did not finish)
suite() {
    tests_in sm90_bwd "" tests/test_gpu_fcgp_sm90.py -k backward &
    tests_in sm90_fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward" &
    tests_in fcgp_gate_streams "" tests/test_gpu_fcgp.py tests/test_gpu_gate.py tests/test_gpu_streams.py &
    tests_in sgp_rest "" tests/test_gpu_sgp.py tests/test_gpu_reliability.py tests/test_nn.py \
        tests/test_threads.py tests/test_dlpack.py tests/test_errors.py &
    wait
}
case "${1:-}" in
A)
    begin
    room 110 bench && bench 105
    room 80 timeline && timeout 75 python3 benchmarks/fcgp_parts.py --timeline >"$R/timeline.txt" 2>&1
    grep -E "^Cl|_kernel|span" "$R/timeline.txt" | head -n 60
    (STAGES=sass timeout $((END - SECONDS - 15)) bash tests/gpu_check.sh >"$R/sass.txt" 2>&1) &
    room 120 suite && suite
    wait
    tail -n 8 "$R/sass.txt"
    pack
    ;;
B)
    begin
    room 200 "sm90 backward tests" && tests_in sm90_bwd "" tests/test_gpu_fcgp_sm90.py -k backward
    room 100 "memcheck, synccheck, initcheck" && sanitize "memcheck synccheck initcheck" 150
    room 60 racecheck && LOOPS=0 RACECHECK=1 OUT="$R" CASES="0 1 2 3" CASE_S=25 timeout 110 \
        bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 5
    room 60 "hang loops" && LOOPS=1 RACECHECK=0 OUT="$R" LOOP_S=$(((END - SECONDS - 10) / 2)) ITERS=300 \
        timeout $((END - SECONDS - 5)) bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 3
    pack
    ;;
C)
    begin
    room 120 "side-stream tests" && tests_in side FLASHCLIFFORD_TEST_SIDE_STREAM=1 -m "gpu and not large" \
        tests/test_gpu_fcgp.py tests/test_gpu_streams.py tests/test_nn.py tests/test_gpu_reliability.py \
        tests/test_gpu_fcgp_sm90.py
    pack
    ;;
P)
    # prepared after the device time, not run in session 52. The patch in place (the device's copy
    # of the tree is thrown away after the call); under FC_PROBE_PREP2 unset it runs main's code
    { git apply "$S52/probe_prep2.patch" 2>/dev/null || patch -p1 <"$S52/probe_prep2.patch"; } || exit 1
    begin
    SETTINGS="base;FC_PROBE_PREP2=1;FC_PROBE_PREP2=2;base" PARTS_S=60 timeout 300 bash benchmarks/fcgp_ab.sh 2>&1 |
        grep -E "===|^Cl"
    pack
    ;;
*)
    echo "usage: $0 A | B | C | P"; exit 2 ;;
esac
