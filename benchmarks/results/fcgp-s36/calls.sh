#!/usr/bin/env bash
# Session 36's device calls (`kind: nvidia-h100-x1`, carry [".nvcc_cache.tgz"] from
# benchmarks/nvcc_cache_fill.sh; logs to $OUT, the key lines to stdout since only 8 files come back;
# each stage after the build runs only while the call's 570 s leave it room):
#   A: the build (from the carried objects where nvcc's version matches), the forward with the
#      gate formed by its consumers (FLASHCLIFFORD_FCGP_FWD_GATE_IN=2, tf32 and bf16) against g
#      read from fwd_prep (0), twice each, the four issue-4 cells; test_gpu_fcgp_sm90.py; the SASS
#      check; memcheck --hopper
#   B (after A's gate in the kernel was dropped): the build; the Cl(2,0) forward with each
#      component's A fragments formed while the one before's wgmmas run (FWD_PIPE=1, the default)
#      against one register set (0), twice each; test_gpu_fcgp_sm90.py; the issue-4 bench under the
#      faster setting; racecheck over fcgp_hang_check's eight cases; memcheck --hopper
#   D (after C's PIPE 2 lost at Cl(3,0), removed): the build; the forward's tests; the issue-4
#      bench; the SASS check; memcheck --hopper
#   C (after B's PIPE 1 gained 1%): the build; the forward under FWD_PIPE 0, 1 and 2 (each pair's
#      wgmma issued as soon as its fragment is formed), twice each, the four issue-4 cells, and
#      the value of 0-3 whose forward kernels sum lowest (pipe_pick.py); the forward's tests
#      under 2; the issue-4 bench under the picked value; test_gpu_fcgp.py and
#      test_gpu_streams.py; the SASS check
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
END=$((SECONDS + ${CALL_S:-570}))
room() { [ $((END - SECONDS)) -ge "$1" ] || { echo "skipped (${2}): $((END - SECONDS)) s left, needs $1"; return 1; }; }
build() {
    nvcc --version | tail -n 2
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 3
    echo "objects from the carried cache: $(grep -o 'unchanged, object from' "$R/build.log" | wc -l)"
}
case "${1:-}" in
A)
    build
    room 120 parts && CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" PARTS_S=45 \
        SETTINGS="FLASHCLIFFORD_FCGP_FWD_GATE_IN=0;FLASHCLIFFORD_FCGP_FWD_GATE_IN=2;FLASHCLIFFORD_FCGP_FWD_GATE_IN=0 FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_FCGP_FWD_GATE_IN=2 FLASHCLIFFORD_AB_RUN=2" \
        timeout 190 bash benchmarks/fcgp_ab.sh >"$R/ab.log" 2>&1
    grep -E "^Cl.*(forward|bmm)|fwd_tma|fwd_prep" "$R"/parts_*.txt | sed -E 's/ +/ /g; s/4096x512 //; s|^.*/parts_||'
    room 200 "sm90 tests" && timeout 230 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp_sm90.py 2>&1 |
        tail -n 4
    room 100 sass && STAGES=sass timeout 110 bash tests/gpu_check.sh | tail -n 8
    room 45 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh |
        tail -n 3
    ;;
B)
    build
    room 80 parts && CELLS="2,float32,4096,512 2,bfloat16,4096,512" PARTS_S=30 \
        SETTINGS="FLASHCLIFFORD_FCGP_FWD_PIPE=0;FLASHCLIFFORD_FCGP_FWD_PIPE=1;FLASHCLIFFORD_FCGP_FWD_PIPE=0 FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_FCGP_FWD_PIPE=1 FLASHCLIFFORD_AB_RUN=2" \
        timeout 130 bash benchmarks/fcgp_ab.sh >"$R/ab.log" 2>&1
    grep -E "^Cl.*(forward|bmm)|fwd_tma|fwd_prep" "$R"/parts_*.txt | sed -E 's/ +/ /g; s/4096x512 //; s|^.*/parts_||'
    # the setting whose forward kernels summed over both runs and cells took less time
    pick=$(for v in 0 1; do
        echo "$v $(cat "$R"/parts_FWD_PIPE-$v*.txt 2>/dev/null | awk '/fwd_tma_kernel/ {s += $(NF-1)} END {print s + 0}')"
    done | awk '$2 > 0' | sort -k2 -g | head -n 1 | cut -d' ' -f1)
    echo "bench under FLASHCLIFFORD_FCGP_FWD_PIPE=${pick:=1}"
    room 170 "sm90 tests" && timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp_sm90.py 2>&1 |
        tail -n 4
    room 85 bench && { FLASHCLIFFORD_FCGP_FWD_PIPE=$pick STAGES=bench_fcgp timeout 95 bash tests/gpu_check.sh >/dev/null 2>&1
        echo "bench rc $?"; }
    cat "$R"/bench_fcgp*.log 2>/dev/null | tail -n 24
    room 120 racecheck && LOOPS=0 CASE_S=25 timeout $((END - SECONDS - 35)) bash benchmarks/fcgp_hang_check.sh | tail -n 9
    room 30 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout $((END - SECONDS)) \
        bash tests/gpu_check.sh | tail -n 3
    ;;
