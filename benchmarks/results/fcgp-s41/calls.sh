#!/usr/bin/env bash
# Session 41's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   L: what binds gW (gw_tma_kernel), before a cluster form that shares its tiles: main beside
#      three lab trees, each run with the backward's chain off (gW's span is then its own):
#      gw_lab_noy (yg^T never copied: 43% fewer tile bytes at Cl(3,0), 36% at Cl(2,0)),
#      gw_lab_fill (the copies alone, no wgmmas), gw_lab_mma (the wgmmas alone, no copies).
#      Never to be merged: the lab trees write wrong gradients.
#   M: after L (gW waits on its consumers, not its copies): gW's paths shared by the two consumer
#      warpgroups so that their pairs (wgmmas) are even (Cl(3,0): 9 and 13 a step before, 11 and 11
#      now) and the A fragments in three register sets (two paths' wgmmas in flight, not one):
#      this tree beside gw_ns2 (the even paths, two sets) and gw_main (main's gW), per-kernel
#      times with the chain on and off; then in this tree the gradient digests (the same bits as
#      session 40's call U expected: each path's sums are unchanged) and the backward tests.
#   C: main (its gW back as it was: call M measured no gain) checked where session 40 left it
#      unchecked: racecheck over the bf16 small cases (go_transpose's CW 2 forms), memcheck
#      --hopper, then gW's stall samples a source line at Cl(3,0) bf16 (ncu_src_fcgp).
#   P: after C (gW's stall samples: pair forming 29%, the ring's branch 13%, HGMMA 13%, LDS 9%):
#      benchmarks/lab/gw_pseq.cu, one path a tile of 128 x 256 (fragments feeding N = 256, not
#      48), with and without its copies: the rate such a gW could reach, against main's gW
#      (Cl(3,0) bf16 363 TF/s with the chain off in call M).
#   Q: gW one path a tile in the library (gw_pseq_kernel, fcgp_wgmma_gw_pseq.cuh; on by default
#      where N_in % 128 == 0 and N_out % 256 == 0, FLASHCLIFFORD_FCGP_GW_PSEQ=0 for the path-group
#      kernel): its tests (both settings, against float64, run to run), the gradient digests
#      (the small cases as call U's; the 512-wide ones differ: other batch splits), racecheck and
#      memcheck over its small cases (fcgp_hang_check.py --small 8-11), the issue-4 cells'
#      per-kernel times under both settings, then the issue-4 bench. Run with CALL_S=450 when
#      under 9 minutes of device time are left.
#   R: after Q (gw_pseq_kernel correct but the backward slower: Cl(3,0) bf16 612 -> 713 us): the
#      lab again on random values (the tensor cores' power depends on the data), and the parts
#      with the chain off, gw_pseq_kernel's own time against gw_tma_kernel's.
#   S: prepared for session 42 (not run): why gw_pseq_kernel runs at half its lab's rate. The
#      library's kernel alone on synthetic operands (benchmarks/lab/gw_pseq_lib.cu: the issue's
#      512 x 512 and a 2048 x 512 of whole rounds) beside the loop lab (gw_pseq.cu, with pseq_mix:
#      three-pair units beside one-pair ones, as the kernel's first round at Cl(3,0)), then Nsight
#      Compute on gw_pseq_kernel and gw_tma_kernel in the backward (Cl(3,0) bf16, chain off) and
#      gw_pseq_kernel's stall samples a source line.
#   A: where an H100 kind is lent: session 38's call A (main's checks and the issue-4 table).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench, tests_in
S=benchmarks/results/fcgp-s41
bits() { # the gradient digests of this tree's build against session 40's call U
    timeout 60 python3 benchmarks/go_bits.py 2>/dev/null | grep "^Cl" >"$R/bits.txt"
    echo "digests: $(wc -l <"$R/bits.txt") cases, $(diff "$R/bits.txt" benchmarks/results/fcgp-s40/callU/bits_.txt >/dev/null && echo "the same as call U's" || echo DIFFERENT)"
    diff "$R/bits.txt" benchmarks/results/fcgp-s40/callU/bits_.txt | head -n 12
}
case "${1:-}" in
L)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gw_lab_noy.patch $S/gw_lab_fill.patch $S/gw_lab_mma.patch" PARTS_S=60 \
        SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0" \
        timeout 480 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gw_tma|gz_tma|^=|^#|rror|fail" | tail -n 90
    ;;
