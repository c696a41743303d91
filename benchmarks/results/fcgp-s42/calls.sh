#!/usr/bin/env bash
# Session 42's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   S: session 41's prepared call S (results/fcgp-s41/calls.sh S), run as it was; its logs in callS/.
#   T: after S (the library's gw_pseq_kernel runs Cl(3,0)'s three-pair paths alone at 409 TF/s, the
#      lab's loop at ~600-635): where each spends its time. Both labs built with -lineinfo; their
#      rates again, then the SASS of both (gzipped, for the loops side by side) and Nsight Compute's
#      stall samples a SASS instruction for gw_pseq_lib case 5 (the three-pair paths alone over
#      512 x 512 on 96 SMs) and for gw_pseq's pseq_mix "three-pair units alone" (96 blocks, the
#      same footprint and shape).
#   U: after T (the library's consumers wait on their full barrier 34% of the time, the lab's 7%;
#      their loops' SASS alike): whether the copies are slow for the memory system or in the SM.
#      gw_pseq_lib case 6 (the three-pair paths on 24 SMs over 128 x 512: operands in L2) beside the
#      lab's three-pair blocks on 24 SMs, and Nsight Compute's memory sections (L2 hit rate, DRAM
#      bytes, L2 throughput) on both at 96 SMs.
#   V: after U (as slow on 24 SMs with its operands in L2: the SM, not the memory system): the
#      producer choosing the path once a unit, not a step (the 20-way branch chain ahead of every
#      step's copies). gw_pseq_lib's cases again and the stall samples of case 5.
#   W: after V (the library's tile at the lab's rate: Cl(3,0)'s 512 x 512 chunk 175 -> 108 us alone):
#      the library with _C._fcgp_sm90_gw_pseq three-way (0 by the rule, the default: one path a
#      tile where its units fill the SMs; 1 wherever the shapes fit; 2 path groups) and a slot's
#      read-back in its schedule (session 41's gw_pseq_hand.patch). Its tests and the rule's,
#      racecheck and memcheck over its small cases, the parts with the chain off under 1 and 2,
#      then the issue-4 bench under the default.
#   X: after W (gw_pseq_kernel faster in all four cells, Cl(2,0) too with the slot read-back in
#      its schedule; racecheck 88 hazards at case 11, 0 at case 9): racecheck's first hazards at
#      case 11 with the kernel forced and with path groups, case 10 forced; the parts at N 256
#      (20 and 40 units) under both kernels, for the rule.
#   Y: after X (the hazards: bulk copies into a stage released by a warpgroup's first thread against
#      another warp's LDS of it; gw_pseq_kernel faster at N 256 too): every ring released by each
#      consumer warp (tma_ring.cuh), gw_pseq_kernel by the rule wherever the shapes fit. Racecheck
#      over the one-path cases 9-11 and the path-group cases 3, 7 (the ring wraps at B 2085), its
#      tests and the rule's, the issue-4 bench, the backward tests, the SASS check, memcheck.
#   Z: after Y (racecheck case 11 still 88 hazards with warps releasing; the SASS check cut by its
#      40 s timeout): the SASS check, then racecheck over gw_pseq_lib case 7 (12 three-pair units of
#      128 steps, the ring wrapping) built as it is and with FC_RING_PROXY_FENCE (a
#      fence.proxy.async after the producer's empty-barrier wait, before the copies; the macro
#      was taken out of tma_ring.cuh after this call: no change in what racecheck reported).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, build, bench, tests_in, lab_build, ncu_src (moved there in session 43)
case "${1:-}" in
T)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build gw_pseq_lib && lab_build gw_pseq || exit 1
    timeout 60 "$T/gw_pseq_lib" | tee "$R/gw_pseq_lib.txt"
    timeout 60 "$T/gw_pseq" mix | tee "$R/gw_pseq.txt"
    cuobjdump -sass "$T/gw_pseq_lib" | gzip >"$R/lib_sass.txt.gz"
    cuobjdump -sass "$T/gw_pseq" | gzip >"$R/lab_sass.txt.gz"
    room 60 "ncu lib" && ncu_src lib gw_pseq_kernel "$T/gw_pseq_lib" 5
    room 60 "ncu lab" && ncu_src lab pseq_mix "$T/gw_pseq" mix
    ;;
U)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build gw_pseq_lib && lab_build gw_pseq || exit 1
    for c in 5 6 5 6; do timeout 30 "$T/gw_pseq_lib" $c; done | tee "$R/gw_pseq_lib.txt"
    timeout 60 "$T/gw_pseq" mix | tee "$R/gw_pseq.txt"
    SRC_LINES=25 room 60 "ncu lib" && SRC_LINES=25 ncu_src lib gw_pseq_kernel "$T/gw_pseq_lib" 5
    SRC_LINES=25 room 60 "ncu lab" && SRC_LINES=25 ncu_src lab pseq_mix "$T/gw_pseq" mix
    ;;
