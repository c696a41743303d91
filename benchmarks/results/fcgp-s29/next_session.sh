#!/usr/bin/env bash
# The next GPU session's first two calls (written in session 29), logs straight to $OUT; run them
# back to back on one warm machine (`kind: nvidia-h100-x1`). They run on main what session 29
# could not after its last change (gW's shared-address loads, the forward's one fence, 064ab9e):
#   A (cold): the build, the three FCGP test files, the hang loops under both chain settings
#   B: racecheck over the small set a case at a time, memcheck --hopper, the SASS check and the
#      issue-4 bench
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
case "${1:-}" in
A)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    GPU_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" STAGES=test \
        TEST_TIMEOUT_S=170 timeout 180 bash tests/gpu_check.sh | tail -n 4
    RACECHECK=0 LOOP_S=30 timeout 70 bash benchmarks/fcgp_hang_check.sh
    ;;
B)
    LOOPS=0 CASE_S=28 timeout 235 bash benchmarks/fcgp_hang_check.sh
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh | tail -n 4
    STAGES=sass,bench_fcgp timeout 250 bash tests/gpu_check.sh | tail -n 14
    ;;
*)
    echo "usage: $0 A|B"; exit 2 ;;
esac
