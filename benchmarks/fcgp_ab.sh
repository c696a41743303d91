#!/usr/bin/env bash
# A/B of the Hopper FCGP kernels' start-up switches, on a built tree (gpu_check.sh STAGES=build):
#   SETTINGS="base;FLASHCLIFFORD_FCGP_GZ_ROWS=2;FLASHCLIFFORD_FCGP_FWD_CLUSTER=3" bash benchmarks/fcgp_ab.sh
# For each setting (";"-separated; "base" = the defaults; a setting may set several variables,
# space-separated): with TESTS=1, tests/test_gpu_fcgp_sm90.py under it, then
# fcgp_parts.py --kernels under it (CELLS: its --cells, default issue 4's four), each run under a
# timeout (PARTS_S, TEST_TIMEOUT_S; TEST_K: pytest's -k for the tests). Logs to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
IFS=';' read -r -a settings <<<"${SETTINGS:-base}"
for s in "${settings[@]}"; do
    label=$(echo "$s" | sed -E 's/FLASHCLIFFORD_FCGP_//g; s/[^A-Za-z0-9=_]+/_/g; s/=/-/g')
    vars=()
    [ "$s" = base ] || read -r -a vars <<<"$s"
    if [ "${TESTS:-0}" = 1 ]; then
        echo "=== tests: $s ($(date +%T))"
        # shellcheck disable=SC2086  # TEST_K: one -k expression, no spaces
        env "${vars[@]}" timeout "${TEST_TIMEOUT_S:-600}" python3 -m pytest -q -m gpu -p no:cacheprovider \
            ${TEST_K:+-k $TEST_K} tests/test_gpu_fcgp_sm90.py 2>&1 |
            tee "$OUT/tests_$label.txt" | tail -n 5
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    fi
    echo "=== parts: $s ($(date +%T))"
    # under a timeout (PARTS_S): a run that hangs fails its setting and the next one still runs
    # shellcheck disable=SC2086  # CELLS is a list
    env "${vars[@]}" timeout "${PARTS_S:-150}" python3 benchmarks/fcgp_parts.py --kernels ${CELLS:+--cells $CELLS} 2>&1 |
        grep -v -i "warn" | tee "$OUT/parts_$label.txt" | grep -E "^Cl|tma_kernel|finalize|reduce"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit $status