V)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build gw_pseq_lib || exit 1
    timeout 60 "$T/gw_pseq_lib" | tee "$R/gw_pseq_lib.txt"
    SRC_LINES=25 room 60 "ncu lib" && SRC_LINES=25 ncu_src lib gw_pseq_kernel "$T/gw_pseq_lib" 5
    ;;
W)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 200 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py -k "gw_one_path or gw_by_the_rule"
    room 60 racecheck && OUT=$T LOOPS=0 CASES="9 11" CASE_S=25 bash benchmarks/fcgp_hang_check.sh | tail -n 4
    room 50 memcheck && for i in 8 11; do
        timeout 20 compute-sanitizer --tool memcheck --error-exitcode 9 python3 benchmarks/fcgp_hang_check.py --small $i \
            >"$T/memcheck_case$i.log" 2>&1
        echo "memcheck case $i: rc $? $(grep -h "ERROR SUMMARY" "$T/memcheck_case$i.log")"
    done
    for e in 1 2; do
        room 40 "parts $e" && FLASHCLIFFORD_FCGP_GW_PSEQ=$e FLASHCLIFFORD_FCGP_BWD_PDL=0 timeout 35 python3 \
            benchmarks/fcgp_parts.py --kernels 2>&1 | grep -v -i warn >"$T/parts_$e.txt"
        grep -E "^Cl.*(backward|bmm) |gw_|gz_" "$T/parts_$e.txt" | sed "s/^/pseq=$e /"
    done
    room 100 bench && bench 95
    ;;
X)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    for c in "11 1" "11 2" "10 1"; do
        set -- $c
        room 40 "racecheck $c" || break
        FLASHCLIFFORD_FCGP_GW_PSEQ=$2 timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=gp \
            python3 benchmarks/fcgp_hang_check.py --small $1 >"$T/rc.log" 2>&1
        echo "racecheck case $1, setting $2: rc $? $(grep -h "RACECHECK SUMMARY" "$T/rc.log")"
        grep -E "Error|Warning|Write|Read|at .*0x|in .*kernel" "$T/rc.log" | head -n 14 | cut -c1-240
    done
    for e in 1 2; do
        room 40 "parts $e" && FLASHCLIFFORD_FCGP_GW_PSEQ=$e FLASHCLIFFORD_FCGP_BWD_PDL=0 timeout 35 python3 \
            benchmarks/fcgp_parts.py --kernels --cells 2,bfloat16,4096,256 3,bfloat16,4096,256 2,float32,4096,256 3,float32,4096,256 \
            2>&1 | grep -v -i warn >"$T/parts_$e.txt"
        grep -E "^Cl.*(backward|bmm) |gw_" "$T/parts_$e.txt" | sed "s/^/pseq=$e /"
    done
    ;;
Y)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 90 racecheck && OUT=$T LOOPS=0 CASES="${RC_CASES:-11 9 7}" CASE_S=30 bash benchmarks/fcgp_hang_check.sh | grep -E "racecheck case"
    room 90 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py -k "gw_one_path or gw_by_the_rule"
    room 100 bench && bench 95
    room 150 "backward tests" && tests_in bwd "" tests/test_gpu_fcgp_sm90.py -k "backward and not mma.sync and not gw_one_path and not gw_by_the_rule"
    room 40 sass && { STAGES=sass timeout 40 bash tests/gpu_check.sh | tail -n 6; }
    room 25 memcheck && { timeout 25 compute-sanitizer --tool memcheck --error-exitcode 9 python3 benchmarks/fcgp_hang_check.py \
        --small 11 >"$T/mc.log" 2>&1; echo "memcheck case 11: rc $? $(grep -h "ERROR SUMMARY" "$T/mc.log")"; }
    ;;
Z)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    { lab_build gw_pseq_lib && cp "$T/gw_pseq_lib" "$T/lib_plain" &&
        nvcc -std=c++17 -O3 -lineinfo -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 -DFC_RING_PROXY_FENCE \
            benchmarks/lab/gw_pseq_lib.cu -o "$T/lib_fence" >"$T/fence_build.log" 2>&1; } &
    build
    room 120 sass && { STAGES=sass timeout 110 bash tests/gpu_check.sh | tail -n 8; }
    wait
    for v in plain fence; do
        room 45 "racecheck $v" || break
        timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 "$T/lib_$v" 7 >"$T/rc_$v.log" 2>&1
        echo "racecheck gw_pseq_lib case 7, $v: rc $? $(grep -h "RACECHECK SUMMARY" "$T/rc_$v.log")"
        grep -E "one launch|Error" "$T/rc_$v.log" | head -n 3 | cut -c1-200
    done
    ;;
S)
    bash benchmarks/results/fcgp-s41/calls.sh S ;;
A)
    bash benchmarks/results/fcgp-s38/calls.sh A ;;
*)
    echo "usage: $0 T | U | V | W | X | Y | Z | S | A"; exit 2 ;;
esac