C)
    build
    room 100 parts && CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" PARTS_S=30 \
        SETTINGS="FLASHCLIFFORD_FCGP_FWD_PIPE=0;FLASHCLIFFORD_FCGP_FWD_PIPE=1;FLASHCLIFFORD_FCGP_FWD_PIPE=2;FLASHCLIFFORD_FCGP_FWD_PIPE=0 FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_FCGP_FWD_PIPE=1 FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_FCGP_FWD_PIPE=2 FLASHCLIFFORD_AB_RUN=2" \
        timeout 150 bash benchmarks/fcgp_ab.sh >"$R/ab.log" 2>&1
    grep -E "^Cl.*(forward|bmm)|fwd_tma|fwd_prep" "$R"/parts_*.txt | sed -E 's/ +/ /g; s/4096x512 //; s|^.*/parts_||'
    pick=$(python3 benchmarks/results/fcgp-s36/pipe_pick.py "$R")
    echo "bench under FLASHCLIFFORD_FCGP_FWD_PIPE=${pick:=1}"
    # the forward's tests with every pair's wgmma issued as soon as formed (the layout test: against
    # the cluster forms, which keep one register set and no overlap, bit for bit)
    T=tests/test_gpu_fcgp_sm90.py
    room 50 "forward tests" && FLASHCLIFFORD_FCGP_FWD_PIPE=2 timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider \
        "$T::test_the_path_is_planned" "$T::test_matrix" "$T::test_gate_off" "$T::test_deterministic_run_to_run" \
        "$T::test_norm_in_the_epilogue_is_the_finalize_pass" "$T::test_weight_layouts_and_clusters_agree" \
        "$T::test_unaligned_rows_fall_back" 2>&1 | tail -n 3
    room 85 bench && { FLASHCLIFFORD_FCGP_FWD_PIPE=$pick STAGES=bench_fcgp timeout 95 bash tests/gpu_check.sh >/dev/null 2>&1
        echo "bench rc $?"; }
    cat "$R"/bench_fcgp*.log 2>/dev/null | grep -E "copy bandwidth|^fcgp"
    room 100 tests && timeout 130 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fcgp.py \
        tests/test_gpu_streams.py 2>&1 | tail -n 3
    room 60 sass && STAGES=sass timeout $((END - SECONDS)) bash tests/gpu_check.sh | tail -n 8
    ;;
D)
    build
    T=tests/test_gpu_fcgp_sm90.py
    room 50 "forward tests" && timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider \
        "$T::test_the_path_is_planned" "$T::test_matrix" "$T::test_gate_off" "$T::test_deterministic_run_to_run" \
        "$T::test_norm_in_the_epilogue_is_the_finalize_pass" "$T::test_weight_layouts_and_clusters_agree" \
        "$T::test_unaligned_rows_fall_back" 2>&1 | tail -n 3
    room 85 bench && { STAGES=bench_fcgp timeout 95 bash tests/gpu_check.sh >/dev/null 2>&1; echo "bench rc $?"; }
    cat "$R"/bench_fcgp*.log 2>/dev/null | grep -E "copy bandwidth|^fcgp"
    room 100 sass && STAGES=sass timeout 115 bash tests/gpu_check.sh | tail -n 8
    room 30 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout $((END - SECONDS)) \
        bash tests/gpu_check.sh | tail -n 3
    ;;
*)
    echo "usage: $0 A|B|C|D"; exit 2 ;;
esac
