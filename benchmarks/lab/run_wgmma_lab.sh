#!/usr/bin/env bash
# Build and run the wgmma lab on a Hopper GPU (sm_90a): checks, timing beside cuBLAS, the TMA /
# cluster kernels and their profile (both cluster releases), the SASS check, memcheck and
# racecheck on the small cases, and (NCU=1) an ncu pass over the Cl(3,0) forward kernels.
# Logs go to $OUT (default wgmma_lab_out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-wgmma_lab_out}
mkdir -p "$OUT"
BIN=$OUT/wgmma_lab
NV=(nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v benchmarks/lab/wgmma_lab.cu -o "$BIN")
"${NV[@]}" -DWITH_CUBLAS -lcublas >"$OUT/build.log" 2>&1 || "${NV[@]}" >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log"; exit 1; }
grep -E "Potential|spill" "$OUT/build.log" | sort | uniq -c
status=0
timeout 300 "$BIN" 2>&1 | tee "$OUT/lab.txt" || status=1
timeout 120 "$BIN" --profile 2>&1 | tee "$OUT/profile.txt" || status=1
timeout 60 "$BIN" --tma-profile 2>&1 | tee "$OUT/tma_profile.txt" || status=1
# A/B: the clusters' stage release with the cluster-scope fence instead
# (FC_FCGP_CLUSTER_RELEASE_FENCE, csrc/cuda/fcgp_wgmma.cuh)
"${NV[@]/%$BIN/$BIN.rc}" -DFC_FCGP_CLUSTER_RELEASE_FENCE=1 >"$OUT/build_rc.log" 2>&1 &&
    timeout 60 "$BIN.rc" --tma-profile 2>&1 | tee -a "$OUT/tma_profile.txt"
cuobjdump -sass "$BIN" >"$OUT/lab.sass" 2>&1
{ echo "HGMMA per kernel:"; awk '/Function :/{f=$3} /HGMMA/{c[f]++} END{for(k in c) print c[k], k}' "$OUT/lab.sass"
  grep -o "HGMMA\.[A-Za-z0-9.]*" "$OUT/lab.sass" | sort | uniq -c; echo "LDL/STL: $(grep -c -E 'LDL|STL' "$OUT/lab.sass")"; } |
    tee "$OUT/sass.txt"
for tool in memcheck racecheck; do
    timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$BIN" --check >"$OUT/$tool.txt" 2>&1
    rc=$?; echo "$tool: exit $rc"; tail -n 2 "$OUT/$tool.txt"; [ $rc -eq 0 ] || status=1
done
if [ "${NCU:-0}" = 1 ]; then # ncu matches demangled names unless told otherwise
    for k in fwd_kernelILi1ELi1ELi0E fwd_kernelILi1ELi2ELi0E; do # Cl(3,0) tf32, bf16
        timeout 300 ncu --kernel-name-base mangled -k regex:"$k" --launch-count 1 --section SpeedOfLight \
            --section MemoryWorkloadAnalysis --section WarpStateStats "$BIN" --profile >"$OUT/ncu_$k.txt" 2>&1
    done
fi
echo "wgmma lab: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
