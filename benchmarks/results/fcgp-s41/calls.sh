#!/usr/bin/env bash
# Session 41's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   L: what binds gW (gw_tma_kernel), before a cluster form that shares its tiles: main beside
#      three lab trees, each run with the backward's chain off (gW's span is then its own):
#      gw_lab_noy (yg^T never copied: 43% fewer tile bytes at Cl(3,0), 36% at Cl(2,0)),
#      gw_lab_fill (the copies alone, no wgmmas), gw_lab_mma (the wgmmas alone, no copies).
#      Never to be merged: the lab trees write wrong gradients.
#   A: where an H100 kind is lent: session 38's call A (main's checks and the issue-4 table).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench
S=benchmarks/results/fcgp-s41
case "${1:-}" in
L)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gw_lab_noy.patch $S/gw_lab_fill.patch $S/gw_lab_mma.patch" PARTS_S=60 \
        SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0" \
        timeout 480 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gw_tma|gz_tma|^=|^#|rror|fail" | tail -n 90
    ;;
A)
    bash benchmarks/results/fcgp-s38/calls.sh A ;;
*)
    echo "usage: $0 L | A"; exit 2 ;;
esac
