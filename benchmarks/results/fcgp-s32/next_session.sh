#!/usr/bin/env bash
# Session 32's device calls (`kind: nvidia-h100-x1`; logs straight to $OUT, the key lines to
# stdout since only 8 files come back):
#   H (cold): go_rows_roll.patch (at D 8 go_rows keeps two rows' loads in flight: the next row's
#      loads go out before a row is kept) against main, two runs a tree under the defaults; then
#      the three FCGP test files in the patched tree (if it is merged as is, they are main's)
#   J (cold, from branch s32-fwd-persist): the persistent forward's A/B by its switch on one
#      build, its tests, the SASS check
#   K (cold; session 33's first call): bf16_sign.patch and bf16_sign_tma_store.patch against
#      main, then test_gpu_fcgp_sm90.py in the tree with both
#   I (cold): main's checks in what device time was left (about 14 min): the build, the issue-4
#      bench, the three FCGP test files, memcheck --hopper, the SASS check, racecheck a case at a
#      time while the call's time lasts
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s32
KERNELS="^Cl.*(torch.bmm|forward|backward)|fwd_tma|gelu_transpose|go_rows|go_transpose|norm_stats|gw_tma|gz_tma"
# fcgp_ab_trees.sh under a limit of $1 seconds (PATCHES, SETTINGS, TREE_TESTS from the caller's
# environment), its log to $R/ab_trees.log, its headings and test counts, then each parts file's
# kernel lines (only 8 files come back from a call)
ab() {
    timeout "$1" bash benchmarks/fcgp_ab_trees.sh >"$R/ab_trees.log" 2>&1
    echo "ab_trees rc $?"
    grep -E "^=|passed|failed|rror" "$R/ab_trees.log" | tail -n 12
    for f in "$R"/*/parts_*.txt; do
        echo "## $f"
        grep -E "$KERNELS" "$f" | sed -E 's/ +/ /g; s/4096x512 //'
    done
}
case "${1:-}" in
H)
    PATCHES="$S/go_rows_roll.patch" SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_PDL=0" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" \
        ab 560
    ;;
I)
    STAGES=build timeout 240 bash tests/gpu_check.sh | tail -n 2
    STAGES=bench_fcgp timeout 100 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    GPU_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" STAGES=test \
        TEST_TIMEOUT_S=220 timeout 225 bash tests/gpu_check.sh | tail -n 4
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 45 bash tests/gpu_check.sh | tail -n 3
    STAGES=sass timeout 30 bash tests/gpu_check.sh | tail -n 6
    LOOPS=0 CASE_S=25 timeout 60 bash benchmarks/fcgp_hang_check.sh | tail -n 9
    ;;
J)
    # the persistent forward (run from branch s32-fwd-persist's tree, now fwd_persist.patch):
    # its A/B by the switch on one build (FLASHCLIFFORD_FCGP_FWD_PERSIST=0: one CTA a tile, the
    # loop run once), then test_gpu_fcgp_sm90.py, then the SASS check in what is left
    SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_PERSIST=0" TREE_TESTS="tests/test_gpu_fcgp_sm90.py" \
        ab 430
    STAGES=sass timeout 140 bash tests/gpu_check.sh | tail -n 8
    ;;
K)
    # session 33's first call: against main, (1) the bf16 pairs' signs on the running sum
    # instead of sign-flipped copies of x (bf16_sign.patch; ptxas: the Cl(3,0) bf16 forward's
    # 80-96 bytes of spills gone, nothing else changes) and (2) that with the bf16 output stored
    # by the copy engine from the idle ring (bf16_sign_tma_store.patch; tma_store.patch is (2)
    # alone); then test_gpu_fcgp_sm90.py in the tree with both. Session 32 had no device time
    # left to run it; three builds take about 5.5 minutes.
    PATCHES="$S/bf16_sign.patch $S/bf16_sign_tma_store.patch" SETTINGS="base" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py" \
        ab 580
    ;;
*)
    echo "usage: $0 H|I|J|K"; exit 2 ;;
esac
