#!/usr/bin/env bash
# Session 48's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz"], timeout
# 600). Run as `bash benchmarks/results/fcgp-s48/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: (1) session 47's norm_rows_cb.patch against main (results/fcgp-s47/next_session.sh P: norm_rows
#      reads its column block from blockIdx.x; ptxas: every one-group form 0 bytes of spills, the
#      two-group bf16 forms 12 / 52 -> 20 / 68), each tree under the defaults and
#      FLASHCLIFFORD_FCGP_FWD_GROUPS=1, then the forward's tests in the patched tree; with them
#      probe_xy_rows.patch (timing only, wrong products): x, y and g brought as boxes of half the rows,
#      each 64 bytes, the same bytes a step: does the copy engine's rate for 32-byte rows (session 19's
#      lab: 4.8 against 8.2 TB/s) hold the forward's kernel? (2) main's
#      forward without the grade norm (fcgp_parts.py --no-norm, new): what the norm epilogue
#      costs each cell; (3) initcheck and synccheck over the Hopper cases on main (last run on session
#      45's kernels; the two-group forward is new since).
#   B: (A: norm_rows_cb -3.7% on the Cl(3,0) bf16 kernel, merged; the probe -4 to -5% at D 4;
#      initcheck, synccheck 0 errors) xy2.patch and xy2b.patch (its lanes' rows permuted: no bank
#      met twice by a half warp's fragment loads) against main, twice each; main's forward without
#      the norm (A's run failed on its workspace argument); in xy2b's tree the
#      Cl(2,0) tests of test_gpu_fcgp_sm90.py (with the algebra-free ones) and of test_gpu_fcgp.py,
#      memcheck over the Hopper cases and racecheck over the small Cl(2,0) cases 0-3 between them.
#   C: (B: XY2 slower, +9% at Cl(2,0) bf16, xy2b +6%; dropped. Its tree's tests 276 + 190 passed,
#      memcheck 0 errors, racecheck 0 hazards. The norm epilogue costs 9-27 us a kernel)
#      last_states.patch against main (the last tile of a row block reads the other tiles' states
#      at once, a thread a tile, where it read them one after another, two barriers each), twice
#      each; the issue-4 bench in both trees; in the patched tree the SASS check, the forward's
#      tests and then its Cl(3,0) tests as far as the call's time goes.
#   D: (C: last_states -8 us at Cl(3,0) bf16, merged; bench, SASS PASS, 147 + 176 tests passed)
#      main (last_states merged): memcheck over the Hopper cases, then the Cl(3,0) backward tests C's
#      limit cut (its last 22 ids) as far as the call's time goes.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack, ab_fwd
case "${1:-}" in
A)
    begin
    PATCHES="benchmarks/results/fcgp-s47/norm_rows_cb.patch benchmarks/results/fcgp-s48/probe_xy_rows.patch" \
        SETTINGS="base;FLASHCLIFFORD_FCGP_FWD_GROUPS=1" PARTS_S=60 OUT="$R/ab" timeout 330 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        grep -E "===|#####|forward|fwd_tma|fwd_prep|bmm"
    room 40 "parts --no-norm" && echo "=== main without the norm" &&
        timeout 35 python3 benchmarks/fcgp_parts.py --reps 20 --kernels --no-norm 2>&1 | grep -v -i warn |
        tee "$R/parts_nonorm.txt" | grep -E "bmm|forward|fwd_"
    room 70 "initcheck, synccheck" && sanitize "initcheck synccheck" 60
    tree=/tmp/fc_tree_norm_rows_cb
    room 60 "forward tests" && (cd "$tree" && PYTHONPATH="$tree" timeout $((END - SECONDS - 10)) python3 -m pytest -q -m gpu \
        -p no:cacheprovider tests/test_gpu_fcgp_sm90.py -k "not backward" >"$R/pytest_fwd_patched.log" 2>&1
        echo "forward tests in the patched tree: rc $? $(tail -n 1 "$R/pytest_fwd_patched.log")")
    pack
    ;;
