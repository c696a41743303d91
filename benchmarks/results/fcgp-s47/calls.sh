#!/usr/bin/env bash
# Session 47's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz", ".labbin"],
# timeout 600). Run as `bash benchmarks/results/fcgp-s47/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: (1) benchmarks/lab/wgmma_rate.cu, its new MN variant: the bf16 forward's copy-free loop with W
#      read MN-major (128-byte swizzle, W as stored) against K-major (W^T), N 64 (Cl(3,0)) and 128
#      (Cl(2,0)): is the MN-major read what costs the Cl(3,0) bf16 forward 5-7% under
#      FLASHCLIFFORD_FCGP_FWD_WMN=1 (sessions 34-35)? The binary is built here (.labbin, carried).
#      (2) W as stored multicast in 1 x 2 (new: FLASHCLIFFORD_FCGP_FWD_CLUSTER=3 with WMN), the bf16
#      cells under the default, CLUSTER=3, WMN=1 and WMN=1 CLUSTER=3, alternating, twice each.
#      (3) the layout test (bitwise against the default over every cluster shape) under the default
#      and WMN=1, and memcheck over the Hopper cases under CLUSTER=3.
#   B: (A: the MN-major read costs the copy-free loop 3.7% at N 64, 0 at N 128; W as stored in 1 x 2
#      slower, dropped; two components a warpgroup at N 128 +11%) the forward in two component
#      groups (FLASHCLIFFORD_FCGP_FWD_GROUPS=2, Cl(3,0): a CTA half the output components over 128
#      columns): its test and the layout tests, the four cells under the default and GROUPS=2
#      alternating, twice each, then memcheck over the Hopper cases under GROUPS=2.
#   C: (B: Cl(3,0) bf16 kernel 239 -> 208 us, forward 259 -> 226 (the one-group form of that build
#      slower than main's 219); tf32 373 -> 353, 404 -> 379; tests 24 passed, memcheck exit 0) two
#      groups by the rule at Cl(3,0): the forward's tests, the issue-4 bench, the SASS check, memcheck
#      over the Hopper cases, racecheck over the small Cl(3,0) cases, then test_gpu_fcgp.py.
#   D: (C: the bench's Cl(3,0) bf16 forward 1.46x, tf32 1.27x, tf32 forward+backward 1.44x; 147 + 258
#      tests passed, memcheck 0 errors over 228 cases, racecheck 0 hazards in cases 4-7; the SASS
#      stage cut by its 60-s limit) the SASS check with the time it needs, and the Hopper backward
#      tests of Cl(3,0) (the recomputed product among them runs the forward GEMM).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
case "${1:-}" in
A)
    begin
    if ! .labbin/wgmma_rate >"$R/rate.txt" 2>&1; then
        echo "carried lab failed: $(tail -n 2 "$R/rate.txt"); building it here"
        lab_build wgmma_rate && "$T/wgmma_rate" >"$R/rate.txt" 2>&1
    fi
    grep -E "^pure  bf16|^comp .*bf16" "$R/rate.txt"
    for r in 1 2; do
        for s in "" "FLASHCLIFFORD_FCGP_FWD_CLUSTER=3" "FLASHCLIFFORD_FCGP_FWD_WMN=1" \
            "FLASHCLIFFORD_FCGP_FWD_WMN=1 FLASHCLIFFORD_FCGP_FWD_CLUSTER=3"; do
            room 40 "parts $s" || break
            echo "=== ${s:-defaults}, run $r"
            env $s timeout 40 python3 benchmarks/fcgp_parts.py --reps 20 --kernels \
                --cells 2,bfloat16,4096,512 3,bfloat16,4096,512 2>&1 | grep -v -i warn |
                tee "$R/parts_${r}_$(echo "${s:-default}" | tr ' =' '_-').txt" | grep -E "bmm|forward|fwd_"
        done
    done
    room 90 "layout tests" && tests_in layout "" tests/test_gpu_fcgp_sm90.py -k "layouts_and_clusters or deterministic"
    room 90 "layout tests, WMN=1" && tests_in layout_wmn1 FLASHCLIFFORD_FCGP_FWD_WMN=1 tests/test_gpu_fcgp_sm90.py \
        -k "layouts_and_clusters or deterministic or matrix"
    room 90 "memcheck, 1 x 2" && FLASHCLIFFORD_FCGP_FWD_CLUSTER=3 sanitize memcheck 80
    pack
    ;;
B)
    begin
    room 120 "tests" && tests_in groups "" tests/test_gpu_fcgp_sm90.py -k "component_groups or layouts_and_clusters or norm_in_the_epilogue"
    for r in 1 2; do
        for s in "" "FLASHCLIFFORD_FCGP_FWD_GROUPS=2"; do
            room 45 "parts $s" || break
            echo "=== ${s:-defaults}, run $r"
            env $s timeout 45 python3 benchmarks/fcgp_parts.py --reps 20 --kernels 2>&1 | grep -v -i warn |
                tee "$R/parts_${r}_$(echo "${s:-default}" | tr ' =' '_-').txt" | grep -E "bmm|forward|fwd_"
        done
    done
    room 60 "memcheck, groups 2" && FLASHCLIFFORD_FCGP_FWD_GROUPS=2 sanitize memcheck 50
    pack
    ;;
C)
    begin
    room 150 "forward tests" && tests_in fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward"
    room 110 bench && bench 100
    room 70 sass && STAGES=sass timeout 60 bash tests/gpu_check.sh | tail -n 6
    room 60 memcheck && sanitize memcheck 50
    room 100 racecheck && RACECHECK=1 LOOPS=0 CASE_S=25 OUT="$R" CASES="4 5 6 7" \
        timeout 110 bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 8
    room 60 "test_gpu_fcgp.py" && tests_in fcgp "" tests/test_gpu_fcgp.py
    pack
    ;;
D)
    begin
    room 130 sass && STAGES=sass timeout 125 bash tests/gpu_check.sh | tail -n 12
    room 60 "backward tests" && tests_in bwd3 "" tests/test_gpu_fcgp_sm90.py -k "backward and Cl(3"
    pack
    ;;
*)
    echo "usage: $0 A | B | C | D"; exit 2 ;;
esac
