#!/usr/bin/env bash
# A/B of source variants on one GPU machine, in one call: this tree and, for each patch in
# PATCHES (space-separated paths, applied to a copy of this tree), the patched copy, built at the
# same time by each tree's own `STAGES=build tests/gpu_check.sh` (one nvcc a unit, so two builds
# take about as long as one; logs and gpu.txt in $OUT/<label>), then fcgp_ab.sh in each,
# one after another (SETTINGS, CELLS, TESTS as there). Logs to $OUT/base and $OUT/<patch name>.
#   PATCHES="benchmarks/results/fcgp-s27/gz_pipelined.patch" SETTINGS="FLASHCLIFFORD_FCGP_BWD_PDL=0" \
#       bash benchmarks/fcgp_ab_trees.sh
# TREE_TESTS="tests/test_gpu_fcgp_sm90.py ..." runs those GPU tests in the last patched tree (or
# in this one without patches) after the A/B.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROOT=$PWD

trees=("$ROOT") labels=(base)
for p in ${PATCHES:-}; do
    label=$(basename "$p" .patch)
    dst=/tmp/fc_tree_$label
    rm -rf "$dst" && mkdir -p "$dst"
    # the tree without build outputs or logs, then the patch
    tar -C "$ROOT" --exclude=./.git --exclude=./build --exclude=./gpu_check_out --exclude='*.so' -cf - . | tar -C "$dst" -xf - || exit 1
    (cd "$dst" && { git apply "$ROOT/$p" 2>/dev/null || patch -p1 <"$ROOT/$p"; }) >"$OUT/patch_$label.log" 2>&1 ||
        { cat "$OUT/patch_$label.log"; echo "patch $p does not apply"; exit 1; }
    trees+=("$dst") labels+=("$label")
done

echo "=== build ${labels[*]} ($(date +%T))"
pids=()
for i in "${!trees[@]}"; do # each tree's own build stage, all at once (its log: $OUT/<label>/build.log)
    mkdir -p "$OUT/${labels[$i]}"
    STAGES=build OUT="$OUT/${labels[$i]}" bash "${trees[$i]}/tests/gpu_check.sh" >"$OUT/${labels[$i]}/build_stage.log" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { tail -n 40 "$OUT/${labels[$i]}/build_stage.log"; echo "build ${labels[$i]} failed"; exit 1; }
done
echo "=== built ($(date +%T))"

status=0
for i in "${!trees[@]}"; do
    echo "##### ${labels[$i]}"
    OUT="$OUT/${labels[$i]}" bash "${trees[$i]}/benchmarks/fcgp_ab.sh" || status=1
done
if [ -n "${TREE_TESTS:-}" ]; then
    last=$((${#trees[@]} - 1))
    echo "=== tests in ${labels[$last]} ($(date +%T))"
    # shellcheck disable=SC2086  # TREE_TESTS is a list of paths
    (cd "${trees[$last]}" && PYTHONPATH="${trees[$last]}" python3 -m pytest -q -m gpu -p no:cacheprovider $TREE_TESTS) 2>&1 |
        tee "$OUT/${labels[$last]}/pytest.log" | tail -n 8
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
exit $status
