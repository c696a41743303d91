"""Small cases of every CUDA kernel, for compute-sanitizer (run by tests/gpu_check.sh).

    python tests/gpu_sanitize.py [--quick]   SGP: every algebra x dtype x normalize, forward and
                                             backward, resident and two-pass rows, aligned and
                                             misaligned. FCGP: every algebra x mode (float64, float32
                                             "highest" / "tf32" / "bf16", bfloat16, float16) x
                                             normalize, forward and backward with saved and with
                                             recomputed norms, element loads with every tail and
                                             16-byte rows (cp.async). Both ops also without the
                                             gate. --quick: two algebras (Cl(3,0), and Cl(1,3)
                                             whose gz kernel takes several passes), SGP
                                             float32/bfloat16, FCGP every mode but float64.
                                             On a compute-capability 9.0 GPU with the sm_90a build,
                                             also the FCGP cases of the Hopper forward's algebras
                                             and modes with it switched on and off, and with the
                                             Hopper backward kernels on.
    python tests/gpu_sanitize.py --hopper    only the Hopper cases with the backward kernels on
    python tests/gpu_sanitize.py --canary NAME      an out-of-bounds write in a kernel called NAME
    python tests/gpu_sanitize.py --race-canary NAME an unsynchronized shared-memory race in NAME
                                             (CuPy): the sanitizer must report them, under the same
                                             --kernel-name filters as the real run, else that run
                                             proves nothing

Inputs are made on the host and copied over (cudaMemcpy), so initcheck sees them written even
though the kernel-name filter leaves PyTorch's own kernels uninstrumented. initcheck does not see
the copy engine's writes to global memory either (benchmarks/lab/init_store.cu: a tile stored by
one tensor copy reads as uninitialized, NOTES_FCGP.md session 44), and the Hopper forward stores a
bf16 output that way: under initcheck (FC_SANITIZE_TOOL=initcheck, which gpu_check.sh sets) the
torch op's saved output is written once more from the host before its backward reads it, with
values the CPU backend computes (a copy of it back from the device is reported: session 45).
"""

import os
import sys

import torch

import flashclifford as fc

# FCGP modes: (dtype, precision)
FCGP_MODES = {
    "float64": (torch.float64, "highest"),
    "float32": (torch.float32, "highest"),
    "tf32": (torch.float32, "tf32"),
    "fp32-bf16": (torch.float32, "bf16"),
    "bfloat16": (torch.bfloat16, "highest"),
    "float16": (torch.float16, "highest"),
}
# (B, N_in, N_out): element loads, tails in rows, K and columns, several gW batch splits (the gW
# kernel steps through at most 32 rows); then 16-byte rows (cp.async), N_out > N_in, a row tail
# the last: B whole bf16 steps, so the Hopper gW's transposes lie in grad_x, grad_y
FCGP_SHAPES = [(67, 45, 70), (70, 64, 96), (32, 64, 40)]
# the Hopper backward in two batch chunks (from 2048 rows): the second chunk's rows whole blocks
# of 16 (gW's transposed operands in grad_x, grad_y) or not (in the workspace)
FCGP_CHUNKED_SHAPES = [(2048, 64, 40), (2085, 72, 24)]
# more Hopper gW tiles than SMs: a round of whole tiles, then segments of the batch on several
# blocks handing their sums over through flags (fcgp_gw_sched.h), in one or two rounds
FCGP_SCHED_SHAPES = [(200, 512, 528)]
# the weight gradient one path a tile (gw_pseq_kernel: N_in a multiple of 128, N_out of 256), its
# units in rounds and segments (B 70 at 128 x 256: 5 steps), in one round of weighted segments
# (Cl(2,0) at 512 x 512, B 1043: 80 units of 66 steps on 132 SMs) and whole, each to the
# least-loaded block (Cl(3,0) there: 160 units; fcgp_gw_sched.h, PseqSched)
FCGP_PSEQ_SHAPES = [(70, 128, 256), (1043, 512, 512)]
# the norm statistics and go^T's transpose in one pass (go_rows, _C._fcgp_sm90_bwd_go_fused(1);
# by default only Cl(3,0) with float32 data takes it), then as two passes (2) in slices of 32 rows
# (_C._fcgp_sm90_bwd_go_rows): a short last slice, two chunks (the second's last slice 5 rows and
# its padding)
FCGP_GO_SLICE_SHAPES = FCGP_SHAPES + [(2085, 72, 24)]


