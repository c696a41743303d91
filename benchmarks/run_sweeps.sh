#!/usr/bin/env bash
# The published sweeps (benchmarks/results/<name>/: results.json, results.csv, heatmaps) on
# one GPU, with the settings docs/performance.md states. Parts, run in the order given:
#   repeat  the default SGP sweep (python -m flashclifford.bench --op sgp) twice back to back,
#           then `compare` at a 5% threshold: the run-to-run spread per cell
#   sgp     benchmarks/sgp.py      Cl(2,0), Cl(3,0) x float32, bfloat16 x the default grid
#   fcgp    benchmarks/fcgp.py     the same for the FCGP (float32 at tf32, bfloat16)
#   layer   flashclifford.nn.Layer (SGP), the same grid, plus the issue-5 check at Cl(3,0)
#           B=4096 N=512 with both Layers compiled: forward against its parts, forward and
#           forward+backward against the compiled baseline
#   layer-fc  the FCGP Layer (tf32)
#   algebras16[-RUN]  benchmarks/algebras16.py: Cl(1,3), Cl(3,0,1), Cl(4,0) (RUN: sgp, fcgp,
#           sgp-cl13, ... as that script names them; default all six runs)
#   bash benchmarks/run_sweeps.sh repeat sgp fcgp layer
# FLAGS overrides the shared harness flags: the compiled baseline is built once per
# configuration with symbolic sizes (--compile dynamic) so a sweep spends its time measuring,
# repetitions stop after 0.2 s of one measurement (>= 3 reps; medians and p20-p80 kept), and
# host overhead is measured for flashclifford only.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
FLAGS=${FLAGS:---compile dynamic --reps 30 --warmup 2 --max-seconds 0.2 --no-host-baselines --no-progress}
RES=benchmarks/results
status=0
for part in "$@"; do
    echo "=== $part ($(date +%T))"
    start=$SECONDS
    case $part in
    repeat)
        python3 -m flashclifford.bench --op sgp $FLAGS --out $RES/sgp-default-run1 || status=1
        python3 -m flashclifford.bench --op sgp $FLAGS --out $RES/sgp-default-run2 || status=1
        python3 -m flashclifford.bench compare $RES/sgp-default-run1/results.json \
            $RES/sgp-default-run2/results.json --threshold 0.05 | tee $RES/sgp-default-compare.txt
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    sgp) python3 benchmarks/sgp.py $FLAGS || status=1 ;;
    fcgp) python3 benchmarks/fcgp.py $FLAGS || status=1 ;;
    layer)
        python3 -m flashclifford.bench --op layer -a 2 3 --dtype float32 bfloat16 $FLAGS --out $RES/layer || status=1
        python3 -m flashclifford.bench --op layer -a 3 -B 4096 -N 512 --compile-ours \
            --compile static --no-progress --out $RES/layer-vs-parts || status=1 ;;
    layer-fc)
        python3 -m flashclifford.bench --op layer --use-fc --precision tf32 -a 2 3 --dtype float32 bfloat16 \
            $FLAGS --out $RES/layer-fc || status=1 ;;
    algebras16) python3 benchmarks/algebras16.py $FLAGS || status=1 ;;
    algebras16-*) python3 benchmarks/algebras16.py "${part#algebras16-}" $FLAGS || status=1 ;;
    *) echo "unknown part $part"; status=1 ;;
    esac
    echo "=== $part: $((SECONDS - start)) s"
done
exit $status
