#!/usr/bin/env bash
# Session 38's device calls (`kind: nvidia-h200`: no H100 was lent this session; carry
# [".nvcc_cache.tgz"]; logs to $OUT, the key lines to stdout since only 8 files come back). The
# preamble and the build and bench steps moved into ../call_lib.sh after the calls ran (the same
# commands).
#   O: (results/fcgp-s37/next_session.sh O, run as written) the overlapped gz A/B
#   A: main's GPU check on the H200: the build from the carried objects; the three FCGP test files;
#      the issue-4 bench; the SASS check; memcheck --hopper; racecheck over fcgp_hang_check's
#      eight cases, as room allows
#   B: why the overlapped gz (call O) lost: in the patched tree (gz_overlap.patch), Nsight Compute's
#      throughput sections of gz_tma_kernel (default) and gz_ovl_kernel (GZ_OVERLAP=1) at Cl(2,0)
#      bf16, then gz_ovl_kernel's stall samples a source line
#   C: main against gz_sts.patch (gz stages G by st.shared instead of generic stores) and
#      gz_sts_unify.patch (the same, and gz's one-position and two-column epilogues as one body),
#      the four cells, two runs a tree; test_gpu_fcgp_sm90.py in the unified tree; racecheck's eight
#      cases there, as room allows. First, here: both patched copies' objects, then main's, into
#      .nvcc_cache.tgz (NOTES_FCGP.md session 38)
#   D: main with gz's tf32 staging by st.shared (the final tree; its other kernels' PTX is main's):
#      the build, the float32 tests of test_gpu_fcgp_sm90.py, then the issue-4 bench as room allows
#      (`-k float32` matched no test id: 453 deselected; the tf32 tests ran in call E, on the warm
#      machine with D's build, as callE/output_tail.txt records)
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benchmarks/results/call_lib.sh # R, END, room, build, bench
case "${1:-}" in
A)
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    build
    room 260 tests && GPU_TESTS="tests/test_gpu_fcgp_sm90.py tests/test_gpu_fcgp.py tests/test_gpu_streams.py" \
        TEST_TIMEOUT_S=$((END - SECONDS - 200)) STAGES=test bash tests/gpu_check.sh | grep -E "passed|failed|error" | tail -n 5
    room 85 bench && bench
    room 30 memcheck && SANITIZE_TOOLS=memcheck SANITIZE_ARGS=--hopper STAGES=sanitize timeout 60 bash tests/gpu_check.sh |
        tail -n 3
    room 100 sass && STAGES=sass timeout 115 bash tests/gpu_check.sh | tail -n 8
    room 40 racecheck && LOOPS=0 CASE_S=25 timeout $((END - SECONDS - 5)) bash benchmarks/fcgp_hang_check.sh | tail -n 9
    ;;
B)
    T=/tmp/fc_tree_gz_overlap
    rm -rf "$T" && mkdir -p "$T"
    tar --exclude=./.git --exclude=./build --exclude=./gpu_check_out --exclude='*.so' -cf - . | tar -C "$T" -xf -
    (cd "$T" && git apply "$OLDPWD/benchmarks/results/fcgp-s37/gz_overlap.patch") || exit 1
    cd "$T" || exit 1
    STAGES=build timeout 300 bash tests/gpu_check.sh | tail -n 2
    C="2,bfloat16,4096,512"
    NCU_CELLS=$C NCU_MEM_KERNELS=gz_tma_kernel STAGES=ncu_mem_fcgp timeout 100 bash tests/gpu_check.sh | tail -n 12
    mv "$R/ncu_mem_2_bfloat16_4096_512.txt" "$R/ncu_mem_gz_tma.txt"
    FLASHCLIFFORD_FCGP_GZ_OVERLAP=1 NCU_CELLS=$C NCU_MEM_KERNELS=gz_ovl_kernel STAGES=ncu_mem_fcgp timeout 100 \
        bash tests/gpu_check.sh | tail -n 12
    FLASHCLIFFORD_FCGP_GZ_OVERLAP=1 NCU_CELLS=$C NCU_KERNELS=gz_ovl_kernel STAGES=ncu_src_fcgp timeout 150 \
        bash tests/gpu_check.sh | tail -n 45
    ;;
C)
    S=benchmarks/results/fcgp-s38
    PATCHES="$S/gz_sts.patch $S/gz_sts_unify.patch" PARTS_S=40 SETTINGS="base;FLASHCLIFFORD_AB_RUN=2" \
        TREE_TESTS="tests/test_gpu_fcgp_sm90.py" \
        CELLS="3,float32,4096,512 2,float32,4096,512 3,bfloat16,4096,512 2,bfloat16,4096,512" \
        timeout 420 bash benchmarks/fcgp_ab_trees.sh 2>&1 | grep -E "^Cl.*(backward|bmm)|gz_tma|^=|^#|passed|failed|error" |
        tail -n 60
    T=/tmp/fc_tree_gz_sts_unify
    room 60 racecheck && (cd "$T" && OUT="$R/race" LOOPS=0 CASE_S=25 timeout $((END - SECONDS - 5)) \
        bash benchmarks/fcgp_hang_check.sh)
    ;;
D)
    BUILD_S=200 build
    GPU_TESTS="tests/test_gpu_fcgp_sm90.py -k float32" TEST_TIMEOUT_S=$((END - SECONDS - 90)) STAGES=test \
        bash tests/gpu_check.sh | grep -E "passed|failed|error" | tail -n 3
    room 80 bench && bench $((END - SECONDS))
    ;;
*)
    echo "usage: $0 A | B | C | D"; exit 2 ;;
esac
