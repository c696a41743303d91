# Sourced by the per-session device-call scripts (results/fcgp-s38/ on; the earlier sessions'
# scripts carry their own copy, kept as they ran). From the repository root it sets R (the
# logs: $OUT on the device machine, else gpu_check_out), END (CALL_S seconds from now, default
# 570: under the 600 s a call may run), puts the tree on PYTHONPATH and defines these helpers:
#   room S WHAT   false, saying so, when fewer than S seconds are left before END
#   build         the build stage from the carried objects, and how many it linked
#   bench         the issue-4 bench (STAGES=bench_fcgp), its copy bandwidth and rows
#   tests_in L E ARGS...  pytest -m gpu ARGS under the environment E (one word, or ""), its
#                 verdict and first failures; the log in $R/pytest_L.log
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
