#!/usr/bin/env bash
# Prepared in session 47 for the next device time (kind nvidia-h200, or an H100 where one is lent;
# carry [".nvcc_cache.tgz"], timeout 600). Fill the cache first with the A/B recipe of
# benchmarks/nvcc_cache_fill.sh (main's objects and the patched tree's fcgp_sm90a unit), else each
# tree compiles that unit on the device (5+ minutes).
#   P: norm_rows_cb.patch against main: norm_rows reads its column block from blockIdx.x where main
#      passes one in (a register through the K loop). ptxas (sm_90a, here): the one-group Cl(3,0)
#      bf16 forward 4 / 8 bytes of spills and an 8-byte frame -> 0 (the form session 47 measured
#      219 -> 239 us against session 46's tree); the two-group forms (the default at Cl(3,0)) 12 / 52
#      -> 20 / 68 bytes in bf16, 60 / 44 unchanged in tf32; every other form 0 as before.
#      fcgp_ab.sh's parts twice a tree in the four cells and under FLASHCLIFFORD_FCGP_FWD_GROUPS=1;
#      the forward's tests in the patched tree.
#      Predicted: the one-group Cl(3,0) bf16 kernel back to ~219 us; the two-group default within
#      1-2 us of main's (the bf16 form's spills moved, not removed).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
case "${1:-}" in
P)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES=benchmarks/results/fcgp-s47/norm_rows_cb.patch SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_GROUPS=1" \
        PARTS_S=80 OUT="$R/ab" timeout 360 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        grep -E "===|#####|forward|fwd_tma|fwd_prep|bmm"
    tree=/tmp/fc_tree_norm_rows_cb
    room 150 "forward tests" && (cd "$tree" && PYTHONPATH="$tree" timeout 140 python3 -m pytest -q -m gpu \
        -p no:cacheprovider tests/test_gpu_fcgp_sm90.py -k "not backward" >"$R/pytest_fwd.log" 2>&1
        echo "forward tests in the patched tree: rc $? $(tail -n 1 "$R/pytest_fwd.log")")
    pack
    ;;
*)
    echo "usage: $0 P"; exit 2 ;;
esac
