"""Shared test helpers: the relative-error measure, per-dtype tolerances, seeded data,
the torch skip, the `gpu` marker and the side-stream mode of the GPU tests.

Multivectors are (D, *batch, N) as in SPEC section 2.
"""

import importlib.util
import os
import zlib

import numpy as np
import pytest

from flashclifford.algebra import KERNEL_METRICS, Algebra

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")

# The five kernel algebras, as pytest params with readable ids ("Cl(3,0)", ...).
ALGEBRAS = [pytest.param(Algebra(m), id=Algebra(m).name) for m in KERNEL_METRICS]

# Relative error ||out - ref|| / ||ref|| against the float64 reference (SPEC section 2).
#   float64: 1e-12. Sums have at most D * N_in * D terms of O(1) values (~1e5 for the
#            largest test shape), so rounding gives ~1e-16 * sqrt(terms) << 1e-12.
#   float32: 1e-5, the SPEC bound for SGP and for FCGP with precision "highest";
#            fp32 rounding of inputs and results alone is ~6e-8 per element.
REL_TOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}

# float32 inputs that are ill conditioned get a bound scaled by their conditioning. The grade
# norm makes some random inputs so: with an indefinite metric t_g = sum s_A o_A^2 can cancel
# (Cl(1,3)), and with few features the norm's backward subtracts nearly equal terms. There
# even a correct fp32 computation misses 1e-5 (torch's fp32 einsum: 30 of 150 random Cl(1,3)
# cases with N = 2, up to 7.6e-5). The bound is then FP32_COND_FACTOR times the sensitivity
# of the float64 reference to relative 2^-24 noise on its inputs (what rounding the inputs
# to fp32 alone costs); the CPU kernel stayed within 4.8x of it over those 150 cases.
# Float64 bounds are never scaled.
FP32_COND_FACTOR = 10.0


def rel_err(a, ref):
    """||a - ref|| / ||ref|| in float64 (Frobenius over the whole array).

    NaN or Inf in `a` gives inf so it never passes a tolerance; shapes must agree exactly.
    For an all-zero ref the absolute norm ||a|| is returned.
    """
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert a.shape == ref.shape, f"shape {a.shape} != reference shape {ref.shape}"
    if not np.all(np.isfinite(a)):
        return float("inf")
    den = np.linalg.norm(ref)
    num = np.linalg.norm(a - ref)
    return float(num / den) if den > 0 else float(num)


def input_sensitivity(fn, *args, samples=3, u=2.0**-24):
    """Per output of fn(*args) (an array or a tuple of arrays, float64), the largest relative
    change when every argument gets independent relative noise of size u (default 2^-24,
    fp32 rounding; the low-precision FCGP modes pass their own rounding level)."""
    rng = np.random.default_rng(0)
    base = fn(*args)
    base = base if isinstance(base, tuple) else (base,)
    worst = [0.0] * len(base)
    for _ in range(samples):
        noisy = [np.asarray(a, np.float64) * (1 + u * rng.standard_normal(np.shape(a))) for a in args]
        out = fn(*noisy)
        out = out if isinstance(out, tuple) else (out,)
        worst = [max(w, rel_err(o, b)) for w, o, b in zip(worst, out, base, strict=True)]
    return worst


def assert_rel(got, expected, dtype, name="", sensitivity=None):
    """Assert rel_err(got, expected) <= REL_TOL[dtype].

    For float32 only, `sensitivity` (a callable returning input_sensitivity's value for this
    output) raises the bound to FP32_COND_FACTOR times it; it is evaluated only when the
    fixed bound is exceeded. NaN never passes.
    """
    dtype = np.dtype(dtype)
    err = rel_err(got, expected)
    tol = REL_TOL[dtype]
    if err > tol and dtype == np.float32 and sensitivity is not None and np.isfinite(err):
        tol = max(tol, FP32_COND_FACTOR * sensitivity())
    assert err <= tol, f"{name}: relative error {err:.3e} > bound {tol:.3e} ({dtype})"


def seed_for(nodeid: str) -> int:
    """A stable per-test seed (the test id's CRC32), so every test gets its own data."""
    return zlib.crc32(nodeid.encode())


@pytest.fixture
def rng(request):
    """np.random.Generator seeded from the test id."""
    return np.random.default_rng(seed_for(request.node.nodeid))


def _gpu_usable():
    try:
        from flashclifford import _C

        return bool(_C.build_info().get("gpu_usable", False))
    except Exception:
        pass
    if HAVE_TORCH:
        import torch

        return torch.cuda.is_available()
    return False


def pytest_collection_modifyitems(config, items):
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    if _gpu_usable():
        return
    skip = pytest.mark.skip(reason="no usable GPU (flashclifford._C.build_info()['gpu_usable'] / torch.cuda)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


# FLASHCLIFFORD_TEST_SIDE_STREAM=1 (tests/gpu_check.sh, stage `sidestream`): every `gpu` test runs
# with a non-default stream current, as PyTorch's own CUDA tests do (TESTPLAN H3). torch's streams
# do not synchronize with the legacy default stream, so work issued there instead of on the
# caller's stream races with the test's own and shows up as wrong values.
SIDE_STREAM = os.environ.get("FLASHCLIFFORD_TEST_SIDE_STREAM") == "1"
_side_stream = None  # one for the session: per-test streams would scatter the allocator's cache


@pytest.fixture(autouse=True)
def _gpu_test_on_side_stream(request):
    if not (SIDE_STREAM and HAVE_TORCH and request.node.get_closest_marker("gpu")):
        yield
        return
    import torch

    if not torch.cuda.is_available():
        yield
        return
    global _side_stream
    if _side_stream is None:
        _side_stream = torch.cuda.Stream()
    side = _side_stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        yield
    torch.cuda.current_stream().wait_stream(side)