def host(*shape, dtype):
    return torch.randn(*shape, dtype=torch.float32).to(dtype)


def dev(t):
    return t.to("cuda")


def leaves(*ts):
    return [dev(t).requires_grad_() for t in ts]


def canary(name):
    import cupy

    # writes 256 MiB past the end of a 128-byte array: outside any allocation (one element past
    # the end would stay inside CuPy's rounded-up pool block, which memcheck cannot see)
    src = f'extern "C" __global__ void {name}(float *p) {{ p[threadIdx.x + (1u << 26)] = 1.0f; }}'
    a = cupy.zeros(32, dtype=cupy.float32)
    cupy.RawKernel(src, name)((1,), (32,), (a,))
    cupy.cuda.runtime.deviceSynchronize()


def race_canary(name):
    import cupy

    # each thread writes its word of shared memory and reads another warp's word with no
    # barrier in between: read-after-write hazards across warps
    src = (f'extern "C" __global__ void {name}(float *p) {{ __shared__ float s[64]; '
           f's[threadIdx.x] = (float)threadIdx.x; p[threadIdx.x] = s[63 - threadIdx.x]; }}')
    a = cupy.zeros(64, dtype=cupy.float32)
    cupy.RawKernel(src, name)((1,), (64,), (a,))
    cupy.cuda.runtime.deviceSynchronize()


def run_sgp(algebras, dtypes):
    # a short row (resident; in 2-byte types, odd N takes the long kernels with short row groups)
    # and one long enough for the two-pass path; 2-byte types also an even short row (the
    # narrow resident kernels) and a row of 1024 (at Cl(3,0) the wide resident backward, which
    # few rows reach only where the narrow width cannot be resident), aligned only
    n = 0
    for alg in algebras:
        for dtype in dtypes:
            extra = [(3, 38), (2, 1024)] if dtype.itemsize == 2 else []
            for B, N in [(3, 37), (2, 5000)] + extra:
                for normalize in (True, False):
                    for offset in (0, 1) if (B, N) not in extra else (0,):
                        flat = host(alg.D * B * N + offset, dtype=dtype)
                        xh = flat[offset:].view(alg.D, B, N)
                        x = dev(flat)[offset:].view(alg.D, B, N)  # offset 1: no vector loads
                        yh, gh = host(alg.D, B, N, dtype=dtype), host(alg.D, B, N, dtype=dtype)
                        wh = host(N, alg.P, dtype=dtype)
                        y, w, g = dev(yh), dev(wh), dev(gh)
                        out = fc.gelu_sgp_norm(*leaves(xh, yh, wh), alg, normalize)
                        out.backward(g)  # the norms saved by the forward
                        # the raw ops on x as it lies: forward, and backward recomputing the norms;
                        # with normalize also without the gate (the plain product)
                        for gate in (True, False) if normalize else (True,):
                            fc.ops.sgp_forward(x, y, w, alg, normalize, gate=gate)
                            fc.ops.sgp_backward(g, x, y, w, alg, normalize, gate=gate)
                        n += 1
    return n


# the forward's output, which the backward reads, rewritten from the host for initcheck (above)
REWRITE_OUT = os.environ.get("FC_SANITIZE_TOOL") == "initcheck"


def run_fcgp(algebras, modes, quick, shapes=FCGP_SHAPES):
    n = 0
    for alg in algebras:
        for mode in modes:
            dtype, precision = FCGP_MODES[mode]
            for k, (B, n_in, n_out) in enumerate(shapes):
                for normalize in (True, False):
                    if quick and normalize != (k == 0):  # quick: normalize on the first shape only
                        continue
                    x, y = host(alg.D, B, n_in, dtype=dtype), host(alg.D, B, n_in, dtype=dtype)
                    w = (torch.randn(alg.P, n_in, n_out) / n_in**0.5).to(dtype)
                    g = host(alg.D, B, n_out, dtype=dtype)
                    xs, ys, ws = leaves(x, y, w)
                    out = fc.gelu_fcgp_norm(xs, ys, ws, alg, normalize, precision=precision)
                    if REWRITE_OUT:  # .data: without bumping the saved tensor's version
                        # from the CPU backend: copied back from the device, out is itself read
                        # as uninitialized by that copy (initcheck checks a copy's source)
                        out.data.copy_(fc.gelu_fcgp_norm(x.float(), y.float(), w.float(), alg, normalize).to(dtype))
                    out.backward(dev(g))  # the norms and output saved by the forward
                    # the raw ops: forward without norms, backward recomputing them; with normalize
                    # also without the gate (the plain product: no GELU pass, x and y read as they are)
                    xd, yd, wd, gd = dev(x), dev(y), dev(w), dev(g)
                    for gate in (True, False) if normalize else (True,):
                        fc.ops.fcgp_forward(xd, yd, wd, alg, normalize, precision, gate=gate)
                        fc.ops.fcgp_backward(gd, xd, yd, wd, alg, normalize, precision, gate=gate)
                    n += 1
    return n


