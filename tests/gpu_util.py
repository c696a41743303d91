"""Helpers shared by the GPU test files: seeded CUDA inputs, float64 copies, the per-dtype and
per-precision bounds, and the SGP / FCGP checks against the float64 einsum through the torch op.

Shapes (SPEC section 2): x, y (D, *batch, N_in); SGP weight (N, P); FCGP weight (P, N_in, N_out);
out and grad_out (D, *batch, N_out). Import it after ``pytest.importorskip("torch")``.
"""

import functools
import math

import numpy as np
import torch
from conftest import assert_rel, input_sensitivity, rel_err

import flashclifford as fc
from flashclifford import reference

# float64 1e-12, float32 1e-5 (SPEC); half types: the reference of the rounded inputs,
# output rounded once to the type (bf16 2e-2, fp16 5e-3, SPEC)
TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 5e-3}

# FCGP modes: (input dtype, precision, SPEC bound, unit roundoff u of the matrix products'
# operands). precision only matters for float32 inputs; half inputs use their own type.
FCGP_MODES = {
    "float64": (torch.float64, "highest", 1e-12, None),
    "float32": (torch.float32, "highest", 1e-5, 2.0**-24),
    "tf32": (torch.float32, "tf32", 2e-3, 2.0**-11),
    "fp32-bf16": (torch.float32, "bf16", 2e-2, 2.0**-9),
    "bfloat16": (torch.bfloat16, "highest", 2e-2, 2.0**-9),
    "float16": (torch.float16, "highest", 5e-3, 2.0**-11),
}

# With a normalized indefinite grade norm (Cl(1,3)) or very few output features, rounding the
# operands to u flips the sign of some t_g = sum s_A o_A^2 (d|t|/dt = sign(t)) or meets a tiny
# q_g, and the gradients move by more than SPEC's bound even for an exact computation on the
# rounded operands: a float64 emulation of the kernels' roundings gave, for Cl(1,3) normalized,
# up to 3x SPEC's tf32 bound with N_out 40-70 and 1.6-2.3x (tf32, fp16, bf16) at B = N_in = N_out
# = 1. Only where the SPEC bound is exceeded, the bound becomes LOWP_COND_FACTOR times the float64
# reference's own sensitivity to relative noise u on its inputs; in those emulated cases the error
# was at most 0.93x that sensitivity. float32 keeps conftest's rule (10x the sensitivity to
# 2^-24); float64 is never scaled.
LOWP_COND_FACTOR = 3.0


