#!/usr/bin/env bash
# Session 39's device calls (kind nvidia-h200; carry [".nvcc_cache.tgz"], timeout 600). The
# objects of main and of both patched copies are filled into .nvcc_cache.tgz here first
# (NOTES_FCGP.md session 38 item 6 has the commands).
#   S: gz's bf16 A operand read by the wgmma from shared memory (gz_ss.patch: go^T's panels as an
#      MN-major operand in the 32-byte swizzle, no ldmatrix, no A registers; the step still
#      waits for its wgmmas) and the same with each step's wgmmas in flight through the next
#      step's issue (gz_ss_lag.patch, branch s39-gz-ss), against main: the bf16 cells under the
#      default KK and GZ_KK=2; then in the lag tree the bf16 backward tests (and test_backward
#      under GZ_KK=2 and 1, whose panels lie KS rows apart), racecheck over the bf16 small cases
#      (2, 3, 6, 7), and issue 4's bench there.
#   F: main once gz_ss is merged: its checks (see the case).
#   L: gz's K loop taken apart: the copies alone, the wgmmas alone (see the case).
#   P, A: prepared for session 40, not run: L with the backward's chain off, beside persistent
#      forms of its labs; main's checks and the issue-4 table where an H100 is lent.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench
S=benchmarks/results/fcgp-s39
F=tests/test_gpu_fcgp_sm90.py
K16="bf16 or bfloat16"
tests_in() { # tree, label, env, pytest args...
    local t=$1 label=$2 e=$3
    shift 3
    (cd "$t" && env $e PYTHONPATH="$t" timeout $((END - SECONDS - 30)) python3 -m pytest -q -m gpu -p no:cacheprovider "$@" \
        >"$R/pytest_$label.log" 2>&1)
    echo "tests $label ($e): rc $? $(tail -n 1 "$R/pytest_$label.log")"
    grep -E "^FAILED" "$R/pytest_$label.log" | head -n 6
}
race_in() { # tree: racecheck over the bf16 small cases there (fcgp_hang_check.sh, logs to $R)
    (cd "$1" && OUT="$R" LOOPS=0 CASES="2 3 6 7" CASE_S=30 bash benchmarks/fcgp_hang_check.sh)
}
case "${1:-}" in
S)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gz_ss.patch $S/gz_ss_lag.patch" PARTS_S=40 SETTINGS="base;FLASHCLIFFORD_FCGP_GZ_KK=2" \
        CELLS="3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 260 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|rror|fail" | tail -n 60
    T=/tmp/fc_tree_gz_ss_lag
    room 100 tests && tests_in "$T" lag "" "$F" -k "backward and ($K16)"
    if ! grep -q " passed" "$R/pytest_lag.log" || grep -q " failed" "$R/pytest_lag.log"; then
        room 100 "tests without the lag" && tests_in /tmp/fc_tree_gz_ss ss "" "$F" -k "backward and ($K16)"
    fi
    room 70 "tests KK 2" && tests_in "$T" lag_kk2 FLASHCLIFFORD_FCGP_GZ_KK=2 "$F::test_backward" -k "$K16"
    room 70 "tests KK 1" && tests_in "$T" lag_kk1 FLASHCLIFFORD_FCGP_GZ_KK=1 "$F::test_backward" -k "$K16"
    room 130 racecheck && race_in "$T"
    room 100 bench && (cd "$T" && OUT="$R/lag" bash -c '. benchmarks/results/call_lib.sh; bench 95')
    ;;
F)
    # main with gz_ss merged (c01b1b6: the 12 bf16-mode gz kernels changed, every other sm_90a
    # kernel's PTX as before): build, the bf16 backward tests (and test_backward under GZ_KK=2, 1),
    # racecheck over the bf16 small cases, issue 4's bench, the SASS check, memcheck
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 120 tests && tests_in "$PWD" main "" "$F" -k "backward and ($K16)"
    room 130 racecheck && race_in "$PWD"
    room 100 bench && bench
    room 100 sass && STAGES=sass timeout 115 bash tests/gpu_check.sh | tail -n 8
    room 40 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh |
        tail -n 3
    room 50 "tests KK 2" && tests_in "$PWD" main_kk2 FLASHCLIFFORD_FCGP_GZ_KK=2 "$F::test_backward" -k "$K16"
    room 50 "tests KK 1" && tests_in "$PWD" main_kk1 FLASHCLIFFORD_FCGP_GZ_KK=1 "$F::test_backward" -k "$K16"
    ;;
L)
    # gz's K loop taken apart (lab patches on main c01b1b6+, never merged; no gradients written, no
    # tests): the K loop and staging (gz_lab_kloop2, session 38's kloop on today's main), the copies
    # alone (gz_lab_fill: the consumers wait and release, no wgmma), the wgmmas alone (gz_lab_mma:
    # no copies, each step released at once); one run a tree, main as the base
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$S/gz_lab_kloop2.patch $S/gz_lab_fill.patch $S/gz_lab_mma.patch" PARTS_S=40 SETTINGS="base" \
        CELLS="3,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 200 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|rror|fail" | tail -n 60
    ;;
P)
    # prepared for session 40 (not run): call L again with the backward's programmatic chain off
    # (gz's measured span then holds no part of gW's last round), beside the persistent forms of
    # the same three labs (gz_lab_pkloop, pfill, pmma: one CTA an SM streams its tiles through one
    # ring, no staging, no epilogue; GROUPS 1 only, so the bf16 cells): what the per-tile costs
    # are, before a persistent gz is built
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    PATCHES="$(for n in kloop2 fill mma pkloop pfill pmma; do printf '%s ' "$S/gz_lab_$n.patch"; done)" PARTS_S=40 \
        SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0" CELLS="3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 300 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|rror|fail" | tail -n 90
    ;;
A)
    # prepared for session 40 (not run): where an H100 kind is lent (issue 4's device), main's checks
    # and the issue-4 table there: session 38's call A (the three FCGP test files, the bench,
    # memcheck, SASS, racecheck)
    bash benchmarks/results/fcgp-s38/calls.sh A ;;
*)
    echo "usage: $0 S | F | L | P | A"; exit 2 ;;
esac