B)
    begin
    PATCHES="benchmarks/results/fcgp-s48/xy2.patch benchmarks/results/fcgp-s48/xy2b.patch" SETTINGS="base;base" \
        PARTS_S=60 OUT="$R/ab" timeout 240 bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        grep -E "===|#####|forward|fwd_tma|fwd_prep|bmm"
    room 40 "parts --no-norm" && echo "=== main without the norm" &&
        timeout 35 python3 benchmarks/fcgp_parts.py --reps 20 --kernels --no-norm 2>&1 | grep -v -i warn |
        tee "$R/parts_nonorm.txt" | grep -E "bmm|forward|fwd_"
    tree=/tmp/fc_tree_xy2b
    cd "$tree" || exit 1
    export PYTHONPATH="$tree"
    for f in test_gpu_fcgp_sm90 test_gpu_fcgp; do
        python3 -m pytest --collect-only -q -p no:cacheprovider "tests/$f.py" 2>/dev/null | grep "::" |
            grep -v "Cl(3,0)" >"/tmp/ids_$f.txt"
    done
    echo "tests chosen (every id but Cl(3,0)'s): $(wc -l </tmp/ids_test_gpu_fcgp_sm90.txt) + $(wc -l </tmp/ids_test_gpu_fcgp.txt)"
    # shellcheck disable=SC2046  # one test id a word (ids hold no spaces)
    end=$END && END=$((SECONDS + 230)) # the sm90 tests at most 210 s, so the sanitizers keep their time
    room 120 "sm90 tests" && tests_in xy2_sm90 "" $(cat /tmp/ids_test_gpu_fcgp_sm90.txt)
    END=$end
    room 60 memcheck && sanitize memcheck 50
    room 80 racecheck && RACECHECK=1 LOOPS=0 CASE_S=18 OUT="$R" CASES="0 1 2 3" \
        timeout 80 bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 6
    # shellcheck disable=SC2046
    room 60 "op tests" && tests_in xy2_op "" $(cat /tmp/ids_test_gpu_fcgp.txt)
    cd - >/dev/null && pack
    ;;
C)
    begin
    ab_fwd "benchmarks/results/fcgp-s48/last_states.patch" 150
    room 110 "bench, main" && echo "=== bench, main" && bench 100
    mkdir -p "$R/bench_main" && mv "$R"/bench_fcgp* "$R/bench_main/" 2>/dev/null
    tree=/tmp/fc_tree_last_states
    cd "$tree" || exit 1
    export PYTHONPATH="$tree"
    room 110 "bench, last_states" && echo "=== bench, last_states" && bench 100
    room 130 sass && STAGES=sass timeout 125 bash tests/gpu_check.sh | tail -n 12
    room 60 "forward tests" && tests_in fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward"
    python3 -m pytest --collect-only -q -p no:cacheprovider tests/test_gpu_fcgp_sm90.py 2>/dev/null | grep "::" |
        grep "Cl(3,0)" | grep backward >/tmp/ids_cl3.txt
    # shellcheck disable=SC2046  # one test id a word
    room 40 "Cl(3,0) backward tests" && tests_in cl3 "" $(cat /tmp/ids_cl3.txt)
    cd - >/dev/null && pack
    ;;
D)
    begin
    room 60 memcheck && sanitize memcheck 50
    python3 -m pytest --collect-only -q -p no:cacheprovider tests/test_gpu_fcgp_sm90.py 2>/dev/null | grep "::" |
        grep "Cl(3,0)" | grep backward | tail -n 22 >/tmp/ids_cl3_tail.txt
    # shellcheck disable=SC2046  # one test id a word
    room 15 "Cl(3,0) backward tests, the tail" && tests_in cl3_tail "" $(cat /tmp/ids_cl3_tail.txt)
    pack
    ;;
*)
    echo "usage: $0 A | B | C | D"; exit 2 ;;
esac
