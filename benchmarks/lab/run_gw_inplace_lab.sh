#!/usr/bin/env bash
# Build and run the in-place gW lab on a Hopper GPU (sm_90a): the permuted TMA row order checked
# element by element, and the fragment loads' bank-conflict cost in three row orders. Logs go to
# $OUT (default gw_inplace_lab_out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gw_inplace_lab_out}
mkdir -p "$OUT"
BIN=$OUT/gw_inplace_lab
nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -lineinfo benchmarks/lab/gw_inplace_lab.cu -o "$BIN" \
    >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
timeout 60 "$BIN" 2>&1 | tee "$OUT/lab.txt"
exit "${PIPESTATUS[0]}"
