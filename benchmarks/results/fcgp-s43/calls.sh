#!/usr/bin/env bash
# Session 43's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   B: (a) racecheck over benchmarks/lab/ring_race.cu's four modes (bulk or tensor copies, the
#      stage released after or before its reads: what the tool reports for tma_ring.cuh's protocol
#      alone); (c) the backward's timeline in the four issue-4 cells; (b) Nsight Compute's stall
#      samples a SASS instruction for the second gz_tma_kernel launch of a backward at Cl(3,0) and
#      Cl(2,0) bf16, and for gw_pseq_kernel at Cl(2,0) bf16 (its 80 units all in batch segments).
#   C: after B (racecheck reports a correct bulk-copy ring as it reports a broken one, and no tensor
#      copies at all; gW's units in rounds leave SMs idle): gw_pseq_kernel's units as a stream of
#      weighted steps (PseqSched). The lab (gw_pseq_lib cases 0 and 3, stream and rounds), the
#      parts with the chain off under settings 1 (stream) and 3 (rounds), the pseq tests, memcheck
#      over the hang check's stream cases 12-13, racecheck over case 13 with and without
#      --kernel-name-exclude, the issue-4 bench. (Measured: the stream 24-52% slower at Cl(3,0) and in
#      tf32, its blocks spread over the whole chunk's batch steps; the tests cut by the call's end.)
#   D: after C: whole units, heaviest first, to the least-loaded block (PseqSched, where the units
#      are one to three rounds and that costs less than rounds), every block starting with the
#      others as in a round. The lab and the parts under 1 and 3, the issue-4 bench, the pseq
#      tests at 512 x 512 and the rule's, memcheck and racecheck (with and without the exclusion)
#      over hang-check case 13, the SASS check (cut by its 45 s timeout).
#   E: after D (Cl(3,0) tf32 forward+backward 1.48x three bmm; 48 tests passed): the same tree's
#      SASS check and the backward tests.
#   F: after E: Cl(2,0)'s 80 units (fewer than the SMs) in one round of weighted segments (each
#      unit cut into as many segments as its cost asks). The lab's Cl(2,0) case under both
#      schedules, the Cl(2,0) parts under settings 1 and 3, the pseq tests at 512 x 512 and their
#      repeats, the Cl(2,0) bench rows (the device time left: ~350 s).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, build, bench, tests_in, lab_build, ncu_src
pseq_ab() { # pseq_ab PATTERN: build, gw_pseq_lib's cases 0 and 3 under both schedules, the parts
    # (chain off) under settings 1 and 3, their lines matching PATTERN
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build gw_pseq_lib &
    build
    wait
    for c in 0 3; do for st in 1 0; do timeout 30 "$T/gw_pseq_lib" $c $st; done; done | tee "$R/gw_pseq_lib.txt"
    for e in 1 3; do
        room 40 "parts $e" && FLASHCLIFFORD_FCGP_GW_PSEQ=$e FLASHCLIFFORD_FCGP_BWD_PDL=0 timeout 35 python3 \
            benchmarks/fcgp_parts.py --kernels 2>&1 | grep -v -i warn >"$T/parts_$e.txt"
        grep -E "^Cl.*(backward|bmm) |$1" "$T/parts_$e.txt" | sed "s/^/pseq=$e /"
    done
}
race13() { # race13 S: racecheck over hang-check case 13, with gw_pseq_kernel in and left out, S s each
    for x in "" "--kernel-name-exclude kns=gw_pseq_kernel"; do
        room "$1" "racecheck $x" || break
        timeout "$1" compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=gp $x \
            python3 benchmarks/fcgp_hang_check.py --small 13 >"$T/rc.log" 2>&1
        echo "racecheck case 13 ($x): rc $? $(grep -h "RACECHECK SUMMARY" "$T/rc.log")"
    done
}
case "${1:-}" in
B)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build ring_race && for m in 0 1 2 3; do
        timeout 30 compute-sanitizer --tool racecheck --racecheck-report hazard "$T/ring_race" $m >"$T/rr$m.log" 2>&1
        echo "ring_race mode $m: rc $? $(grep -h "^mode" "$T/rr$m.log") $(grep -h "RACECHECK SUMMARY" "$T/rr$m.log")"
        grep -E "Error|Warning" "$T/rr$m.log" | head -n 2 | cut -c1-200
    done
    build
    room 120 timeline && { timeout 80 python3 benchmarks/fcgp_parts.py --timeline 2>&1 | grep -v -i warn >"$R/timeline.txt"; cat "$R/timeline.txt"; }
    SRC_LINES=30 room 100 "ncu gz 3" && SRC_LINES=30 ncu_src gz3 gz_tma_kernel python3 benchmarks/fcgp_parts.py --once --cells 3,bfloat16,4096,512
    SRC_LINES=30 room 100 "ncu gz 2" && SRC_LINES=30 ncu_src gz2 gz_tma_kernel python3 benchmarks/fcgp_parts.py --once --cells 2,bfloat16,4096,512
    SRC_LINES=30 room 100 "ncu gw 2" && SRC_LINES=30 ncu_src gw2 gw_pseq_kernel python3 benchmarks/fcgp_parts.py --once --cells 2,bfloat16,4096,512
    ;;
