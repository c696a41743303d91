#!/usr/bin/env bash
# Session 46's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz"],
# timeout 600). Run as `bash benchmarks/results/fcgp-s46/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
# (Before these: results/fcgp-s45/next_session.sh P, prep_wave.patch against main; its logs are
# in results/fcgp-s46/callP/.)
#   A: main (9f79f40's CUDA sources). The GPU tests session 45 did not reach (test_gpu_reliability.py
#      and test_gpu_sgp.py whole), the side-stream rerun of the FCGP, stream, nn and reliability
#      files (every gpu test inside a non-default stream, TESTPLAN H3; the large tests left out),
#      and the forward's held timeline in the four cells (where the op's time beyond its two
#      kernels goes).
#   B: (A: the rest cut at 280 s, after 126 of the 134 tests, none failed; the side-stream rerun
#      313 passed) the 8 tests A did not reach, and benchmarks/lab/gate_rate.cu (the gate product's
#      variants: fwd_prep's occupancy against gate_product's, 8 blocks an SM, half pieces, no gate),
#      twice, at Cl(2,0)'s n = 4096 x 512 and at 4x that.
#   C: (B: the 8 tests 7 passed, 1 skipped (one GPU); gate_rate: the gate costs ~1.2 us over an
#      elementwise pass of the same bytes, and no occupancy form gains more than 0.25 us) what
#      the memory bound costs the backward today: fcgp_parts.py's four cells under the defaults
#      (two chunks from 2048 rows) and FLASHCLIFFORD_FCGP_BWD_CHUNKS=1 (one chunk: 4.0 passes, over
#      issue 4's 3.5), alternating, twice each.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
case "${1:-}" in
A)
    begin
    room 60 timeline && timeout 60 python3 benchmarks/fcgp_parts.py --timeline --reps 5 --cells 2,float32,4096,512 \
        3,float32,4096,512 2,bfloat16,4096,512 3,bfloat16,4096,512 2>&1 | grep -v -i warn | tee "$R/timeline.txt" |
        grep -E "forward|bmm"
    room 120 "the rest of the tests" && (END=$((SECONDS + 300)); tests_in rest "" --durations=10 \
        tests/test_gpu_reliability.py tests/test_gpu_sgp.py)
    grep -E "^[0-9.]+s (call|setup)" "$R/pytest_rest.log" | head -n 6
    room 60 "side-stream rerun" && tests_in side FLASHCLIFFORD_TEST_SIDE_STREAM=1 -m "gpu and not large" \
        tests/test_gpu_reliability.py tests/test_gpu_streams.py tests/test_nn.py tests/test_gpu_fcgp.py
    pack
    ;;
B)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build gate_rate && for r in 1 2; do "$T/gate_rate"; done && "$T/gate_rate" $((4 * 4096 * 512))
    build
    room 60 "the last 8 tests" && tests_in last "" tests/test_gpu_sgp.py -k \
        "every_resident_launch_shape or out_of_memory or empty_batch_on_cuda or second_gpu"
    pack
    ;;
C)
    begin
    for r in 1 2; do
        for c in 0 1; do
            room 45 "parts chunks $c" || break
            echo "=== chunks setting $c (0: the rule), run $r"
            FLASHCLIFFORD_FCGP_BWD_CHUNKS=$c timeout 60 python3 benchmarks/fcgp_parts.py --reps 20 2>&1 |
                grep -v -i warn | tee "$R/parts_chunks${c}_$r.txt" | grep -E "bmm|forward|backward"
        done
    done
    pack
    ;;
*)
    echo "usage: $0 A | B | C"; exit 2 ;;
esac
