#!/usr/bin/env bash
# The single GPU entry point (CI has no GPU). On a machine with one:
#   bash tests/gpu_check.sh            build in place for this GPU, GPU tests, compute-sanitizer
#                                      (memcheck, racecheck, initcheck, synccheck, after a canary),
#                                      and the benchmark table of issue 3
# STAGES=build,test,sanitize,bench selects stages; logs and results go to $OUT (default gpu_check_out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
STAGES=${STAGES:-build,test,sanitize,bench}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
has() { [[ ",$STAGES," == *",$1,"* ]]; }
step() { echo; echo "=== $* ($(date +%T))"; }

nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')

if has build; then
    step "build for sm_${arch/./}"
    FLASHCLIFFORD_CUDA_ARCHS="$arch" FLASHCLIFFORD_NVCC_JOBS="$(nproc)" \
        python3 setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || { tail -n 40 "$OUT/build.log"; exit 1; }
    grep -E "warning|flashclifford:" "$OUT/build.log" | grep -v "^nvcc" | head -n 20
    python3 -c "import flashclifford as fc; print(fc.build_info())" || exit 1
fi

if has test; then
    step "GPU tests"
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/ 2>&1 | tee "$OUT/pytest_gpu.log" | tail -n 25
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

if has sanitize; then
    step "compute-sanitizer canary (must report an error)"
    if compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu_sanitize.py --canary \
        >"$OUT/sanitize_canary.log" 2>&1; then
        echo "canary NOT detected: the sanitizer runs below prove nothing"; status=1
    else
        grep -m 1 -E "Invalid __global__ write" "$OUT/sanitize_canary.log" || tail -n 5 "$OUT/sanitize_canary.log"
    fi
    for tool in memcheck racecheck initcheck synccheck; do
        step "compute-sanitizer $tool"
        quick=--quick
        [ "$tool" = memcheck ] && quick=
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 600 compute-sanitizer --tool "$tool" --error-exitcode 9 \
            --kernel-name regex:'sgp|fcgp|sum_partials' python3 tests/gpu_sanitize.py $quick \
            >"$OUT/sanitize_$tool.log" 2>&1
        rc=$?
        tail -n 3 "$OUT/sanitize_$tool.log"
        [ $rc -eq 0 ] || { echo "$tool: exit $rc"; status=1; }
    done
fi

if has bench; then
    step "benchmark (issue 3 table)"
    python3 -m flashclifford.bench --op sgp -a 2 3 --dtype float32 bfloat16 -B 4096 8192 -N 512 1024 \
        --baselines compiled --out "$OUT/bench_sgp" --no-progress 2>&1 | tee "$OUT/bench_sgp.log" | tail -n 40
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
echo
echo "gpu_check: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
