#!/usr/bin/env bash
# Build and run the rate labs on a Hopper GPU (sm_90a): the copy-free wgmma rate (wgmma_rate.cu,
# with the HGMMA shapes of its SASS) and the compute-free tile fill rate (tma_rate.cu). Logs go to
# $OUT (default wgmma_rate_out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-wgmma_rate_out}
mkdir -p "$OUT"
BIN=$OUT/wgmma_rate
nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v benchmarks/lab/wgmma_rate.cu \
    -o "$BIN" >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
grep -E "C75|spill stores" "$OUT/build.log" | grep -v " 0 bytes spill" | sort | uniq -c
cuobjdump -sass "$BIN" | grep -o "HGMMA\.[A-Za-z0-9.]*" | sort | uniq -c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv
timeout 120 "$BIN" 2>&1 | tee "$OUT/rate.txt"
nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a benchmarks/lab/tma_rate.cu -o "$OUT/tma_rate" \
    >>"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
timeout 120 "$OUT/tma_rate" 2>&1 | tee -a "$OUT/rate.txt"
# the yardstick's rate in the same call: torch.bmm of the issue's Cl(3,0) products (T 44, 4096 x 512 x 512)
python3 - <<'PY' 2>&1 | tee -a "$OUT/rate.txt"
import torch
torch.backends.cuda.matmul.allow_tf32 = True
for dt in (torch.float32, torch.bfloat16):
    a = torch.randn(44, 4096, 512, device="cuda", dtype=dt)
    b = torch.randn(44, 512, 512, device="cuda", dtype=dt)
    for _ in range(3):
        torch.bmm(a, b)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        torch.bmm(a, b)
    e1.record()
    torch.cuda.synchronize()
    ms = e0.elapsed_time(e1) / 20
    print(f"torch.bmm {dt}: {ms * 1e3:.0f} us, {44 * 2 * 4096 * 512 * 512 / ms / 1e9:.1f} TF/s")
PY