def make(alg, shape, dtype, seed):
    """SGP inputs on the GPU: x, y (D, *shape), weight (shape[-1], P), all in dtype."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(alg.D, *shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    y = torch.randn(alg.D, *shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    w = torch.randn(shape[-1], alg.P, generator=g, device="cuda", dtype=torch.float32).to(dtype)
    return x, y, w


def make_fcgp(alg, batch, n_in, n_out, dtype, seed):
    """FCGP inputs on the GPU: x, y (D, *batch, N_in), weight (P, N_in, N_out) with std
    1/sqrt(N_in) (flash-clifford's init: the product stays O(1)), grad_out (D, *batch, N_out)."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32)

    x, y = randn(alg.D, *batch, n_in), randn(alg.D, *batch, n_in)
    w = randn(alg.P, n_in, n_out) / math.sqrt(max(n_in, 1))
    gout = randn(alg.D, *batch, n_out)
    return tuple(t.to(dtype) for t in (x, y, w, gout))


def np64(t):
    return t.detach().double().cpu().numpy()


def stream_handle():
    """The current torch stream as the raw ops' ``stream=`` (0 on the legacy default stream).
    Raw-op calls pass it, so the tests also hold when a side stream is current."""
    return torch.cuda.current_stream().cuda_stream


def assert_mode(got, expected, mode, name, sensitivity):
    """rel_err(got, expected) within FCGP_MODES[mode]'s bound; `sensitivity(u)` gives the
    reference's sensitivity to relative input noise u, called only when the bound is exceeded."""
    dtype, _, tol, u = FCGP_MODES[mode]
    if mode == "float32":
        assert_rel(got, expected, np.float32, name, lambda: sensitivity(2.0**-24))
        return
    err = rel_err(got, expected)
    bound = tol
    if err > tol and u is not None and np.isfinite(err):
        bound = max(tol, LOWP_COND_FACTOR * sensitivity(u))
    assert err <= bound, f"{name}: relative error {err:.3e} > bound {bound:.3e} ({mode})"


def check(alg, shape, dtype, normalize, seed=0):
    """SGP through the torch op: out and the three gradients against the float64 einsum."""
    x, y, w = (t.requires_grad_() for t in make(alg, shape, dtype, seed))
    out = fc.gelu_sgp_norm(x, y, w, alg, normalize)
    assert out.dtype == dtype and out.is_cuda
    tol = TOL[dtype]
    args = [np64(t) for t in (x, y, w)]
    ref = reference.sgp_np(*args, alg, normalize)
    g = torch.randn_like(out)
    out.backward(g)
    refs = reference.sgp_backward_np(np64(g), *args, alg, normalize)
    if dtype == torch.float32:
        # float32: SPEC's 1e-5, or 10x the reference's own sensitivity to float32 rounding
        # where a normalized indefinite grade cancels (few features): see conftest
        assert_rel(np64(out), ref, np.float32, "out", lambda: input_sensitivity(
            lambda *a: reference.sgp_np(*a, alg, normalize), *args)[0])

        def sens():
            return input_sensitivity(lambda *a: reference.sgp_backward_np(*a, alg, normalize), np64(g), *args)

        for k, (name, t, r) in enumerate(zip("xyw", (x, y, w), refs, strict=True)):
            assert_rel(np64(t.grad), r, np.float32, name, lambda k=k: sens()[k])
        return
    assert rel_err(np64(out), ref) <= tol
    # half-type gradients accumulate over the batch in float32 but are rounded inputs: 10x (TESTPLAN 5.1)
    gtol = tol if dtype == torch.float64 else 10 * tol
    for name, t, r in zip("xyw", (x, y, w), refs, strict=True):
        assert rel_err(np64(t.grad), r) <= gtol, name


def fcgp_call(x, y, w, alg, normalize, mode, gout):
    """Forward and backward of gelu_fcgp_norm on fresh leaves: [out, grad_x, grad_y, grad_weight]."""
    precision = FCGP_MODES[mode][1]
    leaves = [t.detach().clone().requires_grad_() for t in (x, y, w)]
    out = fc.gelu_fcgp_norm(*leaves, alg, normalize, precision=precision)
    out.backward(gout)
    return [out.detach()] + [t.grad for t in leaves]


def check_fcgp(alg, batch, n_in, n_out, mode, normalize, seed=0):
    """FCGP through the torch op in one of FCGP_MODES: out and the three gradients against the
    float64 einsum of the (rounded) inputs, each within the mode's bound."""
    dtype = FCGP_MODES[mode][0]
    x, y, w, gout = make_fcgp(alg, batch, n_in, n_out, dtype, seed)
    got = fcgp_call(x, y, w, alg, normalize, mode, gout)
    shapes = [gout.shape, x.shape, y.shape, w.shape]
    for name, t, shape in zip(("out", "grad_x", "grad_y", "grad_weight"), got, shapes, strict=True):
        assert t.dtype == dtype and t.is_cuda and t.shape == shape, name
    assert_fcgp(got, x, y, w, gout, alg, normalize, mode)


def assert_fcgp(got, x, y, w, gout, alg, normalize, mode):
    """got = [out, grad_x, grad_y, grad_weight] of FCGP at x, y, w, gout, each within the mode's
    bound of the float64 einsum (out may be None: the gradients only)."""
    args = [np64(t) for t in (x, y, w)]
    g64 = np64(gout)
    want = [reference.fcgp_np(*args, alg, normalize), *reference.fcgp_backward_np(g64, *args, alg, normalize)]

    @functools.cache
    def sens(u):
        fwd = input_sensitivity(lambda *a: reference.fcgp_np(*a, alg, normalize), *args, samples=10, u=u)
        bwd = input_sensitivity(lambda *a: reference.fcgp_backward_np(*a, alg, normalize), g64, *args,
                                samples=10, u=u)
        return fwd + bwd

    for k, name in enumerate(("out", "grad_x", "grad_y", "grad_weight")):
        if got[k] is not None:
            assert_mode(np64(got[k]), want[k], mode, name, lambda u, k=k: sens(u)[k])


def capture_step(f, x, y, w, g):
    """CUDA-graph capture of one forward+backward step `f(x, y, w).backward(g)` (x, y, w need
    grad), after two warm-up steps on a side stream as capture requires. Returns the graph and
    the tensors it writes: [out, x.grad, y.grad, w.grad]."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up outside the graph
        for _ in range(2):
            f(x, y, w).backward(g)
    torch.cuda.current_stream().wait_stream(s)
    for t in (x, y, w):
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = f(x, y, w)
        out.backward(g)
    return graph, [out, x.grad, y.grad, w.grad]
