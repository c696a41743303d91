#!/usr/bin/env bash
# Session 35's device calls (`kind: nvidia-h100-x1`; logs to $OUT, the key lines to stdout since
# only 8 files come back):
#   Z (cold; session 34's script, results/fcgp-s34/next_session.sh Z): main against
#      gz_groups_bf16.patch, three runs a tree, then test_gpu_fcgp_sm90.py in the patched tree
#   G (cold): main against gate_wmn.patch (the gate formed in the forward's producer warpgroup, no
#      gate pass; the bf16 forward reading W as stored in the permuted K order), each tree under
#      the defaults and FLASHCLIFFORD_FCGP_FWD_WMN=0 (main ignores it: a second run), the four
#      issue-4 cells; then test_gpu_fcgp_sm90.py in the patched tree and where its forward
#      kernels' local-memory accesses lie
#   F (cold): main after the merge: build, the issue-4 bench, test_gpu_fcgp.py and
#      test_gpu_streams.py, memcheck --hopper, the SASS check, racecheck case by case while the
#      call lasts
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s35
ab() { bash benchmarks/fcgp_ab_report.sh "$1"; } # the A/B, its key lines to stdout
case "${1:-}" in
G)
    PATCHES="$S/gate_wmn.patch" SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_WMN=0" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py" ab 545
    T=/tmp/fc_tree_gate_wmn
    [ -d "$T" ] && (cd "$T" && timeout 40 python3 tests/sass_check.py --sites "fwd_tma_kernel<1, [12], 1, 1, true, [^,]+, true" 2>&1 |
        cut -c1-200 | head -n 30)
    ;;
F)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    STAGES=bench_fcgp timeout 90 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp.py tests/test_gpu_streams.py 2>&1 |
        tail -n 4
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 40 bash tests/gpu_check.sh | tail -n 3
    STAGES=sass timeout 60 bash tests/gpu_check.sh | tail -n 12
    LOOPS=0 CASE_S=25 timeout 120 bash benchmarks/fcgp_hang_check.sh | tail -n 9
    ;;
*)
    echo "usage: $0 G|F"; exit 2 ;;
esac
