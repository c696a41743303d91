#!/usr/bin/env bash
# Session 37's device calls (`kind: nvidia-h100-x1`, carry [".nvcc_cache.tgz"]; logs to $OUT, the
# key lines to stdout since only 8 files come back). First, here:
#   bash benchmarks/results/fcgp-s37/calls.sh fill PATCH   (the patched copy's objects, then main's;
#      this session pruned the older entries by hand, which the fill now does itself)
#   H: the unfused probe (benchmarks/lab/unfused_probe.py: what plain GEMMs between L2-resident
#      elementwise passes would reach, cuBLAS standing in), then main against fwd_early.patch (the
#      forward's producer brings the first stages' x, y and W as stored before its PDL wait), the
#      four issue-4 cells, two runs a tree, then the forward's tests in the patched tree
#   F: main (after H: fwd_early dropped): the build; the issue-4 bench; the SASS check; memcheck
#      --hopper; the unfused probe (after the build: it imports the package); Nsight Compute's
#      throughput sections for gz and gW at Cl(2,0) bf16 (the cell furthest from its line);
#      racecheck over fcgp_hang_check's eight cases; a second bench, as room allows
#   S: main, the start-up switches measured again on today's kernels (tuned sessions ago, on other
#      kernels): fcgp_parts over the four cells under each, base three times among them; two
#      rounds; a summary line a setting (forward / backward op, us, a cell)
#   V: main against gz_epi_pairs.patch (gz's epilogue two adjacent columns a thread at Cl(2,0)),
#      the four cells, two runs a tree; test_gpu_fcgp_sm90.py in the patched tree; the issue-4
#      bench in the patched tree; gz's stall samples a source line at Cl(2,0) bf16 on main
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
S=benchmarks/results/fcgp-s37
END=$((SECONDS + ${CALL_S:-570}))
room() { [ $((END - SECONDS)) -ge "$1" ] || { echo "skipped (${2}): $((END - SECONDS)) s left, needs $1"; return 1; }; }
build() {
    nvcc --version | tail -n 2
    STAGES=build timeout 330 bash tests/gpu_check.sh | tail -n 3
    echo "objects from the carried cache: $(grep -o 'unchanged, object from' "$R/build.log" | wc -l)"
}
bench() {
    { STAGES=bench_fcgp timeout 95 bash tests/gpu_check.sh >/dev/null 2>&1; echo "bench rc $?"; }
    grep -hE "copy bandwidth|^fcgp" "$R"/bench_fcgp*.log 2>/dev/null
}
FWD_TESTS="tests/test_gpu_fcgp_sm90.py::test_the_path_is_planned tests/test_gpu_fcgp_sm90.py::test_matrix \
tests/test_gpu_fcgp_sm90.py::test_gate_off tests/test_gpu_fcgp_sm90.py::test_deterministic_run_to_run \
tests/test_gpu_fcgp_sm90.py::test_norm_in_the_epilogue_is_the_finalize_pass \
tests/test_gpu_fcgp_sm90.py::test_weight_layouts_and_clusters_agree tests/test_gpu_fcgp_sm90.py::test_unaligned_rows_fall_back"
case "${1:-}" in
fill)
    p=${2:?patch}
    T=/tmp/fc_tree_$(basename "$p" .patch) # where fcgp_ab_trees.sh builds the patched copy
    rm -rf "$T" && mkdir -p "$T"
    tar --exclude=./.git --exclude=./build --exclude=./gpu_check_out --exclude='*.so' --exclude=./.nvcc_cache \
        --exclude=./.nvcc_cache.tgz -cf - . | tar -C "$T" -xf -
    (cd "$T" && git apply "$OLDPWD/$p") || exit 1
    # the entries neither build uses go (the call carries 64 MiB with the tree): those older than this
    stamp=$(mktemp)
    sleep 1
    CACHE="$PWD/.nvcc_cache" KEEP=1 bash "$T/benchmarks/nvcc_cache_fill.sh" && SINCE="$stamp" bash benchmarks/nvcc_cache_fill.sh
    rm -f "$stamp"
    ;;
