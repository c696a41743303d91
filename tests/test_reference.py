"""flashclifford.reference: the NumPy float64 reference against a literal loop over
SPEC's formulas, the torch einsum and the unfused torch baseline; the analytic backward
against torch autograd and central finite differences.

Shapes: x, y (D, *batch, N_in); sgp weight (N, P); fcgp weight (P, N_in, N_out).
"""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ALGEBRAS, assert_rel, input_sensitivity, needs_torch, rel_err

from flashclifford import reference as ref
from flashclifford.algebra import Algebra

OPS = ["sgp", "fcgp"]
FWD_NP = {"sgp": ref.sgp_np, "fcgp": ref.fcgp_np}
BWD_NP = {"sgp": ref.sgp_backward_np, "fcgp": ref.fcgp_backward_np}


def make_inputs(rng, alg, op, batch=(3,), n_in=4, n_out=5):
    x = rng.standard_normal((alg.D, *batch, n_in))
    y = rng.standard_normal((alg.D, *batch, n_in))
    if op == "sgp":
        w = rng.standard_normal((n_in, alg.P))
        out_shape = (alg.D, *batch, n_in)
    else:
        w = rng.standard_normal((alg.P, n_in, n_out)) / math.sqrt(n_in)
        out_shape = (alg.D, *batch, n_out)
    return x, y, w, rng.standard_normal(out_shape)


# ------------------------------------------------------- a literal loop over SPEC


def _phi(t):
    return 0.5 * (1.0 + math.erf(t / math.sqrt(2.0)))


def spec_loop(op, x, y, w, alg, normalize):
    """SPEC section 2 written out term by term with Python loops: slow, obviously right."""
    D, B, N = x.shape
    xg = np.array([[[x[i, b, n] * _phi(x[0, b, n]) for n in range(N)] for b in range(B)] for i in range(D)])
    yg = np.array([[[y[i, b, n] * _phi(y[0, b, n]) for n in range(N)] for b in range(B)] for i in range(D)])
    M = N if op == "sgp" else w.shape[2]
    o = np.zeros((D, B, M))
    C, idx = alg.cayley, alg.path_index
    for i, j, k in np.argwhere(C != 0):
        p = idx[i, j, k]
        for b in range(B):
            if op == "sgp":
                for n in range(N):
                    o[j, b, n] += C[i, j, k] * w[n, p] * xg[i, b, n] * yg[k, b, n]
            else:
                for m in range(M):
                    o[j, b, m] += C[i, j, k] * sum(xg[i, b, n] * yg[k, b, n] * w[p, n, m] for n in range(N))
    if not normalize:
        return o
    out = np.empty_like(o)
    for b in range(B):
        for g in range(alg.G):
            comps = [a for a in range(D) if alg.grades[a] == g]
            q = np.mean([abs(sum(alg.grade_signs[a] * o[a, b, m] ** 2 for a in comps)) for m in range(M)])
            for a in comps:
                out[a, b] = o[a, b] / math.sqrt(q + 1e-6)
    return out


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_numpy_matches_spec_loop(op, alg, normalize, rng):
    x, y, w, _ = make_inputs(rng, alg, op, batch=(2,), n_in=3, n_out=2)
    got = FWD_NP[op](x, y, w, alg, normalize)
    assert got.dtype == np.float64
    assert rel_err(got, spec_loop(op, x, y, w, alg, normalize)) <= 1e-13  # both float64, short sums


def test_mvgelu_np_values():
    x = np.array([[0.0, 1.0, -2.0], [3.0, 4.0, 5.0]])
    g = ref.mvgelu_np(x)
    gate = np.array([0.5, _phi(1.0), _phi(-2.0)])
    assert np.array_equal(g, x * gate)
    assert g[0, 0] == 0.0 and g[1, 0] == 1.5  # Phi(0) = 1/2 exactly


