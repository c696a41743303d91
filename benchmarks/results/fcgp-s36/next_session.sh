#!/usr/bin/env bash
# Session 37, prepared in session 36 (not run). First, here (no GPU), fill the carried objects
# for main and for the patched tree, so that neither compiles on the device:
#   bash benchmarks/results/fcgp-s36/next_session.sh fill
# (18 objects, 33 MB packed: with the tree's 20 MB under a call's 64 MiB; checked in session 36),
# then the device call (`kind: nvidia-h100-x1`, carry [".nvcc_cache.tgz"], timeout 600):
#   G: main against gz_gate_of.patch (the backward's gates of bf16 data by gate_of: the short erf
#      and the hardware exp in gz's epilogue and the bf16 gelu_transpose, as fwd_prep's since
#      session 36), the bf16 cells, two runs a tree; then test_gpu_fcgp_sm90.py in the patched
#      tree
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s36
case "${1:-}" in
fill)
    T=/tmp/fc_tree_gz_gate_of # where fcgp_ab_trees.sh builds the patched copy (the same relative paths)
    rm -rf "$T" && mkdir -p "$T"
    tar --exclude=./.git --exclude=./build --exclude=./gpu_check_out --exclude='*.so' -cf - . | tar -C "$T" -xf -
    (cd "$T" && git apply "$OLDPWD/$S/gz_gate_of.patch") || exit 1
    CACHE="$PWD/.nvcc_cache" KEEP=1 bash "$T/benchmarks/nvcc_cache_fill.sh" && KEEP=1 bash benchmarks/nvcc_cache_fill.sh
    ;;
G)
    PATCHES="$S/gz_gate_of.patch" CELLS="3,bfloat16,4096,512 2,bfloat16,4096,512" PARTS_S=40 \
        SETTINGS="base;FLASHCLIFFORD_AB_RUN=2" TREE_TESTS="tests/test_gpu_fcgp_sm90.py" \
        timeout 560 bash benchmarks/fcgp_ab_trees.sh 2>&1 | tail -n 60
    ;;
*)
    echo "usage: $0 fill|G"; exit 2 ;;
esac
