#!/usr/bin/env bash
# Session 39, prepared in session 38 (not run). carry [".nvcc_cache.tgz"], timeout 600.
# First, here (no GPU), if main's CUDA sources changed since session 38 or .nvcc_cache.tgz is gone:
#   the objects of main and of both lab copies (NOTES_FCGP.md session 38 item 6 has the commands).
#   L: gz's K loop and its epilogue timed apart: main against gz_lab_kloop.patch (the K loop and
#      G's staging, no epilogue) and gz_lab_epi.patch (no copies or wgmmas, the epilogue as
#      always), the four cells, two runs a tree. The lab trees write no gradients: no tests there.
#   A: if `status` lists an H100 kind (issue 4's device), results/fcgp-s38/calls.sh A there: main's
#      checks and the issue-4 table on the H100.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench
S=benchmarks/results/fcgp-s38
case "${1:-}" in
L)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gz_lab_kloop.patch $S/gz_lab_epi.patch" PARTS_S=40 SETTINGS="base;FLASHCLIFFORD_AB_RUN=2" \
        CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 420 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|error" | tail -n 80
    ;;
A)
    bash "$S/calls.sh" A ;;
*)
    echo "usage: $0 L | A"; exit 2 ;;
esac
