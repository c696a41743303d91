#!/usr/bin/env bash
# Session 40's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   P: session 39's prepared call (results/fcgp-s39/calls.sh P: gz's K loop labs, persistent
#      forms beside them, the chain off), run as it was; key lines in callP/output_tail.txt.
#   Q: the persistent input gradient (gz_pst_kernel, fcgp_wgmma_gz_pst.cuh; switched by
#      FLASHCLIFFORD_FCGP_GZ_PERSIST, off by default): its tests, the issue-4 cells' per-kernel
#      times with it off and on (and its ring step at KK 2 and 4), racecheck and memcheck with it on
#      over few CTAs (many tiles a CTA), the backward tests with it on, a hang loop with it on.
#   R: after Q (Cl(3,0) bf16 hazards under the persistent gz): racecheck of main's own gz at KK 1
#      (the persistent one's step there; Cl(3,0) bf16 small cases 6, 7), the persistent one's first
#      hazards (case 6, at its KK 1 and at KK 2), then where main's backward spends its time: the
#      kernels' timeline in one call (fcgp_parts.py --timeline) and Nsight Compute's throughput of
#      its memory-bound passes at Cl(3,0) bf16.
#      (Its timeline failed: fcgp_parts.py ran without PYTHONPATH, which call_lib.sh now sets.)
#   T: main's backward as a timeline (fcgp_parts.py --timeline: each kernel's start and end in one
#      call, under the chain) at the issue-4 cells: which kernels the call waits for.
#   U: go^T's transpose two columns a thread (go_transpose2; FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0 takes
#      go_transpose alone): the backward tests (Hopper kernels), the gradients' digests under both
#      settings (benchmarks/go_bits.py: the same bits expected), the bf16 cells' parts under both
#      (twice each), racecheck over the bf16 small cases, memcheck, the timeline again.
#   B: main after the merge: issue 4's bench (STAGES=bench_fcgp) and the SASS check.
#   V: after the review, go_transpose and go_transpose2 as one kernel (CW 1 or 2 columns a thread;
#      the CW 1 forms' PTX is the old go_transpose's, the CW 2 forms' differs in register numbering):
#      the backward tests, the gradient digests against call U's (callU/bits_.txt), the bf16
#      cells' parts under both settings.
#   A: where an H100 kind is lent: session 38's call A (main's checks and the issue-4 table).
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench
F=tests/test_gpu_fcgp_sm90.py
ON="FLASHCLIFFORD_FCGP_GZ_PERSIST=1"
tests_in() { # label, env, pytest args...
    local label=$1 e=$2
    shift 2
    env $e timeout $((END - SECONDS - 20)) python3 -m pytest -q -m gpu -p no:cacheprovider "$@" >"$R/pytest_$label.log" 2>&1
    echo "tests $label ($e): rc $? $(tail -n 1 "$R/pytest_$label.log")"
    grep -E "^FAILED|^E " "$R/pytest_$label.log" | head -n 8
}
case "${1:-}" in
Q)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 150 tests && tests_in pst "" "$F" -k gz_persistent
    room 140 parts && PARTS_S=45 SETTINGS="base;$ON;$ON FLASHCLIFFORD_FCGP_GZ_KK=2;$ON FLASHCLIFFORD_FCGP_GZ_KK=4" \
        bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "^Cl.*(forward|backward|bmm) |gz_|gw_tma|^=" | grep -v "^Cl.*forward  "
    room 100 racecheck && env $ON FLASHCLIFFORD_FCGP_GZ_PERSIST_CTAS=3 LOOPS=0 CASES="0 1 2 3 6 7" CASE_S=40 \
        bash benchmarks/fcgp_hang_check.sh
    room 80 memcheck && env $ON FLASHCLIFFORD_FCGP_GZ_PERSIST_CTAS=3 SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper \
        STAGES=sanitize timeout 70 bash tests/gpu_check.sh | tail -n 3
    room 120 "backward tests, on" && tests_in pst_env "$ON" "$F" -k "backward and not gz_persistent and not mma.sync"
    room 60 "hang loop, on" && env $ON ITERS=300 LOOP_S=25 RACECHECK=0 bash benchmarks/fcgp_hang_check.sh
    ;;