H)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    timeout 120 python3 benchmarks/lab/unfused_probe.py 2>&1 | tee "$R/unfused_probe.txt" # (failed: no package)
    PATCHES="$S/fwd_early.patch" PARTS_S=40 SETTINGS="base;FLASHCLIFFORD_AB_RUN=2" TREE_TESTS="$FWD_TESTS" \
        CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 420 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -vE "gw_tma|gz_tma|backward" | tail -n 60
    ;;
F)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 85 bench && bench
    room 100 sass && STAGES=sass timeout 115 bash tests/gpu_check.sh | tail -n 8
    room 30 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh |
        tail -n 3
    room 60 probe && PYTHONPATH=$PWD timeout 120 python3 benchmarks/lab/unfused_probe.py >"$R/unfused_probe.txt" 2>&1
    cat "$R/unfused_probe.txt"
    room 60 ncu && NCU_CELLS="2,bfloat16,4096,512" NCU_MEM_KERNELS="gz_tma_kernel gw_tma_kernel" STAGES=ncu_mem_fcgp \
        timeout 100 bash tests/gpu_check.sh | tail -n 24
    room 120 racecheck && LOOPS=0 CASE_S=25 timeout $((END - SECONDS - 100)) bash benchmarks/fcgp_hang_check.sh | tail -n 9
    mv "$R/bench_fcgp.log" "$R/bench_fcgp_1.log" 2>/dev/null
    room 90 "second bench" && bench
    ;;
S)
    build
    V=FLASHCLIFFORD_FCGP
    SET="base;${V}_GZ_KK=2;${V}_GW_KK=1;${V}_BWD_GO_FUSED=1;${V}_BWD_GO_FUSED=2;${V}_FWD_CLUSTER=2"
    SET="$SET;${V}_FWD_CLUSTER=3;FLASHCLIFFORD_AB_RUN=2;${V}_FWD_WMN=0;${V}_FWD_WMN=1;${V}_FWD_PIPE=0"
    SET="$SET;${V}_BWD_GO_ROWS=512;FLASHCLIFFORD_AB_RUN=3"
    for round in 1 2; do
        room 170 "round $round" || break
        mkdir -p "$R/r$round"
        OUT="$R/r$round" SETTINGS="$SET" PARTS_S=30 \
            CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
            timeout $((END - SECONDS - 10)) bash benchmarks/fcgp_ab.sh >"$R/r$round/ab.log" 2>&1
        echo "=== round $round: forward / backward op us (Cl(3,0) tf32, Cl(2,0) tf32, Cl(3,0) bf16, Cl(2,0) bf16)"
        for f in "$R/r$round"/parts_*.txt; do
            printf '%-28s' "$(basename "$f" .txt | sed 's/^parts_//')"
            awk '/^Cl.* forward /{printf " %7.1f /", $(NF-1)} /^Cl.* backward /{printf " %7.1f |", $(NF-1)} END {print ""}' "$f"
        done
    done
    ;;
V)
    END=$((SECONDS + ${CALL_S:-470}))
    PATCHES="$S/gz_epi_pairs.patch" PARTS_S=40 SETTINGS="base;FLASHCLIFFORD_AB_RUN=2" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py" \
        CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 330 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|gw_tma|^=|^#|passed|failed|error" |
        tail -n 60
    T=/tmp/fc_tree_gz_epi_pairs
    room 85 "bench (patched)" && { (cd "$T" && OUT="$R/bench_pairs" STAGES=bench_fcgp timeout 95 bash tests/gpu_check.sh \
        >/dev/null 2>&1); echo "bench rc $?"; grep -hE "copy bandwidth|^fcgp" "$R"/bench_pairs/bench_fcgp.log 2>/dev/null; }
    room 40 ncu && NCU_CELLS="2,bfloat16,4096,512" NCU_KERNELS=gz_tma_kernel STAGES=ncu_src_fcgp \
        timeout $((END - SECONDS)) bash tests/gpu_check.sh | tail -n 30
    ;;
*)
    echo "usage: $0 fill PATCH | H | F | S | V"; exit 2 ;;
esac