@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_one_hot_blades_give_cayley_entries_exactly(op, alg):
    # x = e_i, y = e_k for all pairs at once (batch row b = i * D + k), unit weights, no norm:
    # o_j = C[i, j, k] * g_i * g_k with the gate g = Phi(0) = 1/2 for i > 0, Phi(1) for i = 0.
    D = alg.D
    eye = np.eye(D)
    x = np.repeat(eye, D, axis=1)[:, :, None]  # (D, D*D, 1): column i*D + k holds e_i
    y = np.tile(eye, (1, D))[:, :, None]  # column i*D + k holds e_k
    w = np.ones((1, alg.P)) if op == "sgp" else np.ones((alg.P, 1, 1))
    o = FWD_NP[op](x, y, w, alg, normalize=False)[:, :, 0].reshape(D, D, D)  # [j, i, k]
    gate = np.full(D, 0.5)
    gate[0] = _phi(1.0)
    expected = alg.cayley * gate[:, None, None] * gate[None, None, :]
    assert np.array_equal(o.transpose(1, 0, 2), expected)


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_normalized_output_has_unit_grade_rms(alg, rng):
    x, y, w, _ = make_inputs(rng, alg, "sgp", batch=(4,), n_in=6)
    o = ref.sgp_np(x, y, w, alg, normalize=False)
    out = ref.sgp_np(x, y, w, alg, normalize=True)
    r = ref.grade_norms_np(o, alg)  # (B, G)
    assert r.shape == (4, alg.G)
    for g in range(alg.G):
        sel = alg.grades == g
        t_out = np.abs(np.einsum("a,abn->bn", alg.grade_signs[sel], out[sel] ** 2)).mean(-1)
        t_o = np.abs(np.einsum("a,abn->bn", alg.grade_signs[sel], o[sel] ** 2)).mean(-1)
        assert np.allclose(t_out, t_o / (t_o + 1e-6), rtol=1e-12, atol=0)
        assert np.allclose(r[:, g], np.sqrt(t_o + 1e-6), rtol=1e-14, atol=0)


@pytest.mark.parametrize("op", OPS)
def test_numpy_computes_in_float64_and_keeps_batch_dims(op, rng):
    alg = Algebra(3)
    x, y, w, gout = make_inputs(rng, alg, op, batch=(2, 3))
    x32, y32, w32 = (a.astype(np.float32) for a in (x, y, w))
    got = FWD_NP[op](x32, y32, w32, alg)
    assert got.dtype == np.float64 and got.shape == gout.shape
    assert np.array_equal(got, FWD_NP[op](*(a.astype(np.float64) for a in (x32, y32, w32)), alg))
    flat = FWD_NP[op](x.reshape(alg.D, 6, -1), y.reshape(alg.D, 6, -1), w, alg)
    assert np.array_equal(FWD_NP[op](x, y, w, alg).reshape(flat.shape), flat)
    grads = BWD_NP[op](gout, x, y, w, alg)
    assert [g.shape for g in grads] == [x.shape, y.shape, w.shape]


@pytest.mark.parametrize(
    "op,bad,match",
    [
        ("sgp", "x", r"^x: expected 8 components"),
        ("sgp", "y", r"^y: expected shape"),
        ("sgp", "w", r"^weight: expected shape \(4, 20\) for Cl\(3,0\) SGP"),
        ("fcgp", "w", r"^weight: expected shape \(20, 4, N_out\) for Cl\(3,0\) FCGP"),
        ("fcgp", "gout", r"^grad_out: expected shape"),
    ],
)
def test_reference_shape_errors(op, bad, match, rng):
    alg = Algebra(3)
    x, y, w, gout = make_inputs(rng, alg, op)
    if bad == "x":
        x = x[:4]
    elif bad == "y":
        y = y[..., :2]
    elif bad == "w":
        w = w[:, :-1] if op == "sgp" else w[:-1]
    else:
        gout = gout[..., :1]
    with pytest.raises(ValueError, match=match):
        BWD_NP[op](gout, x, y, w, alg)


def test_reference_imports_without_torch(tmp_path):
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np\n"
        "from flashclifford import reference as r\n"
        "x = np.ones((8, 1, 2)); w = np.ones((2, 20))\n"
        "assert r.sgp_np(x, x, w, 3).shape == (8, 1, 2)\n"
        "assert r.sgp_backward_np(x, x, x, w, 3)[2].shape == (2, 20)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


# -------------------------------------------------------- finite differences


def _loss(op, gout, x, y, w, alg, normalize):
    return float(np.sum(gout * FWD_NP[op](x, y, w, alg, normalize)))


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_backward_np_vs_finite_differences(op, alg, normalize, rng):
    x, y, w, gout = make_inputs(rng, alg, op, batch=(2,), n_in=2, n_out=3)
    grads = BWD_NP[op](gout, x, y, w, alg, normalize)
    args = [x, y, w]
    h = 1e-5  # central differences: truncation ~h^2 = 1e-10, rounding ~1e-16 / h = 1e-11
    for a, (arr, g) in enumerate(zip(args, grads, strict=True)):
        assert g.shape == arr.shape and g.dtype == np.float64
        fd = np.empty_like(arr)
        for idx in np.ndindex(arr.shape):
            plus, minus = [v.copy() for v in args], [v.copy() for v in args]
            plus[a][idx] += h
            minus[a][idx] -= h
            up, down = _loss(op, gout, *plus, alg, normalize), _loss(op, gout, *minus, alg, normalize)
            fd[idx] = (up - down) / (2 * h)
        assert rel_err(g, fd) <= 1e-7, f"gradient {a} (x, y, weight)"


