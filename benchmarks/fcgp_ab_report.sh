#!/usr/bin/env bash
# fcgp_ab_trees.sh under a time limit, for a device call whose stdout is what comes back (only a
# few of $OUT's files do): its log to $OUT/ab_trees.log, then on stdout its exit status, its stage
# lines, each tree's kernel and op times (the parts files, issue 4's kernels) and the test
# summaries. PATCHES, SETTINGS, CELLS and TREE_TESTS as fcgp_ab_trees.sh takes them.
#   PATCHES=benchmarks/results/fcgp-s34/gz_mc.patch bash benchmarks/fcgp_ab_report.sh 585
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export OUT
KERNELS="^Cl.*(torch.bmm|forward|backward)|fwd_tma|fwd_prep|sum of|gelu_transpose|go_rows|go_transpose|norm_stats|gw_tma|gz_tma"
timeout "${1:-585}" bash benchmarks/fcgp_ab_trees.sh >"$OUT/ab_trees.log" 2>&1
echo "ab_trees rc $?"
grep -E "^=|^#####|passed|failed|rror" "$OUT/ab_trees.log" | tail -n 14
for f in "$OUT"/*/parts_*.txt; do
    echo "## $f"
    grep -E "$KERNELS" "$f" | sed -E 's/ +/ /g; s/4096x512 //'
done
tail -n 30 "$OUT"/*/pytest.log 2>/dev/null | grep -iE "passed|failed|error" | tail -n 12
