#!/usr/bin/env bash
# Session 38, prepared in session 37 (not run): gz_ovl_kernel (gz_overlap.patch, branch
# s37-gz-overlap): the input gradient at Cl(2,0) with each tile's epilogue beside the next tile's K
# loop, behind FLASHCLIFFORD_FCGP_GZ_OVERLAP (off by default). Compiled here (no spills, ptxas), never
# run. First, here (no GPU): the carried objects of main and of the patched copy, the stale ones
# dropped (the call carries at most 64 MiB with the tree; done at the end of session 37, redo if
# main's CUDA sources changed since or .nvcc_cache.tgz is gone):
#   bash benchmarks/results/fcgp-s37/calls.sh fill benchmarks/results/fcgp-s37/gz_overlap.patch
# then the device call (`kind: nvidia-h100-x1`, carry [".nvcc_cache.tgz"], timeout 600):
#   O: main against the patched tree under the defaults and GZ_OVERLAP=1, twice each, the Cl(2,0)
#      cells (in main's tree the switch does nothing: a noise reference); then in the patched tree
#      under GZ_OVERLAP=1: the backward's tests of test_gpu_fcgp_sm90.py (test_backward_gz_overlap
#      compares the two kernels bitwise) and racecheck over the small set (cases 0-3 are Cl(2,0))
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s37
T=/tmp/fc_tree_gz_overlap # where fcgp_ab_trees.sh builds the patched copy
F=tests/test_gpu_fcgp_sm90.py
case "${1:-}" in
O)
    PATCHES="$S/gz_overlap.patch" PARTS_S=40 CELLS="2,bfloat16,4096,512 2,float32,4096,512" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_GZ_OVERLAP=1;FLASHCLIFFORD_AB_RUN=2;FLASHCLIFFORD_FCGP_GZ_OVERLAP=1 FLASHCLIFFORD_AB_RUN=2" \
        timeout 200 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|gz_ovl|^=|^#|error" | tail -n 40
    (cd "$T" && FLASHCLIFFORD_FCGP_GZ_OVERLAP=1 PYTHONPATH="$T" timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider \
        "$F::test_backward_gz_overlap" "$F::test_backward" "$F::test_backward_chunked" "$F::test_backward_grads_as_scratch" \
        "$F::test_backward_pdl_chain" 2>&1 | tail -n 6)
    (cd "$T" && FLASHCLIFFORD_FCGP_GZ_OVERLAP=1 OUT="$R/race" LOOPS=0 CASE_S=25 timeout 130 bash benchmarks/fcgp_hang_check.sh |
        head -n 4)
    ;;
*)
    echo "usage: $0 O"; exit 2 ;;
esac
