#!/usr/bin/env bash
# Compiles this tree's CUDA units here as the Hopper machine's GPU check names them (nvcc at
# /usr/local/cuda/bin/nvcc, FLASHCLIFFORD_CUDA_ARCHS=9.0: sm_90, and sm_90a for the *_sm90a.cu
# units) into .nvcc_cache, drops the entries this build did not use, and packs the rest into
# .nvcc_cache.tgz (ignored by git). Carried to the device (the run's `carry: [".nvcc_cache.tgz"]`),
# tests/gpu_check.sh unpacks it and its build links these objects instead of compiling them,
# where the device's nvcc prints the same --version as this one (setup.py's source_key; a unit
# whose key differs compiles there as before). The device build took 250-330 s, most of it the
# one sm_90a unit; a local fill takes about 5 minutes on 2 cores, or seconds when nothing changed.
#   bash benchmarks/nvcc_cache_fill.sh
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
sleep 1 # entries older than the stamp by a whole second are the unused ones
CUDA_HOME=/usr/local/cuda FLASHCLIFFORD_CUDA_ARCHS=9.0 FLASHCLIFFORD_NVCC_JOBS="$(nproc)" \
    FLASHCLIFFORD_NVCC_CACHE="$PWD/.nvcc_cache" python3 setup.py build_ext --inplace --force >/tmp/nvcc_cache_fill.log 2>&1 ||
    { tail -n 30 /tmp/nvcc_cache_fill.log; exit 1; }
find .nvcc_cache -name '*.o' ! -newer "$stamp" -delete
tar -czf .nvcc_cache.tgz .nvcc_cache
echo "nvcc_cache_fill: $(ls .nvcc_cache | wc -l) objects, .nvcc_cache.tgz $(du -h .nvcc_cache.tgz | cut -f1)"