M)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gw_ns2.patch $S/gw_main.patch" PARTS_S=45 SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_PDL=0" \
        timeout 400 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gw_tma|gz_tma|^=|^#|rror|fail" | tail -n 90
    room 50 bits && bits
    room 130 "backward tests" && tests_in bwd "" tests/test_gpu_fcgp_sm90.py -k "backward and not mma.sync"
    ;;
C)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 100 racecheck && LOOPS=0 CASES="2 3 6 7" CASE_S=30 bash benchmarks/fcgp_hang_check.sh
    room 80 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 75 bash tests/gpu_check.sh | tail -n 3
    room 100 ncu && NCU_CELLS=3,bfloat16,4096,512 NCU_KERNELS=gw_tma_kernel STAGES=ncu_src_fcgp \
        timeout 120 bash tests/gpu_check.sh | tail -n 75
    ;;
P)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -Xptxas -v benchmarks/lab/gw_pseq.cu \
        -o "$R/gw_pseq" >"$R/gw_pseq_build.log" 2>&1 || { tail -n 20 "$R/gw_pseq_build.log"; exit 1; }
    grep -cE "spill stores" "$R/gw_pseq_build.log"
    timeout 120 "$R/gw_pseq" 2>&1 | tee "$R/gw_pseq.txt"
    rm -f "$R/gw_pseq"
    ;;
Q)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 200 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py -k "gw_one_path"
    room 60 bits && bits
    room 60 racecheck && LOOPS=0 CASES="9 11" CASE_S=25 bash benchmarks/fcgp_hang_check.sh
    room 50 memcheck && for i in 8 10; do
        timeout 20 compute-sanitizer --tool memcheck --error-exitcode 9 python3 benchmarks/fcgp_hang_check.py --small $i \
            >"$R/memcheck_case$i.log" 2>&1
        echo "memcheck case $i: rc $? $(grep -h "ERROR SUMMARY" "$R/memcheck_case$i.log")"
    done
    room 40 parts && PARTS_S=35 SETTINGS="base;FLASHCLIFFORD_FCGP_GW_PSEQ=0" bash benchmarks/fcgp_ab.sh 2>&1 |
        grep -E "^Cl.*(backward|bmm) |gw_|gz_tma|^="
    room 100 bench && bench 95
    ;;
R)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a benchmarks/lab/gw_pseq.cu -o "$R/gw_pseq" \
        >"$R/gw_pseq_build.log" 2>&1 || { tail -n 20 "$R/gw_pseq_build.log"; exit 1; }
    timeout 60 "$R/gw_pseq" 2>&1 | tee "$R/gw_pseq.txt"
    rm -f "$R/gw_pseq"
    build
    for e in FLASHCLIFFORD_FCGP_GW_PSEQ=1 FLASHCLIFFORD_FCGP_GW_PSEQ=0; do
        room 20 "parts $e" && env $e FLASHCLIFFORD_FCGP_BWD_PDL=0 timeout 30 python3 benchmarks/fcgp_parts.py --kernels 2>&1 |
            grep -v -i warn | tee "$R/parts_$e.txt" | grep -E "^Cl.*(backward|bmm) |gw_|gz_" | sed "s/^/${e##*=} /"
    done
    ;;
S)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    for lab in gw_pseq_lib gw_pseq; do
        nvcc -std=c++17 -O3 -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 "benchmarks/lab/$lab.cu" \
            -o "$R/$lab" >"$R/${lab}_build.log" 2>&1 || { tail -n 20 "$R/${lab}_build.log"; exit 1; }
        timeout 60 "$R/$lab" 2>&1 | tee "$R/$lab.txt"
        rm -f "$R/$lab"
    done
    build
    room 120 ncu && FLASHCLIFFORD_FCGP_GW_PSEQ=1 FLASHCLIFFORD_FCGP_BWD_PDL=0 STAGES=ncu_mem_fcgp \
        NCU_CELLS="3,bfloat16,4096,512" NCU_MEM_KERNELS="gw_pseq_kernel gw_tma_kernel" timeout 110 bash tests/gpu_check.sh |
        tail -n 30
    room 100 "ncu source" && FLASHCLIFFORD_FCGP_GW_PSEQ=1 FLASHCLIFFORD_FCGP_BWD_PDL=0 STAGES=ncu_src_fcgp \
        NCU_CELLS="3,bfloat16,4096,512" NCU_KERNELS=gw_pseq_kernel timeout 100 bash tests/gpu_check.sh | tail -n 60
    ;;
A)
    bash benchmarks/results/fcgp-s38/calls.sh A ;;
*)
    echo "usage: $0 L | M | C | P | Q | R | S | A"; exit 2 ;;
esac
