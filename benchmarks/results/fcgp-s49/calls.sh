#!/usr/bin/env bash
# Session 49's device calls (kind nvidia-h200: no H100 kind lent; carry [".nvcc_cache.tgz"], timeout
# 600). Run as `bash benchmarks/results/fcgp-s49/calls.sh X 2>&1 | tee $OUT/output_tail.txt`.
#   A: the forward's norm hand-off without its fence and count before the reads: poll.patch (each
#      tile counts itself, relaxed, and meanwhile reads its row block's partials as they land,
#      every partial word unset by fwd_prep and written once) and poll_late.patch (the count after
#      the reads: ptxas's two-group tf32 spills 12 / 60 where poll's are 60 / 68 and main's
#      12 / 36) against main, twice each; in poll's tree where the two-group forwards' spills lie
#      (sass_check --sites) and the forward's tests.
#   B: (A: poll and poll_late slower at Cl(3,0), no change at Cl(2,0); dropped) probe_nowait.patch
#      (timing only: no fence, count or wait, the partials read at once) against main: what the
#      wait for the row block costs beside the norm's own work; then on main (session 48's kernels)
#      what session 48 left unrun: the forward's tests (with the new NaN/inf one), initcheck and
#      synccheck over the Hopper cases, racecheck over the small Cl(2,0) cases, the last 8 Cl(3,0)
#      backward tests and the Cl(2,0) backward tests of test_gpu_fcgp_sm90.py.
#   C: (B: the wait 3.5 us of the Cl(2,0) bf16 kernel; main's tests and sanitizers clean) on main, the
#      op tests (test_gpu_fcgp.py) and the side-stream rerun (TESTPLAN H3) of the final tree.
#   D: (C: 258 passed, 9 skipped; side stream 313 passed, 10 skipped) on main, the GPU tests no other
#      call of this session ran: reliability, SGP, gate, streams, nn, threads.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, T, room, begin, build, bench, tests_in, lab_build, ncu_src, sanitize, pack, ab_fwd
S49=benchmarks/results/fcgp-s49
case "${1:-}" in
A)
    begin
    ab_fwd "$S49/poll_late.patch $S49/poll.patch" 300
    tree=/tmp/fc_tree_poll
    cd "$tree" || exit 1
    export PYTHONPATH="$tree"
    room 40 sites && timeout 35 python3 tests/sass_check.py --sites 'fwd_tma_kernel<1, .*, 2>' 2>&1 |
        tee "$R/sites_poll.txt" | grep -E "instructions|inside|outside" | cut -c1-60 | head -n 50
    room 60 "forward tests" && tests_in fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward"
    cd - >/dev/null && pack
    ;;
B)
    begin
    ab_fwd "$S49/probe_nowait.patch" 150
    room 60 "forward tests" && tests_in fwd "" tests/test_gpu_fcgp_sm90.py -k "not backward"
    room 80 "initcheck, synccheck" && sanitize "initcheck synccheck" 75
    room 80 racecheck && RACECHECK=1 LOOPS=0 CASE_S=18 OUT="$R" CASES="0 1 2 3" \
        timeout 80 bash benchmarks/fcgp_hang_check.sh 2>&1 | tail -n 6
    python3 -m pytest --collect-only -q -p no:cacheprovider tests/test_gpu_fcgp_sm90.py 2>/dev/null | grep "::" |
        grep backward >/tmp/ids_bwd.txt
    grep "Cl(3,0)" /tmp/ids_bwd.txt | tail -n 8 >/tmp/ids_cl3_tail.txt
    grep "Cl(2,0)" /tmp/ids_bwd.txt >/tmp/ids_cl2.txt
    echo "backward ids: $(wc -l </tmp/ids_cl3_tail.txt) Cl(3,0) (the last 8), $(wc -l </tmp/ids_cl2.txt) Cl(2,0)"
    # shellcheck disable=SC2046  # one test id a word
    room 30 "Cl(3,0) backward tail" && tests_in cl3_tail "" $(cat /tmp/ids_cl3_tail.txt)
    # shellcheck disable=SC2046
    room 40 "Cl(2,0) backward tests" && tests_in cl2 "" $(cat /tmp/ids_cl2.txt)
    pack
    ;;
C)
    begin
    room 100 "op tests" && tests_in op "" tests/test_gpu_fcgp.py
    # TESTPLAN H3: every gpu test inside a non-default stream (as session 46 ran it)
    room 100 "side stream" && FLASHCLIFFORD_TEST_SIDE_STREAM=1 timeout $((END - SECONDS - 20)) python3 -m pytest -q \
        -m "gpu and not large" -p no:cacheprovider tests/test_gpu_reliability.py tests/test_gpu_streams.py \
        tests/test_nn.py tests/test_gpu_fcgp.py >"$R/pytest_side.log" 2>&1
    echo "side-stream rerun: rc $? $(tail -n 1 "$R/pytest_side.log")"
    grep -E "^FAILED|^E " "$R/pytest_side.log" | head -n 8
    pack
    ;;
D)
    begin
    tests_in rest "" tests/test_gpu_reliability.py tests/test_gpu_sgp.py tests/test_gpu_gate.py tests/test_gpu_streams.py \
        tests/test_nn.py tests/test_threads.py
    pack
    ;;
*)
    echo "usage: $0 A | B | C | D"; exit 2 ;;
esac
