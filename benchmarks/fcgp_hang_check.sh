#!/usr/bin/env bash
# The hang check of NOTES_FCGP.md session 28, on a built tree (gpu_check.sh STAGES=build): the
# forward and backward of issue 4's cells in a loop under each chain setting, then racecheck over
# the small set one case at a time, everything under a timeout, logs straight to $OUT.
#   ITERS=1000 LOOP_S=90 CASE_S=150 bash benchmarks/fcgp_hang_check.sh
# LOOPS=0 skips the loops, RACECHECK=0 the racecheck runs; CASES="2 3 6 7" racechecks only those
# small cases (default all eight). RACE_ARGS adds compute-sanitizer options, e.g.
# RACE_ARGS="--kernel-name-exclude kns=gw_pseq_kernel" for cases 8-14: racecheck does not order
# gw_pseq_kernel's bulk copies by their mbarriers (NOTES_FCGP.md session 43), as gpu_check.sh excludes it.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
verdict() { # $1: exit status, $2: what ran
    case $1 in
    0) echo "ok: $2" ;;
    124 | 137) echo "DID NOT FINISH: $2"; status=1 ;;
    *) echo "FAILED ($1): $2"; status=1 ;;
    esac
}
loops=("FLASHCLIFFORD_FCGP_BWD_PDL=0" "FLASHCLIFFORD_FCGP_BWD_PDL=1")
[ "${LOOPS:-1}" = 1 ] || loops=()
for s in "${loops[@]}"; do
    log="$OUT/hang_loop_${s##*=}.log"
    env "$s" timeout "${LOOP_S:-90}" python3 benchmarks/fcgp_hang_check.py --iters "${ITERS:-1000}" >"$log" 2>&1
    verdict $? "loop under $s (last line: $(tail -n 1 "$log"))"
done
if [ "${RACECHECK:-1}" = 1 ]; then
    for i in ${CASES:-0 1 2 3 4 5 6 7}; do
        log="$OUT/racecheck_case$i.log"
        start=$SECONDS
        timeout "${CASE_S:-150}" compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=gp ${RACE_ARGS:-} \
            python3 benchmarks/fcgp_hang_check.py --small "$i" >"$log" 2>&1
        rc=$?
        verdict $rc "racecheck case $i after $((SECONDS - start)) s ($(grep -h "RACECHECK SUMMARY" "$log" || tail -n 1 "$log"))"
    done
fi
exit $status
