#!/usr/bin/env bash
# Session 34's device calls (`kind: nvidia-h100-x1`; logs to $OUT, the key lines to stdout since
# only 8 files come back):
#   N (cold; session 33's script, results/fcgp-s33/next_session.sh N): main against fwd_wmn.patch
#      (callN/: the patched tree's files did not come back, and its tests were cut by the timeout
#      after a 308-s build)
#   G (cold): main against combo.patch (fwd_wmn restricted to tiles of 128 columns or more, and
#      gz in clusters of two column tiles sharing go by multicast), each under the defaults and
#      FWD_WMN=0 (main ignores it: a second run of main); then the three FCGP test files in the
#      patched tree
#   M (cold): main's checks after the merges: build, the issue-4 bench, memcheck --hopper, the
#      SASS check, then racecheck a case at a time while the call's time lasts
#   K (cold; what ran instead of M, nothing having merged, with too little device time left for
#      M and R): main's build, racecheck over the eight cases, memcheck --hopper, the issue-4 bench
# Session 35 (prepared in session 34, not run):
#   Z (cold): main against gz_groups_bf16.patch (gz at Cl(3,0) bf16 in clusters of two CTAs that
#      split the pairs, as tf32: 36 KB a step into each SM instead of 52), the Cl(3,0) cells,
#      three runs a tree; then test_gpu_fcgp_sm90.py in the patched tree
#   U (cold): main's build, then Nsight Compute on gz and gW at Cl(3,0) bf16: the units' throughput
#      (SpeedOfLight, workload sections) and the stall samples a source line
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s34
ab() { bash benchmarks/fcgp_ab_report.sh "$1"; } # the A/B, its key lines to stdout
case "${1:-}" in
G)
    PATCHES="$S/combo.patch" SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_WMN=0" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" \
        ab 590
    ;;
M)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    STAGES=bench_fcgp timeout 100 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 50 bash tests/gpu_check.sh | tail -n 3
    STAGES=sass timeout 120 bash tests/gpu_check.sh | tail -n 8
    LOOPS=0 CASE_S=40 timeout 150 bash benchmarks/fcgp_hang_check.sh | tail -n 12
    ;;
K)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    LOOPS=0 CASE_S=40 timeout 170 bash benchmarks/fcgp_hang_check.sh | tail -n 9
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 40 bash tests/gpu_check.sh | tail -n 3
    STAGES=bench_fcgp timeout 90 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    ;;
Z)
    PATCHES="$S/gz_groups_bf16.patch" CELLS="3,float32,4096,512 3,bfloat16,4096,512" \
        SETTINGS="FLASHCLIFFORD_AB_RUN=1;FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_AB_RUN=3" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py" ab 590
    ;;
U)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    NCU_CELLS=3,bfloat16,4096,512 NCU_MEM_KERNELS="gz_tma_kernel gw_tma_kernel" STAGES=ncu_mem_fcgp \
        timeout 100 bash tests/gpu_check.sh | tail -n 30
    NCU_CELLS=3,bfloat16,4096,512 NCU_KERNELS="gz_tma_kernel" STAGES=ncu_src_fcgp \
        timeout 150 bash tests/gpu_check.sh | tail -n 70
    ;;
R)
    LOOPS=0 CASE_S=65 timeout 560 bash benchmarks/fcgp_hang_check.sh | tail -n 12
    ;;
*)
    echo "usage: $0 G|M|K|Z|U|R"; exit 2 ;;
esac
