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
#   F (cold; what ran instead of the F first planned, G's gate having measured far slower): main
#      with the bf16 forward reading W as stored (wmn.patch merged, prep's gate kept): build; the
#      bf16 cells under FLASHCLIFFORD_FCGP_FWD_WMN=1, 0, 2, 1 (fcgp_ab.sh);
#      the issue-4 bench under the setting the parts favour (wmn_pick.py: its pattern missed the
#      parts lines in the call, so the bench ran under 1; fixed since); where the Cl(3,0) bf16
#      forwards' local-memory accesses lie (printed nothing in 30 s); the forward's tests of
#      test_gpu_fcgp_sm90.py
# Session 36 (prepared in session 35, not run):
#   U (cold): main's build, the SASS check with time to finish, then Nsight Compute's stall samples
#      a source line of gz at Cl(3,0) bf16 (what binds it, two byte cuts having lost)
#   C (cold): main's build, racecheck over the eight cases and memcheck --hopper (the forward
#      reading W as stored has had neither), test_gpu_fcgp.py and test_gpu_streams.py
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
    CELLS="2,bfloat16,4096,512 3,bfloat16,4096,512" PARTS_S=40 \
        SETTINGS="FLASHCLIFFORD_FCGP_FWD_WMN=1;FLASHCLIFFORD_FCGP_FWD_WMN=0;FLASHCLIFFORD_FCGP_FWD_WMN=2;FLASHCLIFFORD_FCGP_FWD_WMN=1 FLASHCLIFFORD_AB_RUN=2" \
        timeout 130 bash benchmarks/fcgp_ab.sh >"$R/ab.log" 2>&1
    echo "ab rc $?"
    grep -E "^Cl.*forward|fwd_tma|fwd_prep" "$R"/parts_*.txt | sed -E 's/ +/ /g; s/4096x512 //; s|^.*/parts_||'
    pick=$(python3 "$S/wmn_pick.py" "$R")
    echo "bench under FLASHCLIFFORD_FCGP_FWD_WMN=$pick"
    FLASHCLIFFORD_FCGP_FWD_WMN=$pick STAGES=bench_fcgp timeout 90 bash tests/gpu_check.sh >/dev/null 2>&1
    echo "bench rc $?"
    cat "$R"/bench_fcgp*.log
    timeout 30 python3 tests/sass_check.py --sites "fwd_tma_kernel<1, 2, 1, 1, true" 2>&1 | cut -c1-160 | head -n 12
    # the forward's tests (the change is the forward's): the matrix against the float64 einsum, the
    # gate off, run to run, the norm, and the layouts bit for bit (W as stored against W^T's boxes)
    T=tests/test_gpu_fcgp_sm90.py
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider "$T::test_the_path_is_planned" "$T::test_matrix" \
        "$T::test_gate_off" "$T::test_deterministic_run_to_run" "$T::test_norm_in_the_epilogue_is_the_finalize_pass" \
        "$T::test_weight_layouts_and_clusters_agree" "$T::test_unaligned_rows_fall_back" 2>&1 | tail -n 4
    ;;
U)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    STAGES=sass timeout 110 bash tests/gpu_check.sh | tail -n 14
    NCU_CELLS=3,bfloat16,4096,512 NCU_KERNELS="gz_tma_kernel" STAGES=ncu_src_fcgp \
        timeout 150 bash tests/gpu_check.sh | tail -n 70
    ;;
C)
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 2
    LOOPS=0 CASE_S=25 timeout 130 bash benchmarks/fcgp_hang_check.sh | tail -n 9
    SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 40 bash tests/gpu_check.sh | tail -n 3
    timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp.py tests/test_gpu_streams.py 2>&1 |
        tail -n 4
    ;;
*)
    echo "usage: $0 G|F|U|C"; exit 2 ;;
esac
