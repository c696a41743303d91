"""flashclifford.ops on the CPU backend (NumPy arrays) against the float64 NumPy reference.

The main matrix: sgp and fcgp x the five kernel algebras x gate (MVGELU on, or the plain
product) x normalize x float32/float64 x odd shapes; forward and all three gradients,
relative error within SPEC's bound.
Shapes: x, y (D, *batch, N_in); out (D, *batch, N_out); sgp weight (N, P); fcgp weight
(P, N_in, N_out).
"""

import functools

import numpy as np
import pytest
from conftest import ALGEBRAS, assert_rel, input_sensitivity, rel_err, seed_for

from flashclifford import ops
from flashclifford import reference as ref
from flashclifford.algebra import Algebra

OPS = ["sgp", "fcgp"]
FWD = {"sgp": ops.sgp_forward, "fcgp": ops.fcgp_forward}
BWD = {"sgp": ops.sgp_backward, "fcgp": ops.fcgp_backward}
FWD_NP = {"sgp": ref.sgp_np, "fcgp": ref.fcgp_np}
BWD_NP = {"sgp": ref.sgp_backward_np, "fcgp": ref.fcgp_backward_np}
DTYPES = [pytest.param(np.float32, id="float32"), pytest.param(np.float64, id="float64")]
GATES = [pytest.param(True, id="gate"), pytest.param(False, id="plain")]

# (batch dims, N_in, N_out); N_out is used by fcgp only (sgp has N_out = N_in).
SHAPES = [
    pytest.param((5,), 7, 3, id="B5-N7-Nout3"),
    pytest.param((1,), 1, 1, id="B1-N1"),
    pytest.param((2, 3), 37, 40, id="B2x3-N37-Nout40"),
    pytest.param((33,), 2, 17, id="B33-N2-Nout17"),
]


def make_inputs(rng, alg, op, dtype, batch, n_in, n_out):
    """Fresh random x, y, weight and grad_out in `dtype`, C-contiguous."""
    x = rng.standard_normal((alg.D, *batch, n_in)).astype(dtype)
    y = rng.standard_normal((alg.D, *batch, n_in)).astype(dtype)
    if op == "sgp":
        w = rng.standard_normal((n_in, alg.P)).astype(dtype)
        n_out = n_in
    else:
        # 1/sqrt(N_in) keeps the FCGP output O(1) whatever N_in (as flash-clifford's init)
        w = (rng.standard_normal((alg.P, n_in, n_out)) / np.sqrt(n_in)).astype(dtype)
    gout = rng.standard_normal((alg.D, *batch, n_out)).astype(dtype)
    return x, y, w, gout


def sensitivities(op, alg, normalize, x, y, w, gout, gate=True):
    """Lazy float32 conditioning of (forward, grad_x, grad_y, grad_weight), see conftest."""

    @functools.cache
    def fwd():
        return input_sensitivity(lambda *a: FWD_NP[op](*a, alg, normalize, gate=gate), x, y, w)[0]

    @functools.cache
    def bwd():
        return input_sensitivity(lambda *a: BWD_NP[op](*a, alg, normalize, gate=gate), gout, x, y, w)

    return [fwd] + [functools.partial(lambda i: bwd()[i], i) for i in range(3)]


