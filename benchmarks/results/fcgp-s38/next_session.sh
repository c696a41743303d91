#!/usr/bin/env bash
# Session 39, prepared in session 38 (not run). carry [".nvcc_cache.tgz"], timeout 600. The
# objects of main, both lab copies and the gz_ovl_g16 copy make a 43 MB .nvcc_cache.tgz: with the
# tree that is about 63 of the 64 MiB a call carries.
# First, here (no GPU), if main's CUDA sources changed since session 38 or .nvcc_cache.tgz is gone:
#   the objects of main and of the three patched copies (NOTES_FCGP.md session 38 item 6 has the
#   commands; add gz_ovl_g16 to its loop).
#   L: gz's K loop and its epilogue timed apart: main against gz_lab_kloop.patch (the K loop and
#      G's staging, no epilogue) and gz_lab_epi.patch (no copies or wgmmas, the epilogue as
#      always), the four cells, two runs a tree. The lab trees write no gradients: no tests there.
#   G: (with L, in the same call) gz_ovl_g16.patch (branch s38-gz-ovl-g16: session 37's overlapped
#      gz with G staged in bf16 for bf16 products, four ring stages where fp32 G left three) under
#      FLASHCLIFFORD_FCGP_GZ_OVERLAP=1, which the other trees ignore; then in its tree under the
#      switch the backward's tests (test_backward_gz_overlap: run-to-run bits and the float64
#      einsum in bf16) and racecheck cases 0-3 (Cl(2,0)). Call `LG` runs both in one call.
#   A: if `status` lists an H100 kind (issue 4's device), results/fcgp-s38/calls.sh A there: main's
#      checks and the issue-4 table on the H100.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench
S=benchmarks/results/fcgp-s38
F=tests/test_gpu_fcgp_sm90.py
case "${1:-}" in
L)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gz_lab_kloop.patch $S/gz_lab_epi.patch" PARTS_S=40 SETTINGS="base;FLASHCLIFFORD_AB_RUN=2" \
        CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 420 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|error" | tail -n 80
    ;;
LG)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    V=FLASHCLIFFORD_FCGP_GZ_OVERLAP=1
    PATCHES="$S/gz_lab_kloop.patch $S/gz_lab_epi.patch $S/gz_ovl_g16.patch" PARTS_S=40 \
        SETTINGS="base;$V;FLASHCLIFFORD_AB_RUN=2;$V FLASHCLIFFORD_AB_RUN=2" \
        CELLS="3,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 330 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|error" | tail -n 120
    T=/tmp/fc_tree_gz_ovl_g16 # where fcgp_ab_trees.sh built it
    room 150 tests && (cd "$T" && env "$V" PYTHONPATH="$T" timeout $((END - SECONDS - 60)) python3 -m pytest -q -m gpu \
        -p no:cacheprovider "$F::test_backward_gz_overlap" "$F::test_backward" "$F::test_backward_chunked" \
        "$F::test_backward_grads_as_scratch" 2>&1 | tail -n 6)
    room 50 racecheck && (cd "$T" && env "$V" OUT="$R/race" LOOPS=0 CASE_S=25 timeout $((END - SECONDS - 5)) \
        bash benchmarks/fcgp_hang_check.sh | head -n 4)
    ;;
A)
    bash "$S/calls.sh" A ;;
*)
    echo "usage: $0 L | LG | A"; exit 2 ;;
esac