R)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    race6() { # label, env: racecheck over small case 6 (and 7 for main), hazards' first lines
        env $2 LOOPS=0 CASES="${3:-6}" CASE_S=40 OUT="$R/race_$1" bash benchmarks/fcgp_hang_check.sh | sed "s/^/$1: /"
        grep -m 6 -hE "Race reported|access at|shared memory address|by thread" "$R/race_$1/racecheck_case6.log" | cut -c1-220
    }
    room 120 "racecheck main KK 1" && race6 main_kk1 "FLASHCLIFFORD_FCGP_GZ_KK=1" "6 7"
    room 60 "racecheck pst" && race6 pst_kk1 "$ON FLASHCLIFFORD_FCGP_GZ_PERSIST_CTAS=3"
    room 60 "racecheck pst KK 2" && race6 pst_kk2 "$ON FLASHCLIFFORD_FCGP_GZ_PERSIST_CTAS=3 FLASHCLIFFORD_FCGP_GZ_KK=2"
    room 60 timeline && timeout 50 python3 benchmarks/fcgp_parts.py --timeline --reps 5 \
        --cells 3,bfloat16,4096,512 2,bfloat16,4096,512 3,float32,4096,512 2>&1 | grep -v -i warn | tee "$R/timeline.txt" |
        grep -vE "^\s+forward" | head -n 90
    room 120 ncu && STAGES=ncu_mem_fcgp NCU_CELLS="3,bfloat16,4096,512" \
        NCU_MEM_KERNELS="go_transpose norm_stats gelu_transpose gz_tma_kernel" timeout 110 bash tests/gpu_check.sh >/dev/null 2>&1
    grep -hE "^  [a-z_]+.*\(|Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Size|Grid Size" \
        "$R"/ncu_mem_3_bfloat16_4096_512.txt 2>/dev/null | head -n 60
    ;;
T)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    timeout 150 python3 benchmarks/fcgp_parts.py --timeline --reps 5 2>&1 | grep -v -i warn | tee "$R/timeline.txt" |
        grep -vE "^\s+forward" | head -n 120
    ;;
U)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    OFF="FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0"
    room 150 tests && tests_in go2 "" "$F" -k "backward and not mma.sync"
    room 80 digests && for e in "" "$OFF"; do env $e timeout 35 python3 benchmarks/go_bits.py >"$R/bits_${e:+off}.txt" 2>&1; done &&
        { diff "$R/bits_.txt" "$R/bits_off.txt" >/dev/null && echo "digests: the same ($(wc -l <"$R/bits_.txt") cases)" ||
            { echo "digests DIFFER"; paste "$R/bits_.txt" "$R/bits_off.txt"; }; }
    room 110 parts && PARTS_S=40 CELLS="3,bfloat16,4096,512 2,bfloat16,4096,512" SETTINGS="base;$OFF;base;$OFF" \
        bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "^Cl.*(backward|bmm) |go_transpose|^=" | grep -v "^Cl.*forward  "
    room 80 racecheck && LOOPS=0 CASES="2 3 6 7" CASE_S=30 bash benchmarks/fcgp_hang_check.sh
    room 40 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 40 bash tests/gpu_check.sh |
        tail -n 2
    room 50 timeline && timeout 45 python3 benchmarks/fcgp_parts.py --timeline --reps 5 \
        --cells 3,bfloat16,4096,512 2,bfloat16,4096,512 2>&1 | grep -v -i warn | tee "$R/timeline.txt" | grep -E "go_|gw_|gz_|span"
    ;;
B)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 110 bench && bench 100
    room 100 sass && STAGES=sass timeout 115 bash tests/gpu_check.sh | tail -n 8
    ;;
V)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 150 tests && tests_in cw "" "$F" -k "backward and not mma.sync"
    room 60 digests && timeout 35 python3 benchmarks/go_bits.py >"$R/bits.txt" 2>&1 &&
        { diff "$R/bits.txt" benchmarks/results/fcgp-s40/callU/bits_.txt >/dev/null && echo "digests: call U's ($(wc -l <"$R/bits.txt") cases)" ||
            { echo "digests DIFFER from call U's"; cat "$R/bits.txt"; }; }
    room 50 parts && PARTS_S=40 CELLS="3,bfloat16,4096,512 2,bfloat16,4096,512" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_BWD_GO_PAIRS=0" bash benchmarks/fcgp_ab.sh 2>&1 | grep -E "^Cl.*backward |^="
    ;;
A)
    bash benchmarks/results/fcgp-s38/calls.sh A ;;
*)
    echo "usage: $0 Q | R | T | U | B | V | A"; exit 2 ;;
esac