# ---------------------------------------------------------------- torch


@pytest.fixture
def torch():
    import torch

    return torch


def _t(torch, *arrays, grad=False):
    return [torch.tensor(a, dtype=torch.float64, requires_grad=grad) for a in arrays]


TORCH_FWD = {"sgp": "sgp_torch", "fcgp": "fcgp_torch"}
UNFUSED = {"sgp": "unfused_sgp_torch", "fcgp": "unfused_fcgp_torch"}


@needs_torch
@pytest.mark.parametrize("batch", [(3,), (2, 3), (1,)])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_torch_einsum_and_unfused_match_numpy(torch, op, alg, normalize, batch, rng):
    x, y, w, _ = make_inputs(rng, alg, op, batch=batch)
    expected = FWD_NP[op](x, y, w, alg, normalize)
    tx, ty, tw = _t(torch, x, y, w)
    einsum = getattr(ref, TORCH_FWD[op])(tx, ty, tw, alg, normalize)
    unfused = getattr(ref, UNFUSED[op])(tx, ty, tw, alg, normalize)
    assert einsum.dtype == unfused.dtype == torch.float64
    assert rel_err(einsum.numpy(), expected) <= 1e-12
    assert rel_err(unfused.numpy(), expected) <= 1e-12


@needs_torch
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
def test_backward_np_vs_torch_autograd(torch, op, alg, normalize, rng):
    x, y, w, gout = make_inputs(rng, alg, op, batch=(2, 3))
    expected = BWD_NP[op](gout, x, y, w, alg, normalize)
    for fn in (TORCH_FWD[op], UNFUSED[op]):
        leaves = _t(torch, x, y, w, grad=True)  # fresh leaves for each implementation
        out = getattr(ref, fn)(*leaves, alg, normalize)
        out.backward(torch.tensor(gout))
        for name, leaf, g in zip(("x", "y", "weight"), leaves, expected, strict=True):
            assert rel_err(leaf.grad.numpy(), g) <= 1e-12, f"{fn}: grad of {name}"


@needs_torch
@pytest.mark.parametrize("op", OPS)
def test_torch_float32_close_to_float64(torch, op, rng):
    alg = Algebra((1, -1, -1, -1))
    x, y, w, _ = make_inputs(rng, alg, op, batch=(7,), n_in=9)
    expected = FWD_NP[op](x, y, w, alg)
    tx, ty, tw = (torch.tensor(a, dtype=torch.float32) for a in (x, y, w))
    sens = input_sensitivity(lambda *a: FWD_NP[op](*a, alg), x, y, w)[0]
    for fn in (TORCH_FWD[op], UNFUSED[op]):
        got = getattr(ref, fn)(tx, ty, tw, alg)
        assert got.dtype == torch.float32
        # fp32 einsum: SPEC's 1e-5, scaled by the conditioning where it is ill conditioned
        assert_rel(got.numpy(), expected, np.float32, fn, lambda: sens)


@needs_torch
def test_torch_building_blocks(torch, rng):
    alg = Algebra((0, 1, 1, 1))
    x = rng.standard_normal((alg.D, 3, 4))
    tx = torch.tensor(x)
    assert rel_err(ref.mvgelu_torch(tx).numpy(), ref.mvgelu_np(x)) <= 1e-15
    o = rng.standard_normal((alg.D, 2, 3, 4))
    r = ref.grade_norms_np(o, alg)  # (B, G) with B = 6
    expected = o.reshape(alg.D, 6, 4) / r.T[alg.grades][:, :, None]
    got = ref.grade_rmsnorm_torch(torch.tensor(o), alg).numpy()
    assert rel_err(got.reshape(alg.D, 6, 4), expected) <= 1e-14
    with pytest.raises(ValueError, match="^weight: "):
        ref.geometric_product_torch(tx, tx, torch.zeros(4, alg.P + 1, dtype=torch.float64), alg)