C)
    pseq_ab "gw_|gz_"
    room 200 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py -k "gw_one_path or gw_by_the_rule"
    room 60 memcheck && for i in 12 13; do
        timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 python3 benchmarks/fcgp_hang_check.py --small $i \
            >"$T/memcheck_case$i.log" 2>&1
        echo "memcheck case $i: rc $? $(grep -h "ERROR SUMMARY" "$T/memcheck_case$i.log")"
    done
    race13 40
    room 100 bench && bench 95
    ;;
D)
    pseq_ab gw_pseq
    room 100 bench && bench 95
    room 150 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py \
        -k "gw_one_path and (512-512 or repeats) or gw_by_the_rule"
    room 30 memcheck && { timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 python3 \
        benchmarks/fcgp_hang_check.py --small 13 >"$T/mc.log" 2>&1; echo "memcheck case 13: rc $? $(grep -h "ERROR SUMMARY" "$T/mc.log")"; }
    race13 30
    room 45 sass && { STAGES=sass timeout 45 bash tests/gpu_check.sh | tail -n 4; }
    ;;
E)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 120 sass && { STAGES=sass timeout 110 bash tests/gpu_check.sh | tail -n 8; }
    room 100 "backward tests" && tests_in bwd "" tests/test_gpu_fcgp_sm90.py \
        -k "backward and not mma.sync and not gw_one_path and not gw_by_the_rule"
    ;;
F)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build gw_pseq_lib &
    build
    wait
    for st in 1 0; do timeout 30 "$T/gw_pseq_lib" 3 $st; done | tee "$R/gw_pseq_lib.txt"
    for e in 1 3; do
        room 30 "parts $e" && FLASHCLIFFORD_FCGP_GW_PSEQ=$e FLASHCLIFFORD_FCGP_BWD_PDL=0 timeout 25 python3 \
            benchmarks/fcgp_parts.py --kernels --cells 2,bfloat16,4096,512 2,float32,4096,512 2>&1 | grep -v -i warn \
            >"$T/parts_$e.txt"
        grep -E "^Cl.*(backward|bmm) |gw_pseq" "$T/parts_$e.txt" | sed "s/^/pseq=$e /"
    done
    room 100 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py -k "gw_one_path and (512-512 or repeats)"
    room 45 bench && { timeout 45 python3 -m flashclifford.bench --op fcgp -a 2 --dtype float32 bfloat16 --precision tf32 \
        -B 4096 -N 512 --baselines compiled --compile dynamic --reps 30 --warmup 2 --max-seconds 0.3 --no-host-baselines \
        --out "$T/bench" --no-progress 2>&1 | tee "$T/bench.log" | grep -E "copy bandwidth|^fcgp"; }
    ;;
*)
    echo "usage: $0 B | C | D | E | F"; exit 2 ;;
esac
