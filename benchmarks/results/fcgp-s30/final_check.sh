#!/usr/bin/env bash
# Session 30's checks of the final tree, two calls on one machine (logs straight to $OUT):
#   A (cold): the build, the three FCGP test files, the hang loops under both chain settings
#   B: racecheck over the small set a case at a time, memcheck --hopper, the SASS check, the
#      issue-4 bench and the parts split
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
case "${1:-}" in
A)
    STAGES=build timeout 300 bash tests/gpu_check.sh | tail -n 2
    GPU_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" STAGES=test \
        TEST_TIMEOUT_S=200 timeout 210 bash tests/gpu_check.sh | tail -n 4
    RACECHECK=0 LOOP_S=20 timeout 50 bash benchmarks/fcgp_hang_check.sh
    ;;
B)
    LOOPS=0 CASE_S=28 timeout 150 bash benchmarks/fcgp_hang_check.sh | tail -n 9
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh | tail -n 3
    STAGES=sass,bench_fcgp timeout 150 bash tests/gpu_check.sh | tail -n 14
    PYTHONPATH="$PWD" timeout 60 python3 benchmarks/fcgp_parts.py 2>&1 | grep -v -i warn | tee "$R/parts_final.txt"
    ;;
*)
    echo "usage: $0 A|B"; exit 2 ;;
esac
