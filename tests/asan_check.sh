#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer over the C code (TESTPLAN E1).
#
#   bash tests/asan_check.sh        build a CPU-only ASan/UBSan copy of the extension, run the CPU
#                                   test suite on it, then the leak-attribution driver; exit 1 on any
#                                   ASan or UBSan report, on any leak with a frame in our module, or
#                                   on a failing test
#   ASAN_TESTS="tests/test_x.py"    the test files of stage 1 (default below)
#   ASAN_TORCH=0                    leave out the torch test files and the driver's torch calls
#   WORK=dir KEEP=1                 where to build (default: a fresh temp dir); keep build and logs
#
# The build happens in a copy of the tree, never in place: the checkout's own (CUDA) .so and any
# test process using it are untouched. CPython is not instrumented, so libasan is LD_PRELOADed and
# PYTHONMALLOC=malloc hands every Python object to ASan's allocator (use-after-free of objects is
# caught, and leaked objects are seen).
#
# Leaks: CPython, NumPy and torch leave some memory unreachable at exit. LeakSanitizer matches a
# suppression against every frame of an allocation stack, so a suppression naming libpython or
# NumPy would also hide a leak of ours (our calls run below those frames). tests/asan_suppressions.txt
# therefore names only one-time internals that never run our code; the rest is sorted here: a
# report is ours when a frame of its stack is in our module (flashclifford/_C*.so or csrc/).
#   stage 1  the suite, fast unwinding: memory errors and UB anywhere in our code, and raw mallocs
#            of ours that leak (their top frames are ours). Fast unwinding can stop at the first
#            frame of libpython (no frame pointers), so a leaked Python object made by our code may
#            go unattributed here; test_leaks.py's refcount loops catch those, and so does stage 2.
#   stage 2  tests/asan_leak_driver.py (every entry point and error path, 20 times) with full
#            DWARF unwinding: a leaked object allocated under our frames is attributed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
KEEP=${KEEP:-0}
CREATED=0
[ -n "${WORK:-}" ] || { WORK=$(mktemp -d "${TMPDIR:-/tmp}/flashclifford-asan.XXXXXX"); CREATED=1; }
ASAN_TORCH=${ASAN_TORCH:-1}
# The CPU-side tests: bindings, DLPack, ops, torch ops, threads, fuzzing, equivariance, leaks.
# test_bench (benchmark harness, subprocesses) and the pure-Python test_reference are left out.
DEFAULT_TESTS="tests/test_algebra.py tests/test_errors.py tests/test_dlpack.py tests/test_ops_cpu.py
  tests/test_fuzz.py tests/test_equivariance.py tests/test_threads.py tests/test_leaks.py"
[ "$ASAN_TORCH" = 1 ] && DEFAULT_TESTS="$DEFAULT_TESTS tests/test_torch_ops.py tests/test_compat.py"
ASAN_TESTS=${ASAN_TESTS:-$DEFAULT_TESTS}
step() { echo; echo "=== $* ($(date +%T))"; }
# removes only what this script made: a WORK given by the caller loses just src/ and logs/
cleanup() {
    if [ "$KEEP" = 1 ]; then return; fi
    if [ "$CREATED" = 1 ]; then rm -rf "$WORK"; else rm -rf "$WORK/src" "$WORK/logs"; fi
}
trap cleanup EXIT

