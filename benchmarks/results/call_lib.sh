# Sourced by the per-session device-call scripts (results/fcgp-s38/ on; the earlier sessions'
# scripts carry their own copy, kept as they ran). From the repository root it sets R (the
# logs: $OUT on the device machine, else gpu_check_out), END (CALL_S seconds from now, default
# 570: under the 600 s a call may run), puts the tree on PYTHONPATH and defines these helpers:
#   room S WHAT   false, saying so, when fewer than S seconds are left before END
#   build         the build stage from the carried objects, and how many it linked
#   begin         (session 46 on) the GPU's name and top clock, then build
#   bench         the issue-4 bench (STAGES=bench_fcgp), its copy bandwidth and rows
#   tests_in L E ARGS...  pytest -m gpu ARGS under the environment E (one word, or ""), its
#                 verdict and first failures; the log in $R/pytest_L.log
#   lab_build NAME  benchmarks/lab/NAME.cu -> $T/NAME (T=/tmp/labs), sm_90a, with line info
#   ncu_src LABEL KERNEL CMD...  Nsight Compute on CMD's second launch of KERNEL: stall samples a
#                 SASS instruction ($R/src_LABEL.txt) and the memory sections ($R/details_LABEL.txt)
#   sanitize TOOLS S  (session 45 on) the sanitizer stage's TOOLS over the Hopper cases, S s at most
#   pack          every log but output_tail.txt into $R/logs.tgz
#   rest_of_suite [LABEL K]  (session 55 on) beside the SASS stage, every -m gpu file but the
#                 Hopper one in two pytest processes, and with LABEL and K the Hopper file's tests
#                 selected by -k K in a third (its log pytest_LABEL.log); then SASS's verdict
#   ab_fwd PATCHES S  (session 48 on) fcgp_ab_trees.sh: main against each patch, two runs a tree, S
#                 s at most, logs in $R/ab, the forward's and the yardstick's lines
R=${OUT:-gpu_check_out}
mkdir -p "$R"
export OUT="$R"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" # the in-place build, for scripts run directly
END=$((SECONDS + ${CALL_S:-570}))
room() { [ $((END - SECONDS)) -ge "$1" ] || { echo "skipped (${2}): $((END - SECONDS)) s left, needs $1"; return 1; }; }
build() {
    STAGES=build timeout "${BUILD_S:-300}" bash tests/gpu_check.sh | tail -n 1
    echo "objects from the carried cache: $(grep -o 'unchanged, object from' "$R/build.log" | wc -l)"
}
begin() {
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
}
bench() {
    { STAGES=bench_fcgp timeout "${1:-95}" bash tests/gpu_check.sh >/dev/null 2>&1; echo "bench rc $?"; }
    grep -hE "copy bandwidth|^fcgp" "$R"/bench_fcgp*.log 2>/dev/null
}
tests_in() {
    local label=$1 e=$2
    shift 2
    env $e timeout $((END - SECONDS - 20)) python3 -m pytest -q -m gpu -p no:cacheprovider "$@" >"$R/pytest_$label.log" 2>&1
    echo "tests $label ($e): rc $? $(tail -n 1 "$R/pytest_$label.log")"
    grep -E "^FAILED|^E " "$R/pytest_$label.log" | head -n 8
}
T=/tmp/labs
mkdir -p "$T"
lab_build() {
    nvcc -std=c++17 -O3 -lineinfo -Icsrc -gencode=arch=compute_90a,code=sm_90a -DFC_SM90A=1 "benchmarks/lab/$1.cu" \
        -o "$T/$1" >"$T/$1_build.log" 2>&1 || { tail -n 20 "$T/$1_build.log"; return 1; }
}
ncu_src() {
    local label=$1 k=$2
    shift 2
    ncu --kernel-name regex:"$k" --launch-skip 1 --launch-count 1 --section WarpStateStats --section SourceCounters \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        -f -o "$T/src_$label" "$@" >"$T/ncu_$label.log" 2>&1 || { tail -n 5 "$T/ncu_$label.log"; return 1; }
    ncu -i "$T/src_$label.ncu-rep" --page source --csv --print-source sass >"$T/src.csv" 2>&1
    python3 benchmarks/ncu_source_summary.py "$T/src.csv" --top 45 >"$R/src_$label.txt" 2>&1
    ncu -i "$T/src_$label.ncu-rep" --page details >"$R/details_$label.txt" 2>&1
    echo "--- $label"
    grep -E "Duration|DRAM Through|L2 Cache Through|L1/TEX Cache Through|L2 Hit|Mem Busy|Max Bandwidth|Warp Cycles|stall|Stall" \
        "$R/details_$label.txt" | head -n 24
    head -n "${SRC_LINES:-70}" "$R/src_$label.txt"
}
# (session 45 on) sanitize TOOLS S: the sanitizer stage's TOOLS (one or more, space-separated)
# over the Hopper cases, S seconds at most, its summary lines and reports a kernel
sanitize() {
    SANITIZE_TOOLS=$1 SANITIZE_ARGS=--hopper STAGES=sanitize timeout "$2" bash tests/gpu_check.sh 2>&1 |
        grep -E "canar|exit|SUMMARY|NOT|^ +[0-9]+ fc::" | head -n 30
}
# ab_fwd PATCHES S: main against each of PATCHES (space-separated) by fcgp_ab_trees.sh, each tree
# under its defaults twice, S seconds at most; the patched trees stay in /tmp/fc_tree_<name>
ab_fwd() {
    PATCHES="$1" SETTINGS="base;base" PARTS_S=60 OUT="$R/ab" timeout "$2" bash benchmarks/fcgp_ab_trees.sh 2>&1 |
        grep -E "===|#####|forward|fwd_tma|fwd_prep|bmm"
}
rest_of_suite() {
    (STAGES=sass timeout $((END - SECONDS - 15)) bash tests/gpu_check.sh >"$R/sass.txt" 2>&1) &
    [ -n "${2:-}" ] && tests_in "$1" "" tests/test_gpu_fcgp_sm90.py -k "$2" &
    tests_in fcgp_gate_streams "" tests/test_gpu_fcgp.py tests/test_gpu_gate.py tests/test_gpu_streams.py &
    tests_in sgp_rest "" tests/test_gpu_sgp.py tests/test_gpu_reliability.py tests/test_nn.py \
        tests/test_threads.py tests/test_dlpack.py tests/test_errors.py &
    wait
    tail -n 8 "$R/sass.txt"
}
# pack: every log but output_tail.txt into logs.tgz (a call brings back 8 files at most)
pack() {
    (cd "$R" && tar --exclude='*.png' --exclude=output_tail.txt --exclude=logs.tgz -czf /tmp/logs.tgz . &&
        find . -mindepth 1 ! -name output_tail.txt -delete && mv /tmp/logs.tgz .)
}