def check_op(op, alg, normalize, x, y, w, gout, out, grads, gate=True):
    """out and grads against the float64 reference, with the dtype's bound."""
    sens = sensitivities(op, alg, normalize, x, y, w, gout, gate)
    expected = [FWD_NP[op](x, y, w, alg, normalize, gate=gate),
                *BWD_NP[op](gout, x, y, w, alg, normalize, gate=gate)]
    names = ("out", "grad_x", "grad_y", "grad_weight")
    for name, got, e, s in zip(names, [out, *grads], expected, sens, strict=True):
        assert_rel(got, e, x.dtype, name, s)


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("batch,n_in,n_out", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_forward_and_backward_match_reference(op, alg, normalize, dtype, batch, n_in, n_out, gate, request):
    # the same inputs with the gate on and off: seeded from the test id without the gate's (last) id
    case = request.node.nodeid.rsplit("-", 1)[0] + "]"
    x, y, w, gout = make_inputs(np.random.default_rng(seed_for(case)), alg, op, dtype, batch, n_in, n_out)
    out = FWD[op](x, y, w, alg, normalize, gate=gate)
    assert isinstance(out, np.ndarray)
    assert out.dtype == dtype and out.shape == gout.shape
    grads = BWD[op](gout, x, y, w, alg, normalize, gate=gate)
    assert len(grads) == 3
    for name, g, inp in zip(("grad_x", "grad_y", "grad_weight"), grads, (x, y, w), strict=True):
        assert isinstance(g, np.ndarray), name
        assert g.dtype == dtype and g.shape == inp.shape, name
    check_op(op, alg, normalize, x, y, w, gout, out, grads, gate)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("alg", [Algebra((1, -1, -1, -1)), Algebra(3)], ids=["Cl(1,3)", "Cl(3,0)"])
@pytest.mark.parametrize("op", OPS)
def test_float32_few_features_normalized(op, alg, seed):
    # The conditioning-scaled float32 bound exercised on purpose: N = 2 features and, for
    # Cl(1,3), an indefinite grade norm. About a fifth of these Cl(1,3) cases exceed a flat 1e-5.
    rng = np.random.default_rng(seed)
    x, y, w, gout = make_inputs(rng, alg, op, np.float32, (33,), 2, 3)
    out = FWD[op](x, y, w, alg, True)
    check_op(op, alg, True, x, y, w, gout, out, BWD[op](gout, x, y, w, alg, True))


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_out_buffers_are_written_and_returned(op, alg, dtype, gate, rng):
    x, y, w, gout = make_inputs(rng, alg, op, dtype, (4,), 5, 6)
    # NaN-filled buffers: any element the kernel leaves unwritten (or accumulates into) fails
    out = np.full(gout.shape, np.nan, dtype=dtype)
    res = FWD[op](x, y, w, alg, True, gate=gate, out=out)
    assert res is out

    bufs = [np.full(a.shape, np.nan, dtype=dtype) for a in (x, y, w)]
    res = BWD[op](gout, x, y, w, alg, True, gate=gate, grad_x=bufs[0], grad_y=bufs[1], grad_weight=bufs[2])
    assert len(res) == 3 and all(r is b for r, b in zip(res, bufs, strict=True))
    check_op(op, alg, True, x, y, w, gout, out, bufs, gate)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_one_hot_blades_give_cayley_entries_exactly(op, alg, dtype):
    # x = e_i, y = e_k (i, k >= 1, so the gate is Phi(0) = 1/2 exactly), unit weights, no
    # norm: o_j = C[i, j, k] / 4 exactly in every dtype (TESTPLAN B1).
    D = alg.D
    eye = np.eye(D, dtype=dtype)[:, 1:]
    x = np.ascontiguousarray(np.repeat(eye, D - 1, axis=1)[:, :, None])  # row (i-1)(D-1) + (k-1): e_i
    y = np.ascontiguousarray(np.tile(eye, (1, D - 1))[:, :, None])  # same row: e_k
    w = np.ones((1, alg.P), dtype) if op == "sgp" else np.ones((alg.P, 1, 1), dtype)
    o = FWD[op](x, y, w, alg, False)[:, :, 0].reshape(D, D - 1, D - 1)  # [j, i-1, k-1]
    expected = (alg.cayley[1:, :, 1:] / 4).astype(dtype)
    assert np.array_equal(o.transpose(1, 0, 2), expected)
    # without the gate the product is the Cayley table itself, scalar blade included
    x = np.ascontiguousarray(np.repeat(np.eye(D, dtype=dtype), D, axis=1)[:, :, None])  # row i D + k: e_i
    y = np.ascontiguousarray(np.tile(np.eye(D, dtype=dtype), (1, D))[:, :, None])  # same row: e_k
    o = FWD[op](x, y, w, alg, False, gate=False)[:, :, 0].reshape(D, D, D)  # [j, i, k]
    assert np.array_equal(o.transpose(1, 0, 2), alg.cayley.astype(dtype))


@pytest.mark.parametrize("op", OPS)
def test_algebra_forms_agree(op, rng):
    x, y, w, _ = make_inputs(rng, Algebra(3), op, np.float64, (3,), 4, 5)
    base = FWD[op](x, y, w, Algebra(3))
    for form in (3, (1, 1, 1), [1, 1, 1], Algebra.resolve(3)):
        assert np.array_equal(FWD[op](x, y, w, form), base), repr(form)
    x2, y2, w2, _ = make_inputs(rng, Algebra(2), op, np.float64, (3,), 4, 5)
    assert np.array_equal(FWD[op](x2, y2, w2, 2), FWD[op](x2, y2, w2, (1, 1)))


def test_fcgp_default_precision_is_highest(rng):
    alg = Algebra((1, -1, -1, -1))
    x, y, w, gout = make_inputs(rng, alg, "fcgp", np.float32, (6,), 9, 4)
    assert np.array_equal(ops.fcgp_forward(x, y, w, alg), ops.fcgp_forward(x, y, w, alg, precision="highest"))


@pytest.mark.parametrize("op", OPS)
def test_repeat_runs_bitwise_equal(op, rng):
    alg = Algebra((0, 1, 1, 1))
    x, y, w, gout = make_inputs(rng, alg, op, np.float32, (64,), 16, 8)
    first = [FWD[op](x, y, w, alg), *BWD[op](gout, x, y, w, alg)]
    for _ in range(5):
        again = [FWD[op](x, y, w, alg), *BWD[op](gout, x, y, w, alg)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


@pytest.mark.parametrize("op", OPS)
def test_gate_is_keyword_only_and_defaults_on(op, rng):
    alg = Algebra(3)
    x, y, w, gout = make_inputs(rng, alg, op, np.float64, (3,), 4, 5)
    assert np.array_equal(FWD[op](x, y, w, alg), FWD[op](x, y, w, alg, gate=True))
    assert not np.array_equal(FWD[op](x, y, w, alg, gate=False), FWD[op](x, y, w, alg))
    for a, b in zip(BWD[op](gout, x, y, w, alg), BWD[op](gout, x, y, w, alg, gate=True), strict=True):
        assert np.array_equal(a, b)
    with pytest.raises(TypeError):
        FWD[op](x, y, w, alg, True, None, False)  # gate is keyword-only


@pytest.mark.parametrize("op", OPS)
def test_plain_product_without_gate_is_bilinear(op, rng):
    # the plain product is linear in x and in y; with MVGELU it is not
    alg = Algebra((0, 1, 1, 1))
    x, y, w, _ = make_inputs(rng, alg, op, np.float64, (6,), 5, 4)
    f = lambda a, b: FWD[op](a, b, w, alg, False, gate=False)  # noqa: E731
    assert rel_err(f(3 * x - x, y), 2 * f(x, y)) <= 1e-14
    assert rel_err(f(x, y + x), f(x, y) + f(x, x)) <= 1e-14


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("op", OPS)
def test_large_values(op, normalize, gate, rng):
    # inputs x5 stress the gate (Phi saturates) and the accumulation (TESTPLAN B2)
    alg = Algebra(3)
    x, y, w, gout = make_inputs(rng, alg, op, np.float64, (8,), 12, 10)
    x, y = 5 * x, 5 * y
    got = FWD[op](x, y, w, alg, normalize, gate=gate)
    assert rel_err(got, FWD_NP[op](x, y, w, alg, normalize, gate=gate)) <= 1e-12
    for g, e in zip(
        BWD[op](gout, x, y, w, alg, normalize, gate=gate),
        BWD_NP[op](gout, x, y, w, alg, normalize, gate=gate),
        strict=True,
    ):
        assert rel_err(g, e) <= 1e-12
