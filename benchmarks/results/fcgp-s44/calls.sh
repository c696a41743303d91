#!/usr/bin/env bash
# Session 44's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600).
#   A: the final tree of session 43, which no call measured whole: the issue-4 bench (call F's
#      Cl(2,0) schedule never reached it), the backward's timeline in the four cells and at
#      Cl(3,0) bf16 under GW_PSEQ=3 (the rounds) beside the default (whole units), to see where
#      gW's chain-off gain of 22 us went under the chain (the timeline now as the bench times a
#      call: L2 flushed, stream held); the one-path gW tests session 43 did not rerun (128 x 256,
#      B 70 at 512 x 512) and the rule's; memcheck, initcheck and synccheck over the Hopper
#      sanitizer cases (with gw_pseq_kernel's new shapes).
#   B: after A (the held timeline: before the first gW, go_rows waits for gelu_transpose, which it
#      does not need; norm_stats starts in gelu_transpose's tail; a memset's launch latency before
#      prep_wz): the first chunk's go^T kernels beside gelu_transpose (FLASHCLIFFORD_FCGP_BWD_HEAD,
#      1 against 0) and prep_wz zeroing gW's flags. The parts with their timelines under both
#      settings, then again without; the gradient digests under both; the backward tests; the
#      issue-4 bench; initcheck over the Hopper cases (cut at 65 s in A) in what time is left.
#      (Measured: go_rows free -1.5 us at Cl(2,0) tf32, the two-pass order +2 to +5 us in bf16; the
#      bits the same; initcheck reported norm_stats' reads of the forward's bf16 out, which the
#      copy engine stores, as uninitialized before it was cut.)
#   C: the tree kept (go_rows free in the first chunk, no switch; the two-pass order as before;
#      prep_wz zeroing the flags): benchmarks/lab/init_store.cu under initcheck (does the tool see
#      the copy engine's global writes?); the gradient digests against call B's (the same bits);
#      the hang loops under both chain settings; the issue-4 bench; initcheck over the Hopper cases
#      in what time is left.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, build, bench, tests_in, lab_build, ncu_src
timeline() { # timeline CELLS...: fcgp_parts.py's timeline of the cells, the backward's lines
    timeout 60 python3 benchmarks/fcgp_parts.py --timeline --reps 5 --cells "$@" 2>&1 | grep -v -i warn
}
sanitize() { # sanitize TOOL S: the sanitizer stage's TOOL over the Hopper cases, S seconds at most
    SANITIZE_TOOLS=$1 SANITIZE_ARGS=--hopper STAGES=sanitize timeout "$2" bash tests/gpu_check.sh 2>&1 |
        grep -E "canar|exit|SUMMARY|NOT" | head -n 6
}
pack() { # every log but output_tail.txt into logs.tgz (8 files come back at most)
    (cd "$R" && tar --exclude='*.png' --exclude=output_tail.txt --exclude=logs.tgz -czf /tmp/logs.tgz . &&
        find . -mindepth 1 ! -name output_tail.txt -delete && mv /tmp/logs.tgz .)
}
case "${1:-}" in
A)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 100 bench && bench 95
    room 60 timeline && timeline 2,float32,4096,512 3,float32,4096,512 2,bfloat16,4096,512 3,bfloat16,4096,512 |
        tee "$R/timeline.txt" | grep -E "backward|forward  *[0-9]|bmm"
    room 30 "timeline rounds" && FLASHCLIFFORD_FCGP_GW_PSEQ=3 timeline 3,bfloat16,4096,512 |
        tee "$R/timeline_rounds.txt" | grep -E "gw_|gz_|backward  *[0-9]"
    room 150 tests && tests_in pseq "" tests/test_gpu_fcgp_sm90.py \
        -k "gw_one_path_a_tile and (128-256 or B70-512-512) or gw_by_the_rule"
    for tool in memcheck initcheck synccheck; do
        room 70 "$tool" && sanitize "$tool" 65
    done
    ;;
B)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    for h in 0 1; do
        room 60 "parts $h" && FLASHCLIFFORD_FCGP_BWD_HEAD=$h timeout 60 python3 benchmarks/fcgp_parts.py --timeline \
            2>&1 | grep -v -i warn >"$R/parts_head$h.txt"
        grep -E "backward  *[0-9]|backward (prep_wz|gelu|norm_stats|go_|gw_pseq)" "$R/parts_head$h.txt" |
            head -n 40 | sed "s/^/head=$h /"
    done
    for h in 0 1; do
        room 40 "parts again $h" && FLASHCLIFFORD_FCGP_BWD_HEAD=$h timeout 35 python3 benchmarks/fcgp_parts.py \
            2>&1 | grep -E "backward  *[0-9]" | sed "s/^/again head=$h /"
    done
    for h in 0 1; do
        room 40 "bits $h" && FLASHCLIFFORD_FCGP_BWD_HEAD=$h timeout 35 python3 benchmarks/go_bits.py >"$R/bits_$h.txt" 2>&1
    done
    cmp -s "$R/bits_0.txt" "$R/bits_1.txt" && echo "bits: the same under both settings ($(wc -l <"$R/bits_1.txt") cases)" ||
        { echo "bits DIFFER"; diff "$R/bits_0.txt" "$R/bits_1.txt" | head -n 8; }
    room 150 "backward tests" && tests_in bwd "" tests/test_gpu_fcgp_sm90.py -k "backward and not mma.sync"
    room 100 bench && bench 95
    room 100 initcheck && sanitize initcheck $((END - SECONDS - 10))
    pack
    ;;
C)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    lab_build init_store && for m in 0 1 2; do
        timeout 30 compute-sanitizer --tool initcheck "$T/init_store" $m >"$T/is$m.log" 2>&1
        echo "init_store mode $m: rc $? $(grep -h "^mode" "$T/is$m.log") $(grep -h "ERROR SUMMARY" "$T/is$m.log")"
        grep -m 2 -E "Uninitialized|at .* in " "$T/is$m.log" | cut -c1-160
    done
    build
    room 40 bits && timeout 35 python3 benchmarks/go_bits.py >"$R/bits.txt" 2>&1
    cmp -s "$R/bits.txt" benchmarks/results/fcgp-s44/callB/bits_0.txt && echo "bits: call B's ($(wc -l <"$R/bits.txt") cases)" ||
        { echo "bits DIFFER from call B's"; diff "$R/bits.txt" benchmarks/results/fcgp-s44/callB/bits_0.txt | head -n 8; }
    room 100 hang && RACECHECK=0 ITERS=100 LOOP_S=45 OUT="$R" bash benchmarks/fcgp_hang_check.sh
    room 100 bench && bench 95
    room 60 initcheck && sanitize initcheck $((END - SECONDS - 10))
    pack
    ;;
*)
    echo "usage: $0 A | B | C"; exit 2 ;;
esac
