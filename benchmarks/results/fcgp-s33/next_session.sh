#!/usr/bin/env bash
# Session 33's device calls (`kind: nvidia-h100-x1`; logs to $OUT, the key lines to stdout since
# only 8 files come back):
#   L (cold): main (11df60e: session 32's bf16 patches merged) against tma_out_fp32.patch (the
#      fp32 output by TMA tensor stores too, where a stage holds a warpgroup's tile: Cl(3,0)
#      tf32), each under the defaults, the 1 x 2 cluster (W^T multicast to two row tiles) and
#      FWD_TMA_OUT=0 (store_out; main ignores it: a second run of main); then the three FCGP
#      test files in the patched tree
#   M (cold): main's checks after L's merge (tma_out_fp32 merged: ee4617d): build, the issue-4
#      bench, memcheck --hopper, the SASS check
#   R (warm, after M): racecheck a case at a time while the call's time lasts
# Session 34 (prepared in session 33, not run):
#   N (cold): main against fwd_wmn.patch (bf16 forward reading W as stored, MN-major: no W^T in
#      fwd_prep), each under the defaults and the 1 x 2 cluster, the patched tree also with
#      FWD_WMN=0 (its own stage-order path); then the three FCGP test files in the patched tree
#   O (cold): tma_out_fp32.patch again, three runs of each store form in its tree (FWD_TMA_OUT=0
#      is store_out; FLASHCLIFFORD_AB_RUN only labels a repeat), Cl(3,0) tf32 and bf16 only
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s33
ab() { bash benchmarks/fcgp_ab_report.sh "$1"; } # the A/B, its key lines to stdout
case "${1:-}" in
L)
    PATCHES="$S/tma_out_fp32.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_CLUSTER=3;FLASHCLIFFORD_FCGP_FWD_TMA_OUT=0" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" \
        ab 585
    ;;
M)
    STAGES=build timeout 320 bash tests/gpu_check.sh | tail -n 2
    STAGES=bench_fcgp timeout 100 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 50 bash tests/gpu_check.sh | tail -n 3
    STAGES=sass timeout 120 bash tests/gpu_check.sh | tail -n 8
    ;;
R)
    LOOPS=0 CASE_S=65 timeout 560 bash benchmarks/fcgp_hang_check.sh | tail -n 12
    ;;
N)
    PATCHES="$S/fwd_wmn.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_CLUSTER=3;FLASHCLIFFORD_FCGP_FWD_WMN=0" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" \
        ab 585
    ;;
O)
    PATCHES="$S/tma_out_fp32.patch" CELLS="3,float32,4096,512 3,bfloat16,4096,512" \
        SETTINGS="FLASHCLIFFORD_AB_RUN=1;FLASHCLIFFORD_FCGP_FWD_TMA_OUT=0;FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_FCGP_FWD_TMA_OUT=0 FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_AB_RUN=3;FLASHCLIFFORD_FCGP_FWD_TMA_OUT=0 FLASHCLIFFORD_AB_RUN=3" \
        ab 560
    ;;
*)
    echo "usage: $0 L|M|R|N|O"; exit 2 ;;
esac
