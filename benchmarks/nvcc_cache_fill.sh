#!/usr/bin/env bash
# Compiles this tree's CUDA units here as the Hopper machine's GPU check names them (nvcc at
# /usr/local/cuda/bin/nvcc, FLASHCLIFFORD_CUDA_ARCHS=9.0: sm_90, and sm_90a for the *_sm90a.cu
# units) into .nvcc_cache, drops the entries this build did not use, and packs the rest into
# .nvcc_cache.tgz (ignored by git). Carried to the device (the run's `carry: [".nvcc_cache.tgz"]`),
# tests/gpu_check.sh unpacks it and its build links these objects instead of compiling them,
# where the device's nvcc prints the same --version as this one (setup.py's source_key; a unit
# whose key differs compiles there as before). The device build took 250-330 s, most of it the
# one sm_90a unit; a local fill takes 4-8 minutes on 2 cores, or seconds when nothing changed.
#   bash benchmarks/nvcc_cache_fill.sh
# For an A/B of patched trees (fcgp_ab_trees.sh copies this tree and patches the copies): fill
# each patched copy into this tree's cache first, keeping what is there, then this tree, dropping
# what none of these builds used (entries not touched since a stamp made before the first), e.g.
#   touch /tmp/stamp && sleep 1
#   CACHE=$PWD/.nvcc_cache KEEP=1 bash /tmp/fc_tree_x/benchmarks/nvcc_cache_fill.sh
#   SINCE=/tmp/stamp bash benchmarks/nvcc_cache_fill.sh
# (results/fcgp-s37/calls.sh fill PATCH does this.) CACHE: the cache folder (default: the tree's
# .nvcc_cache, packed beside it as .nvcc_cache.tgz); KEEP=1: drop nothing; SINCE=file: drop the
# entries older than file (default: those this build did not use).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${CACHE:-$PWD/.nvcc_cache}
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
sleep 1 # entries older than the stamp by a whole second are the unused ones
CUDA_HOME=/usr/local/cuda FLASHCLIFFORD_CUDA_ARCHS=9.0 FLASHCLIFFORD_NVCC_JOBS="$(nproc)" \
    FLASHCLIFFORD_NVCC_CACHE="$cache" python3 setup.py build_ext --inplace --force >/tmp/nvcc_cache_fill.log 2>&1 ||
    { tail -n 30 /tmp/nvcc_cache_fill.log; exit 1; }
[ "${KEEP:-0}" = 1 ] || find "$cache" -name '*.o' ! -newer "${SINCE:-$stamp}" -delete
tar -C "$(dirname "$cache")" -czf "$(dirname "$cache")/.nvcc_cache.tgz" "$(basename "$cache")"
echo "nvcc_cache_fill: $(ls "$cache" | wc -l) objects, $(du -h "$(dirname "$cache")/.nvcc_cache.tgz" | cut -f1)"
