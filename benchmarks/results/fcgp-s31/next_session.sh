#!/usr/bin/env bash
# Session 31's device calls (logs straight to $OUT; `kind: nvidia-h100-x1`; C and F ran; G was cut
# by the end of session 31's device time while building: session 32's first call):
#   C (cold): transposes.patch (gelu_transpose and got_store: a thread's piece place and tile rows
#      formed once, 16-byte stores by st.global.v4) and transposes_norm_inv.patch (the same, and
#      the forward epilogue's norm_inv with its partial loads unrolled) against main, by
#      fcgp_ab_trees.sh under the default rule and with either go^T pass forced; then the three
#      FCGP test files in the transposes_norm_inv tree. The kernel lines of every parts file are
#      printed at the end (only 8 files come back).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s31
# the A/B log's headings and test counts (its last $1 lines), then each parts file's lines
# matching $2 (only 8 files come back from a call)
show_ab() {
    grep -E "^=|passed|failed|rror" "$R/ab_trees.log" | tail -n "$1"
    for f in "$R"/*/parts_*.txt; do
        echo "## $f"
        grep -E "$2" "$f" | sed -E 's/ +/ /g; s/4096x512 //'
    done
}
# fcgp_ab_trees.sh under a limit of $1 seconds (PATCHES, SETTINGS, TREE_TESTS from the caller's
# environment), its log to $R/ab_trees.log; then show_ab $2 $3
ab() {
    timeout "$1" bash benchmarks/fcgp_ab_trees.sh >"$R/ab_trees.log" 2>&1
    echo "ab_trees rc $?"
    show_ab "$2" "$3"
}
KERNELS="^Cl.*(forward|backward)|fwd_tma|gelu_transpose|go_rows|go_transpose|norm_stats"
case "${1:-}" in
C)
    PATCHES="$S/transposes.patch $S/transposes_norm_inv.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=1;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=2" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" \
        ab 560 12 "$KERNELS"
    ;;
F)
    # go_rows with both tiles' loads out before the first is used (launch bounds (256, 2): at
    # (256, 3) ptxas spills 4-12 bytes at Cl(3,0); go_rows_unroll.patch) against main (which has
    # transposes.patch since C), the go tests in its tree; then the issue-4 bench on main (final
    # check B's bench stage ran past its 150-s limit after the SASS stage)
    PATCHES="$S/go_rows_unroll_lb2.patch" SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_GO_FUSED=1" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py -k go_" \
        ab 400 8 "$KERNELS"
    STAGES=bench_fcgp timeout 180 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    ;;
G)
    # go_rows' gathered loads at D 4 with the go^T rule by element size, and the forward's
    # epilogue norm over a cluster of the row block's column tiles, whose tiles may share x and y
    # by multicast (gather_d4_norm_cluster.patch) against main; in the patched tree
    # FLASHCLIFFORD_FCGP_FWD_NORM_CLUSTER=0 isolates the gather and
    # FLASHCLIFFORD_FCGP_FWD_NC_MULTICAST=1 adds the multicast (main ignores both variables: its
    # other runs are the spread); then the norm and go tests in the patched tree
    PATCHES="$S/gather_d4_norm_cluster.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_NORM_CLUSTER=0;FLASHCLIFFORD_FCGP_FWD_NC_MULTICAST=1" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py::test_norm_in_the_epilogue_is_the_finalize_pass tests/test_gpu_fcgp_sm90.py::test_backward_go_fused" \
        ab 540 12 "$KERNELS"
    ;;
*)
    echo "usage: $0 C|F|G"; exit 2 ;;
esac
