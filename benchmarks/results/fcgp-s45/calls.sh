#!/usr/bin/env bash
# Session 45's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   A: the final tree of session 44 (9f79f40's CUDA sources) through every GPU test at once (the
#      last whole run was session 32's three FCGP files; since then only subsets ran), racecheck
#      over the eight small cases (not run since session 42 on the default kernels), and where
#      fwd_prep's time goes at the two bf16 cells (12.8 and 6.2 us for about 34 and 13 MB: 2.6 and
#      2.0 TB/s against a 4.27 TB/s copy), the one pass before the bf16 forward's GEMM.
#      (A: tests/ under -m gpu passed its first 767 tests, none failed, before its 330 s ended;
#      fwd_prep at 1.24 TB/s under ncu, its samples waiting on its loads; racecheck 0 hazards in
#      each of the eight cases.)
#   B: initcheck over the Hopper cases with gpu_sanitize.py's host rewrite of the saved output
#      (written in session 44, never run), 300 s; then the GPU tests A did not reach
#      (sm90_tail.txt: test_gpu_fcgp_sm90.py's last 37, then every later file).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
case "${1:-}" in
A)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 200 tests && END=$((SECONDS + 350)) tests_in all "" --durations=15 tests/ # 330 s at most
    grep -E "^[0-9.]+s (call|setup)" "$R/pytest_all.log" | head -n 8
    for c in 3 2; do
        room 60 "ncu fwd_prep $c" && SRC_LINES=30 ncu_src "prep$c" fwd_prep \
            python3 benchmarks/fcgp_parts.py --cells "$c,bfloat16,4096,512" --once
    done
    room 60 racecheck && RACECHECK=1 LOOPS=0 CASE_S=45 OUT="$R" CASES="0 1 2 3 4 5 6 7" \
        timeout $((END - SECONDS - 5)) bash benchmarks/fcgp_hang_check.sh
    pack
    ;;
B)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 320 initcheck && sanitize initcheck 310
    # the GPU tests call A did not reach (its 330 s ended after test 500 of test_gpu_fcgp_sm90.py)
    room 60 "the rest of the tests" && tests_in rest "" --durations=10 $(cat benchmarks/results/fcgp-s45/sm90_tail.txt) \
        tests/test_gpu_gate.py tests/test_gpu_reliability.py tests/test_gpu_sgp.py tests/test_gpu_streams.py \
        tests/test_nn.py tests/test_threads.py
    grep -E "^[0-9.]+s (call|setup)" "$R/pytest_rest.log" | head -n 6
    pack
    ;;
C)
    # (B: initcheck's 100 reports were all at the host rewrite itself, the device-to-host copy of
    # the copy engine's out read as uninitialized; cut at 310 s. The rest of the tests reached
    # test_gpu_reliability.py, none failed.) The rewrite now takes the CPU backend's values.
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 60 memcheck && sanitize memcheck 55
    room 60 initcheck && sanitize initcheck $((END - SECONDS - 5))
    pack
    ;;
D)
    # (C: initcheck 0 errors over the 228 Hopper cases in 28 s; memcheck cut by its 55 s, the
    # canaries taking 35 of them.) Run as one line on the warm machine; here as it ran.
    sanitize "memcheck synccheck" 150
    pack
    ;;
E)
    # (D: memcheck 0 errors in 30 s, synccheck 0 errors in 22 s.) The last device seconds: files
    # of the GPU suite that calls A and B did not reach (test_gpu_reliability.py's 18 left out).
    timeout 115 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_streams.py tests/test_nn.py \
        tests/test_threads.py tests/test_gpu_sgp.py 2>&1 | tail -n 6
    ;;
*)
    echo "usage: $0 A | B | C | D | E"; exit 2 ;;
esac