step "copy the tree to $WORK/src"
mkdir -p "$WORK/src" "$WORK/logs"
rm -f "$WORK"/logs/*
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    # tracked and untracked-but-not-ignored files: what the checkout would build from
    git -C "$ROOT" ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$WORK/src"
else
    tar --exclude=build --exclude='*.so' --exclude='*.o' -cf - . | tar -xf - -C "$WORK/src"
fi
cd "$WORK/src" || exit 1

step "build CPU-only with -fsanitize=address,undefined -O0 -g"
if ! FLASHCLIFFORD_NO_CUDA=1 FLASHCLIFFORD_DEBUG=1 FLASHCLIFFORD_SANITIZE=address,undefined \
    "$PY" setup.py build_ext --inplace >"$WORK/logs/build.log" 2>&1; then
    tail -n 30 "$WORK/logs/build.log"; exit 1
fi
SO=$(ls flashclifford/_C*.so)
CC=$("$PY" -c 'import sysconfig; print((sysconfig.get_config_var("CC") or "cc").split()[0])')
LIBASAN=$("$CC" -print-file-name=libasan.so)
ldd "$SO" | grep -q libasan || { echo "$SO is not linked against libasan"; exit 1; }
[ -e "$LIBASAN" ] || { echo "libasan not found ($CC -print-file-name=libasan.so)"; exit 1; }
# libstdc++ too: python does not link it, and ASan's __cxa_throw interceptor must find the real
# one at start-up, else the first C++ exception (torch raises them) aborts with a CHECK failure.
PRELOAD="$LIBASAN $("$CC" -print-file-name=libstdc++.so)"
echo "$SO, preloading $PRELOAD"

# halt_on_error: a memory error ends the process (abort, so the exit status says so); leaks are
# reported at exit with exitcode 0 so that pytest's own status survives; both go to log files.
COMMON="halt_on_error=1:abort_on_error=1:exitcode=0:detect_leaks=1:allocator_may_return_null=1"
COMMON="$COMMON:detect_stack_use_after_return=1:check_initialization_order=1:strict_string_checks=1"
export PYTHONMALLOC=malloc PYTHONPATH="$WORK/src" PYTHONDONTWRITEBYTECODE=1
export LSAN_OPTIONS="suppressions=$ROOT/tests/asan_suppressions.txt:print_suppressions=0"
# UBSan reports every error and the run goes on. gcc's libubsan writes to stderr whatever its
# log_path says (checked with a shift-by-41 canary), so pytest runs with -s (no capture) and the
# reports land in pytest.log / driver.out, which the summary scans.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=0"
status=0

step "stage 1: the CPU suite under ASan + UBSan + LSan (fast unwinding)"
# shellcheck disable=SC2086
LD_PRELOAD="$PRELOAD" ASAN_OPTIONS="$COMMON:log_path=$WORK/logs/suite" \
    "$PY" -m pytest -q -s -p no:cacheprovider $ASAN_TESTS 2>&1 | tee "$WORK/logs/pytest.log" | tail -n 15
rc=${PIPESTATUS[0]}
# an abort (a memory error) may cut pytest off before its summary line
tail -n 40 "$WORK/logs/pytest.log" | grep -qE "[0-9]+ passed" || [ "$rc" -ne 0 ] || rc=99
[ "$rc" -eq 0 ] || { echo "stage 1: pytest exit status $rc"; status=1; }

step "stage 2: leak attribution driver (full unwinding)"
LD_PRELOAD="$PRELOAD" ASAN_DRIVER_TORCH="$ASAN_TORCH" \
    ASAN_OPTIONS="$COMMON:fast_unwind_on_malloc=0:malloc_context_size=40:log_path=$WORK/logs/driver" \
    "$PY" tests/asan_leak_driver.py >"$WORK/logs/driver.out" 2>&1
rc=$?
tail -n 2 "$WORK/logs/driver.out"
[ "$rc" -eq 0 ] || { echo "stage 2: driver exit status $rc"; status=1; }

step "reports"
"$PY" - "$WORK/logs" <<'EOF' || status=1
"""Sort the sanitizer logs: memory errors and UB fail; leaks fail when a frame is ours."""
import glob
import os
import re
import sys

logs = sys.argv[1]
# a frame of ours: symbolized to a source under csrc/ (compiled with relative paths), or in our .so
OURS = re.compile(r"(^|[\s/(])csrc/[\w/]+\.(c|h|cu|cuh):|flashclifford/_C[^ ]*\.so")
bad, others = [], {}
for path in sorted(glob.glob(os.path.join(logs, "*.*"))):
    name = os.path.basename(path)
    if not re.match(r"(suite|driver|ubsan)\.\d+$|pytest\.log$|driver\.out$", name):
        continue
    text = open(path, errors="replace").read()
    for m in re.finditer(r"^.*runtime error:.*$", text, re.M):  # UBSan (on stderr: pytest runs with -s)
        bad.append(f"{name}: UBSan {m.group(0).strip()}")
    for m in re.finditer(r"ERROR: AddressSanitizer: .*", text):
        bad.append(f"{name}: {m.group(0).strip()}")
    for block in re.split(r"\n(?=(?:Direct|Indirect) leak of )", text)[1:]:
        head = block.splitlines()[0]
        frames = [line for line in block.splitlines()[1:] if re.match(r"\s+#\d+ ", line)]
        if any(OURS.search(f) for f in frames):
            bad.append(f"{name}: {head}\n" + "\n".join(frames[:12]))
        else:
            # name the first frame above malloc: its function, else its module
            m = re.search(r" in ([^ ]+)|\(([^)+]+)", frames[1] if len(frames) > 1 else "")
            top = (m.group(1) or os.path.basename(m.group(2))) if m else "?"
            others[top] = others.get(top, 0) + 1
print(f"leak reports without a frame of ours (CPython / NumPy / torch / subprocesses): "
      f"{sum(others.values())}" + (f", by first frame: {dict(sorted(others.items(), key=lambda kv: -kv[1])[:8])}"
                                   if others else ""))
if bad:
    print(f"{len(bad)} report(s) from our code:")
    for b in bad:
        print(" ", b)
    sys.exit(1)
print("no ASan, UBSan or LeakSanitizer report from our code")
EOF

echo
echo "asan_check: $([ $status -eq 0 ] && echo PASS || echo FAIL) (logs in $WORK/logs$([ "$KEEP" = 1 ] || echo ', removed; KEEP=1 keeps them'))"
exit $status
