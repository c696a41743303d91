#!/usr/bin/env bash
# Session 28, first device call: main's tree and the bf16 gelu_transpose patch built side by side,
# A/B'd, then main's FCGP GPU tests (with durations) and the patched tree's bf16 backward tests.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-/tmp/out}
PATCHES=benchmarks/results/fcgp-s27/gelu_transpose_wide.patch \
SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0;base;FLASHCLIFFORD_FCGP_FWD_CLUSTER=3" CELLS="${CELLS:-}" \
    OUT=/tmp/ab bash benchmarks/fcgp_ab_trees.sh >/tmp/ab.log 2>&1
echo "ab rc $?"
grep -v "^\s*$" /tmp/ab.log | grep -E "=====|#####|^Cl|gz_|gw_|gelu|norm_stats|go_trans|fwd_|fail|rror" | head -150
cp /tmp/ab.log "$R/ab.log"
for d in /tmp/ab/*/; do n=$(basename "$d"); for f in "$d"parts_*.txt; do [ -f "$f" ] && cp "$f" "$R/${n}_$(basename "$f")"; done; done
echo "=== main tests ($(date +%T))"
export PYTHONPATH=$PWD
timeout "${TEST_S:-230}" python3 -m pytest -q -m gpu -p no:cacheprovider --durations=30 \
    tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py >/tmp/pytest_main.log 2>&1
echo "pytest rc $?"; tail -n 45 /tmp/pytest_main.log; cp /tmp/pytest_main.log "$R/"
echo "=== patched bf16 backward tests ($(date +%T))"
(cd /tmp/fc_tree_gelu_transpose_wide && PYTHONPATH=$PWD timeout "${PTEST_S:-60}" python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_gpu_fcgp_sm90.py -k "backward and bfloat16" >/tmp/pytest_patched.log 2>&1; echo "patched pytest rc $?")
tail -n 5 /tmp/pytest_patched.log; cp /tmp/pytest_patched.log "$R/"
echo "=== done ($(date +%T))"
