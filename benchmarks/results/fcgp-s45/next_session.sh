#!/usr/bin/env bash
# Prepared in session 45 for the next device time (kind nvidia-h200, or an H100 where one is lent;
# carry [".nvcc_cache.tgz"], timeout 600). The cache filled in session 45 holds main's objects and
# the patched fcgp_sm90a unit's, so neither tree compiles there while main's CUDA sources are
# 9f79f40's (refill it after any .cu change: benchmarks/nvcc_cache_fill.sh's A/B recipe).
#   P: prep_wave.patch (branch s45-prep-wave: fwd_prep in one wave, its gate threads two pieces'
#      loads ahead) against main. fcgp_ab.sh's parts twice a tree in the four cells (fwd_prep's
#      time and the forward op's); the forward's tests of test_gpu_fcgp_sm90.py in the patched
#      tree (the layout test compares fwd_prep's g with gate_product's, on another grid, bit for
#      bit); the issue-4 bench in the patched tree.
#      Predicted (session 45, NOTES_FCGP.md): fwd_prep 12.8 -> 10-11 us at Cl(3,0) bf16 and 6.2 ->
#      4.5-5 at Cl(2,0) bf16, the bf16 forwards -2 and -1 us; tf32 within noise.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, build, bench, tests_in, lab_build, ncu_src, sanitize, pack
case "${1:-}" in
P)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES=benchmarks/results/fcgp-s45/prep_wave.patch SETTINGS="base;base" PARTS_S=80 OUT="$R/ab" \
        timeout 330 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "===|#####|forward|fwd_prep|backward  *[0-9]|bmm"
    tree=/tmp/fc_tree_prep_wave
    room 150 "forward tests" && (cd "$tree" && PYTHONPATH="$tree" timeout 140 python3 -m pytest -q -m gpu \
        -p no:cacheprovider tests/test_gpu_fcgp_sm90.py -k "not backward" >"$R/pytest_fwd.log" 2>&1
        echo "forward tests in the patched tree: rc $? $(tail -n 1 "$R/pytest_fwd.log")")
    room 100 bench && (cd "$tree" && OUT="$R/bench_patched" STAGES=bench_fcgp timeout 95 bash tests/gpu_check.sh \
        >/dev/null 2>&1; grep -hE "copy bandwidth|^fcgp" "$R"/bench_patched/bench_fcgp*.log)
    pack
    ;;
*)
    echo "usage: $0 P"; exit 2 ;;
esac