def run(quick, hopper_only=False):
    torch.manual_seed(0)
    if quick:
        algebras = [fc.Algebra(3), fc.Algebra((1, -1, -1, -1))]
        sgp_dtypes = [torch.float32, torch.bfloat16]
        modes = [m for m in FCGP_MODES if m != "float64"]
    else:
        algebras = [fc.Algebra(m) for m in fc.algebra.KERNEL_METRICS]
        sgp_dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
        modes = list(FCGP_MODES)
    n_sgp = 0 if hopper_only else run_sgp(algebras, sgp_dtypes)
    n_fcgp = 0 if hopper_only else run_fcgp(algebras, modes, quick)
    n_switch = 0
    if fc._C.build_info()["fcgp_sm90a"] and torch.cuda.get_device_capability() == (9, 0):
        # the Hopper forward's algebras and modes with its switch on and off (the default list
        # takes whichever path the switch says): both shapes (N_in 45 keeps the mma.sync
        # forward, N_in 64 takes the copy engine), normalize on and off, with and without the gate
        # (and the Hopper backward kernels, their own switch, with the forward on); last, the
        # forward's norm with a zero wait, so that every tile but a row block's last leaves its
        # o to that one to scale (the epilogue's fix-up); then the backward with the norm's
        # statistics and go^T in one pass in every cell, then as two passes in the smallest slices
        before, before_gw = fc._C._fcgp_sm90(), fc._C._fcgp_sm90_bwd()
        before_go, before_fused = fc._C._fcgp_sm90_bwd_go_rows(), fc._C._fcgp_sm90_bwd_go_fused()
        before_wait = fc._C._fcgp_sm90_fwd_norm_wait()
        hopper_algs, hopper_modes = [fc.Algebra(2), fc.Algebra(3)], ["tf32", "fp32-bf16", "bfloat16"]
        for on, gw in ((True, True),) if hopper_only else ((True, False), (False, False), (True, True)):
            fc._C._fcgp_sm90(on)
            fc._C._fcgp_sm90_bwd(gw)
            shapes = FCGP_SHAPES + (FCGP_CHUNKED_SHAPES + FCGP_SCHED_SHAPES + FCGP_PSEQ_SHAPES if gw else [])
            n_switch += run_fcgp(hopper_algs, hopper_modes, False, shapes)
        fc._C._fcgp_sm90(True)
        fc._C._fcgp_sm90_fwd_norm_wait(0)
        n_switch += run_fcgp(hopper_algs, hopper_modes, False, FCGP_SHAPES)
        fc._C._fcgp_sm90_fwd_norm_wait(before_wait)
        fc._C._fcgp_sm90_bwd(True)
        fc._C._fcgp_sm90_bwd_go_fused(1)
        n_switch += run_fcgp(hopper_algs, hopper_modes, False, FCGP_GO_SLICE_SHAPES)
        fc._C._fcgp_sm90_bwd_go_fused(2)
        fc._C._fcgp_sm90_bwd_go_rows(32)
        n_switch += run_fcgp(hopper_algs, hopper_modes, False, FCGP_GO_SLICE_SHAPES)
        fc._C._fcgp_sm90_bwd_go_rows(before_go)
        fc._C._fcgp_sm90_bwd_go_fused(before_fused)
        fc._C._fcgp_sm90(before)
        fc._C._fcgp_sm90_bwd(before_gw)
    torch.cuda.synchronize()
    print(f"gpu_sanitize: {n_sgp} SGP and {n_fcgp} FCGP cases ran, and {n_switch} FCGP cases with the Hopper "
          "forward switched on and off and its backward kernels on")


if __name__ == "__main__":
    if "--canary" in sys.argv:
        canary(sys.argv[sys.argv.index("--canary") + 1])
    elif "--race-canary" in sys.argv:
        race_canary(sys.argv[sys.argv.index("--race-canary") + 1])
    else:
        run("--quick" in sys.argv, "--hopper" in sys.argv)
