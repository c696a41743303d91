"""flashclifford.nn: Layer, BaselineLayer, the building blocks and CliffordMLP.

CPU: values and all gradients against a float64 composition of reference pieces, for every
kernel algebra; fused vs unfused with identical weights; GradeLinear with N_in != N_out;
torch.compile(fullgraph=True) forward and backward; deterministic mode; .to(dtype);
state_dict round trips; no unused parameters. The framework-free ops on NumPy arrays.
GPU (`gpu` marker): CUDA vs CPU, autocast bf16/fp16, CUDA-graph capture of a training step,
torch.compile(mode="reduce-overhead"), deterministic mode, CuPy / JAX / torch DLPack interop.

Shapes: multivectors (D, *batch, N); linear weight (G, N_in, N_out); SGP weight (N, P);
FCGP weight (P, N_in, N_out).
"""

import copy
import io
import math
import os

# Must precede the first cuBLAS handle (deterministic GEMMs) and JAX's first GPU use (JAX would
# otherwise take 75% of the GPU memory next to torch's allocator).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import ALGEBRAS, rel_err, seed_for  # noqa: E402

torch = pytest.importorskip("torch")

from flashclifford import nn as fnn  # noqa: E402
from flashclifford import ops  # noqa: E402
from flashclifford import reference as ref  # noqa: E402
from flashclifford.algebra import Algebra  # noqa: E402

# Relative error against float64 (SPEC section 2): the Layer adds one matmul before the op.
#   float64: 1e-10, well above the ~1e-15 rounding of matmul + op (the op alone is <= 1e-12).
#   float32: 1e-5, the SPEC bound; inputs/params are O(1), N <= 16, so rounding is ~1e-7.
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}
DTYPES = [pytest.param(torch.float64, id="float64"), pytest.param(torch.float32, id="float32")]
KINDS = [pytest.param(False, id="sgp"), pytest.param(True, id="fcgp")]


@pytest.fixture
def gen(request):
    """torch.Generator seeded from the test id: fresh data per test, reproducible."""
    return torch.Generator().manual_seed(seed_for(request.node.nodeid))


def randomize(module, gen, scale=0.5):
    """Non-trivial parameters (the default bias is zero, which would hide bias bugs)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale)
    return module


def project(out, seed=0):
    """A scalar loss with a fixed random output gradient. (sum(out**2) would be nearly constant
    after the grade RMSNorm, leaving gradients of order eps that no relative check can judge.)"""
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    return (out.float() * g.to(out.device)).sum()


def grads(module):
    return {name: p.grad.detach().clone() for name, p in module.named_parameters()}


# ---------------------------------------------------------------------------------------
# float64 reference pieces, written independently of flashclifford.nn


def linear_ref(x, weight, bias, alg):
    """y_A = x_A @ weight[grade(A)] component by component, bias on the scalar component only."""
    rows = []
    for a in range(alg.D):
        y_a = x[a] @ weight[int(alg.grades[a])]
        rows.append(y_a + bias if (a == 0 and bias is not None) else y_a)
    return torch.stack(rows)


def layer_ref(x, params, alg, normalize, use_fc):
    """The SPEC section 3 layer from the einsum reference (reference.sgp_torch / fcgp_torch)."""
    y = linear_ref(x, params["linear_weight"], params["linear_bias"], alg)
    product = ref.fcgp_torch if use_fc else ref.sgp_torch
    return product(x, y, params["gp_weight"], alg, normalize)


def run_ref(module, x, gout, fn):
    """fn on float64 leaf copies of module's parameters and x; returns (out, {name: grad}, grad_x)."""
    params = {n: p.detach().double().clone().requires_grad_() for n, p in module.named_parameters()}
    x64 = x.detach().double().clone().requires_grad_()
    out = fn(x64, params)
    out.backward(gout.double())
    return out.detach(), {n: p.grad for n, p in params.items()}, x64.grad


def assert_close(got, want, tol, what):
    err = rel_err(got.detach().double().cpu().numpy(), want.detach().double().cpu().numpy())
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol:.1g}"


# ---------------------------------------------------------------------------------------
# Layer against the float64 reference


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("use_fc", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_layer_matches_reference(alg, dtype, use_fc, normalize, gen):
    N = 11
    layer = randomize(fnn.Layer(N, alg, normalize=normalize, use_fc=use_fc, dtype=dtype), gen)
    x = torch.randn(alg.D, 2, 3, N, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
    out = layer(x)
    assert out.shape == x.shape and out.dtype == dtype
    gout = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    out.backward(gout.to(dtype))

    want, want_grads, want_gx = run_ref(
        layer, x, gout, lambda x64, p: layer_ref(x64, p, alg, normalize, use_fc)
    )
    assert_close(out, want, TOL[dtype], "out")
    assert_close(x.grad, want_gx, TOL[dtype], "grad x")
    for name, g in grads(layer).items():
        assert g.dtype == dtype
        assert_close(g, want_grads[name], TOL[dtype], f"grad {name}")


@pytest.mark.parametrize("use_fc", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_baseline_layer_matches_layer_with_identical_weights(alg, dtype, use_fc, gen):
    N = 9
    fused = randomize(fnn.Layer(N, alg, use_fc=use_fc, dtype=dtype), gen)
    base = fnn.BaselineLayer(N, alg, use_fc=use_fc, dtype=dtype)
    base.load_state_dict(fused.state_dict())
    x = torch.randn(alg.D, 7, N, generator=gen, dtype=torch.float64).to(dtype)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    gout = torch.randn(alg.D, 7, N, generator=gen, dtype=torch.float64).to(dtype)
    o1, o2 = fused(x1), base(x2)
    o1.backward(gout)
    o2.backward(gout)
    assert_close(o1, o2, TOL[dtype], "out")
    assert_close(x1.grad, x2.grad, TOL[dtype], "grad x")
    g1, g2 = grads(fused), grads(base)
    for name in g1:
        assert_close(g1[name], g2[name], TOL[dtype], f"grad {name}")


def test_baseline_layer_works_for_algebras_without_kernels(gen):
    alg = Algebra((1, -1))  # Cl(1,1): tables in Python, no kernels
    with pytest.raises(ValueError, match="no kernels"):
        fnn.Layer(4, alg)
    base = fnn.BaselineLayer(4, alg, dtype=torch.float64)
    x = torch.randn(alg.D, 3, 4, generator=gen, dtype=torch.float64)
    want = layer_ref(x, dict(base.named_parameters()), alg, True, False)
    assert_close(base(x), want, 1e-12, "out")


# ---------------------------------------------------------------------------------------
# building blocks


@pytest.mark.parametrize("alg", [ALGEBRAS[0], ALGEBRAS[2], pytest.param(Algebra((1, -1)), id="Cl(1,1)")])
def test_grade_linear_in_ne_out(alg, gen):
    lin = randomize(fnn.GradeLinear(5, 9, alg, dtype=torch.float64), gen)
    assert lin.weight.shape == (alg.G, 5, 9) and lin.bias.shape == (9,)
    x = torch.randn(alg.D, 2, 3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    out = lin(x)
    assert out.shape == (alg.D, 2, 3, 9)
    gout = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    out.backward(gout)
    want, want_grads, want_gx = run_ref(
        lin, x, gout, lambda x64, p: linear_ref(x64, p["weight"], p["bias"], alg)
    )
    assert_close(out, want, 1e-13, "out")
    assert_close(x.grad, want_gx, 1e-13, "grad x")
    for name, g in grads(lin).items():
        assert_close(g, want_grads[name], 1e-13, f"grad {name}")
    # the bias reaches the scalar component and nothing else
    zero = lin(torch.zeros(alg.D, 1, 5, dtype=torch.float64))
    assert torch.equal(zero[0, 0], lin.bias.detach())
    assert not zero[1:].any()


def test_grade_linear_without_bias(gen):
    alg = Algebra(3)
    lin = randomize(fnn.GradeLinear(4, 6, alg, bias=False, dtype=torch.float64), gen)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    x = torch.randn(alg.D, 3, 4, generator=gen, dtype=torch.float64)
    assert_close(lin(x), linear_ref(x, lin.weight, None, alg), 1e-13, "out")


def test_mvgelu_and_grade_rmsnorm_match_numpy(gen):
    for alg in (Algebra(3), Algebra((1, -1, -1, -1)), Algebra((0, 1, 1, 1))):
        x = torch.randn(alg.D, 4, 6, generator=gen, dtype=torch.float64)
        assert_close(fnn.MVGELU()(x), torch.from_numpy(ref.mvgelu_np(x.numpy())), 1e-14, "mvgelu")
        r = ref.grade_norms_np(x.numpy(), alg)  # (B, G)
        want = x.numpy() / r.T[alg.grades][:, :, None]
        assert_close(fnn.GradeRMSNorm(alg)(x), torch.from_numpy(want), 1e-13, f"rmsnorm {alg.name}")


def plain_product_np(x, y, w, alg):
    """o_j = sum_ik C[i,j,k] w[path(i,j,k)] x_i y_k straight from the Cayley table (no gate)."""
    C, path = alg.cayley, alg.path_index
    fc_ = w.ndim == 3
    out = np.zeros((alg.D, x.shape[1], w.shape[-1] if fc_ else x.shape[-1]))
    for i, j, k in zip(*np.nonzero(C), strict=True):
        p = path[i, j, k]
        if fc_:
            out[j] += C[i, j, k] * (x[i] * y[k]) @ w[p]
        else:
            out[j] += C[i, j, k] * w[:, p] * x[i] * y[k]
    return out


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_plain_geometric_product_gate_and_norm_off(alg, gen):
    x = torch.randn(alg.D, 3, 4, generator=gen, dtype=torch.float64)
    y = torch.randn(alg.D, 3, 4, generator=gen, dtype=torch.float64)
    sgp = randomize(
        fnn.WeightedGeometricProduct(4, alg, gate=False, normalize=False, dtype=torch.float64), gen
    )
    want = plain_product_np(x.numpy(), y.numpy(), sgp.weight.detach().numpy(), alg)
    assert_close(sgp(x, y), torch.from_numpy(want), 1e-13, "sgp")
    fcgp = randomize(
        fnn.FullyConnectedGeometricProduct(4, 5, alg, gate=False, normalize=False, dtype=torch.float64), gen
    )
    want = plain_product_np(x.numpy(), y.numpy(), fcgp.weight.detach().numpy(), alg)
    assert_close(fcgp(x, y), torch.from_numpy(want), 1e-13, "fcgp")


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_product_blocks_without_gate_match_reference(alg, dtype, normalize, gen):
    # gate=False runs on the fused kernels: output and the gradients of x, y and weight against
    # the float64 einsum reference without the gate
    N = 7
    for block, product in (
        (fnn.WeightedGeometricProduct(N, alg, gate=False, normalize=normalize, dtype=dtype), ref.sgp_torch),
        (
            fnn.FullyConnectedGeometricProduct(N, 5, alg, gate=False, normalize=normalize, dtype=dtype),
            ref.fcgp_torch,
        ),
    ):
        what = type(block).__name__
        randomize(block, gen)
        x, y = (
            torch.randn(alg.D, 2, 3, N, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
            for _ in range(2)
        )
        out = block(x, y)
        assert out.dtype == dtype
        gout = torch.randn(out.shape, generator=gen, dtype=torch.float64)
        out.backward(gout.to(dtype))
        x64, y64, w64 = (t.detach().double().clone().requires_grad_() for t in (x, y, block.weight))
        want = product(x64, y64, w64, alg, normalize, gate=False)
        want.backward(gout)
        assert_close(out, want, TOL[dtype], f"{what} out")
        pairs = {"x": (x.grad, x64.grad), "y": (y.grad, y64.grad), "weight": (block.weight.grad, w64.grad)}
        for name, (got, exp) in pairs.items():
            assert_close(got, exp, TOL[dtype], f"{what} grad {name}")


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_blocks_compose_to_the_fused_product_and_layer(alg, normalize, gen):
    N = 6
    x = torch.randn(alg.D, 5, N, generator=gen, dtype=torch.float64)
    y = torch.randn(alg.D, 5, N, generator=gen, dtype=torch.float64)
    gelu, norm = fnn.MVGELU(), fnn.GradeRMSNorm(alg)
    for fused, plain in (
        (
            fnn.WeightedGeometricProduct(N, alg, normalize=normalize, dtype=torch.float64),
            fnn.WeightedGeometricProduct(N, alg, gate=False, normalize=False, dtype=torch.float64),
        ),
        (
            fnn.FullyConnectedGeometricProduct(N, 3, alg, normalize=normalize, dtype=torch.float64),
            fnn.FullyConnectedGeometricProduct(N, 3, alg, gate=False, normalize=False, dtype=torch.float64),
        ),
    ):
        plain.load_state_dict(randomize(fused, gen).state_dict())
        composed = plain(gelu(x), gelu(y))
        assert_close(fused(x, y), norm(composed) if normalize else composed, 1e-12, type(fused).__name__)

    # Layer = GradeLinear(N, N) followed by the fused product, with the same weights
    layer = randomize(fnn.Layer(N, alg, normalize=normalize, dtype=torch.float64), gen)
    lin = fnn.GradeLinear(N, N, alg, dtype=torch.float64)
    lin.load_state_dict({"weight": layer.linear_weight, "bias": layer.linear_bias})
    prod = fnn.WeightedGeometricProduct(N, alg, normalize=normalize, dtype=torch.float64)
    prod.load_state_dict({"weight": layer.gp_weight})
    assert_close(layer(x), prod(x, lin(x)), 1e-14, "Layer")


def test_clifford_mlp_residual_and_embedding(gen):
    alg = Algebra(3)
    for residual in (True, False):
        mlp = randomize(
            fnn.CliffordMLP(8, alg, 3, residual=residual, in_features=5, out_features=2, dtype=torch.float64),
            gen,
        )
        x = torch.randn(alg.D, 4, 5, generator=gen, dtype=torch.float64)
        h = mlp.embed(x)
        for layer in mlp.layers:
            h = h + layer(h) if residual else layer(h)
        out = mlp(x)
        assert out.shape == (alg.D, 4, 2)
        assert torch.equal(out, mlp.readout(h))
    plain = fnn.CliffordMLP(8, alg, 2)
    assert plain.embed is None and plain.readout is None
    assert plain(torch.randn(alg.D, 3, 8)).shape == (alg.D, 3, 8)


@pytest.mark.parametrize("use_fc", KINDS)
def test_clifford_mlp_fused_vs_baseline_identical_weights(use_fc, gen):
    alg = Algebra(3)
    mlp = randomize(
        fnn.CliffordMLP(8, alg, 3, use_fc=use_fc, in_features=4, out_features=3, dtype=torch.float64),
        gen,
        scale=0.3,
    )
    base = fnn.CliffordMLP(
        8, alg, 3, use_fc=use_fc, in_features=4, out_features=3, baseline=True, dtype=torch.float64
    )
    base.load_state_dict(mlp.state_dict())
    assert all(isinstance(m, fnn.BaselineLayer) for m in base.layers)
    x = torch.randn(alg.D, 6, 4, generator=gen, dtype=torch.float64)
    o1, o2 = mlp(x), base(x)
    o1.sum().backward()
    o2.sum().backward()
    assert_close(o1, o2, 1e-10, "out")
    g1, g2 = grads(mlp), grads(base)
    for name in g1:
        assert_close(g1[name], g2[name], 1e-10, f"grad {name}")


# ---------------------------------------------------------------------------------------
# module behaviour


def test_initialisation_follows_spec():
    N, alg = 256, Algebra(3)
    n = alg.n
    torch.manual_seed(1234)
    sgp, fcgp = fnn.Layer(N, alg), fnn.Layer(N, alg, use_fc=True)
    assert sgp.gp_weight.shape == (N, alg.P) and fcgp.gp_weight.shape == (alg.P, N, N)
    assert sgp.linear_weight.shape == fcgp.linear_weight.shape == (alg.G, N, N)
    # std estimates from >= 5000 samples are within ~2% (sampling error 1/sqrt(2 * samples))
    for got, want in (
        (sgp.gp_weight.std(), 1 / math.sqrt(n + 1)),
        (fcgp.gp_weight.std(), 1 / math.sqrt(n + 1)),
        (sgp.linear_weight.std(), 1 / math.sqrt(N * (n + 1))),
        (fcgp.linear_weight.std(), 1 / math.sqrt(N)),
    ):
        assert abs(got.item() / want - 1) < 0.03
    assert not sgp.linear_bias.any() and not fcgp.linear_bias.any()
    before = sgp.gp_weight.detach().clone()
    with torch.no_grad():
        sgp.linear_bias.fill_(1.0)
    sgp.reset_parameters()
    assert not sgp.linear_bias.any() and not torch.equal(before, sgp.gp_weight)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: fnn.Layer(6, 3), id="Layer"),
        pytest.param(lambda: fnn.Layer(6, 2, use_fc=True), id="Layer-fc"),
        pytest.param(lambda: fnn.BaselineLayer(6, 3), id="BaselineLayer"),
        pytest.param(lambda: fnn.CliffordMLP(6, 3, 2, in_features=3, out_features=2), id="CliffordMLP"),
        pytest.param(lambda: fnn.GradeLinear(6, 4, 3), id="GradeLinear"),
    ],
)
def test_every_parameter_gets_a_gradient(make):
    # DistributedDataParallel fails on parameters that forward does not use
    m = make()
    n_in = m.embed.in_features if getattr(m, "embed", None) is not None else 6
    project(m(torch.randn(m.algebra.D, 5, n_in))).backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_product_blocks_every_parameter_gets_a_gradient():
    alg = Algebra(3)
    x, y = torch.randn(alg.D, 5, 6), torch.randn(alg.D, 5, 6)
    for m in (
        fnn.WeightedGeometricProduct(6, alg),
        fnn.FullyConnectedGeometricProduct(6, 4, alg),
        fnn.WeightedGeometricProduct(6, alg, gate=False),
    ):
        project(m(x, y)).backward()
        assert m.weight.grad is not None and m.weight.grad.abs().sum() > 0


def test_state_dict_round_trip(gen):
    alg = Algebra(3)
    for make in (
        lambda: fnn.Layer(7, alg),
        lambda: fnn.Layer(7, alg, use_fc=True),
        lambda: fnn.CliffordMLP(7, alg, 2, in_features=3, out_features=2),
    ):
        a = randomize(make(), gen)
        buf = io.BytesIO()
        torch.save(a.state_dict(), buf)
        buf.seek(0)
        b = make()  # different random init
        b.load_state_dict(torch.load(buf, weights_only=True))
        n_in = a.embed.in_features if isinstance(a, fnn.CliffordMLP) else 7
        x = torch.randn(alg.D, 4, n_in, generator=gen)
        assert torch.equal(a(x), b(x))
    # only parameters are saved: the grade index is derived, not state
    assert set(fnn.Layer(4, alg).state_dict()) == {"gp_weight", "linear_weight", "linear_bias"}
    assert set(fnn.GradeLinear(4, 5, alg).state_dict()) == {"weight", "bias"}


def test_to_dtype_moves_parameters_and_keeps_index_buffer(gen):
    alg = Algebra(3)
    layer = fnn.Layer(5, alg)
    assert layer.gp_weight.dtype == torch.float32
    layer.to(torch.float64)
    assert all(p.dtype == torch.float64 for p in layer.parameters())
    assert layer.grades.dtype == torch.long  # integer buffers keep their dtype
    x = torch.randn(alg.D, 3, 5, generator=gen, dtype=torch.float64)
    assert layer(x).dtype == torch.float64
    base = fnn.BaselineLayer(5, alg).double()
    base.load_state_dict(layer.state_dict())
    assert_close(layer(x), base(x), 1e-12, "after .double()")
    # bfloat16 on the CPU: the op computes in float32 and rounds (SPEC section 2)
    x32 = torch.randn(alg.D, 3, 5, generator=gen)
    want = layer.float()(x32)
    got = copy.deepcopy(layer).to(torch.bfloat16)(x32.bfloat16())
    assert got.dtype == torch.bfloat16
    assert_close(got, want, 3e-2, "bfloat16")  # bf16 has 8 mantissa bits: ~4e-3 per rounding


def test_extra_repr_and_errors():
    alg = Algebra(3)
    assert "n_features=5, algebra=Cl(3,0), normalize=True, use_fc=False" in repr(fnn.Layer(5, 3))
    assert "in_features=2, out_features=3" in repr(fnn.GradeLinear(2, 3, alg))
    assert "precision=tf32" in repr(fnn.Layer(5, 3, use_fc=True, precision="tf32"))
    assert "gate=False" in repr(fnn.WeightedGeometricProduct(5, 3, gate=False))
    with pytest.raises(ValueError, match=r"x: expected shape \(8, \*batch, 5\) for Cl\(3,0\)"):
        fnn.Layer(5, 3)(torch.randn(4, 2, 5))
    with pytest.raises(ValueError, match=r"x: expected shape"):
        fnn.Layer(5, 3)(torch.randn(8, 2, 6))
    with pytest.raises(ValueError, match="precision"):
        fnn.Layer(5, 3, use_fc=True, precision="fp8")
    with pytest.raises(ValueError, match="n_layers"):
        fnn.CliffordMLP(5, 3, -1)


def test_multiple_batch_dims_match_flattened(gen):
    alg = Algebra(2)
    layer = fnn.Layer(6, alg)
    x = torch.randn(alg.D, 2, 3, 6, generator=gen)
    assert torch.equal(layer(x).reshape(alg.D, 6, 6), layer(x.reshape(alg.D, 6, 6)))


# ---------------------------------------------------------------------------------------
# torch.compile, determinism


def _compile_check(model, x, tol=1e-5):
    """torch.compile(fullgraph=True) forward + backward equals eager (values and gradients)."""
    torch._dynamo.reset()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, fullgraph=True)
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    oc, oe = compiled(xc), eager(xe)
    g = torch.randn_like(oe)
    oc.backward(g)
    oe.backward(g)
    assert_close(oc, oe, tol, "compiled out")
    assert_close(xc.grad, xe.grad, tol, "compiled grad x")
    ge = grads(eager)
    for name, gc in grads(model).items():
        assert_close(gc, ge[name], tol, f"compiled grad {name}")


@pytest.mark.parametrize("use_fc", KINDS)
def test_compile_fullgraph_layer(use_fc, gen):
    alg = Algebra(3)
    _compile_check(
        randomize(fnn.Layer(8, alg, use_fc=use_fc), gen), torch.randn(alg.D, 2, 5, 8, generator=gen)
    )


def test_compile_fullgraph_clifford_mlp(gen):
    alg = Algebra((0, 1, 1, 1))
    mlp = randomize(fnn.CliffordMLP(8, alg, 3, in_features=4, out_features=2), gen, scale=0.3)
    _compile_check(mlp, torch.randn(alg.D, 6, 4, generator=gen))


def test_compile_fullgraph_baseline_and_blocks(gen):
    # the benchmark compiles the unfused baseline; the blocks mix torch ops and the gate-off fused op
    alg = Algebra(3)
    _compile_check(
        randomize(fnn.CliffordMLP(8, alg, 2, baseline=True), gen, scale=0.3),
        torch.randn(alg.D, 6, 8, generator=gen),
    )

    class Blocks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = fnn.GradeLinear(8, 8, alg)
            self.gp = fnn.WeightedGeometricProduct(8, alg, gate=False, normalize=False)
            self.act, self.norm = fnn.MVGELU(), fnn.GradeRMSNorm(alg)

        def forward(self, x):
            return self.norm(self.gp(self.act(x), self.lin(x)))

    _compile_check(Blocks(), torch.randn(alg.D, 6, 8, generator=gen))


def test_deterministic_algorithms_accept_the_layers(gen):
    alg = Algebra(3)
    mlp = fnn.CliffordMLP(8, alg, 2, in_features=3, out_features=2)
    fcl = fnn.Layer(8, alg, use_fc=True)
    x = torch.randn(alg.D, 16, 3, generator=gen)
    was, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True)
    try:
        runs = []
        for _ in range(2):
            mlp.zero_grad(set_to_none=True)
            fcl.zero_grad(set_to_none=True)
            h = mlp(x)
            out = fcl(torch.randn(alg.D, 16, 8, generator=torch.Generator().manual_seed(5)))
            (project(h) + project(out, 1)).backward()
            runs.append([h.detach()] + [p.grad.clone() for p in (*mlp.parameters(), *fcl.parameters())])
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))


# ---------------------------------------------------------------------------------------
# the framework-free level on NumPy (the CPU half of the DLPack examples)


def test_numpy_ops_forward_backward_and_out(rng):
    alg = Algebra(3)
    x = rng.standard_normal((alg.D, 6, 5)).astype(np.float32)
    y = rng.standard_normal((alg.D, 6, 5)).astype(np.float32)
    w = rng.standard_normal((5, alg.P)).astype(np.float32)
    out = np.empty_like(x)
    res = ops.sgp_forward(x, y, w, alg, out=out)
    assert isinstance(res, np.ndarray) and np.shares_memory(res, out)  # written in place, no copy
    assert rel_err(out, ref.sgp_np(x, y, w, alg)) <= 1e-5
    gout = rng.standard_normal(out.shape).astype(np.float32)
    for got, want in zip(
        ops.sgp_backward(gout, x, y, w, alg), ref.sgp_backward_np(gout, x, y, w, alg), strict=True
    ):
        assert isinstance(got, np.ndarray) and rel_err(got, want) <= 1e-5


# ---------------------------------------------------------------------------------------
# GPU (run by tests/gpu_check.sh on the GPU machine)


def _cuda_pair(model, x):
    """Forward + backward on CPU and on CUDA copies of the model; returns both (out, grads, grad_x)."""
    results = []
    for device in ("cpu", "cuda"):
        m = copy.deepcopy(model).to(device)
        xd = x.detach().clone().to(device).requires_grad_()
        out = m(xd)
        project(out).backward()
        results.append((out.detach().cpu(), {n: g.cpu() for n, g in grads(m).items()}, xd.grad.cpu()))
    return results


@pytest.mark.gpu
@pytest.mark.parametrize("use_fc", KINDS)
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_gpu_layer_matches_cpu(alg, use_fc, gen):
    model = randomize(fnn.CliffordMLP(32, alg, 2, use_fc=use_fc, precision="highest"), gen, scale=0.3)
    (oc, gc, xc), (og, gg, xg) = _cuda_pair(model, torch.randn(alg.D, 33, 32, generator=gen))
    assert_close(og, oc, 1e-5, "out")
    assert_close(xg, xc, 1e-5, "grad x")
    for name in gc:
        assert_close(gg[name], gc[name], 1e-5, f"grad {name}")


@pytest.mark.gpu
def test_gpu_to_device_moves_parameters_and_buffers():
    mlp = fnn.CliffordMLP(16, 3, 2, in_features=3, out_features=2).to("cuda")
    assert all(t.is_cuda for t in (*mlp.parameters(), *mlp.buffers()))
    assert mlp(torch.randn(8, 4, 3, device="cuda")).is_cuda
    mlp.to("cpu", torch.float64)
    assert all(p.device.type == "cpu" and p.dtype == torch.float64 for p in mlp.parameters())


# bf16 / fp16 against float32: SPEC bounds the op at 2e-2 / 5e-3; the matmul in the autocast
# dtype before it adds one rounding of its inputs (2^-9 / 2^-12 relative), gradients one more.
AUTOCAST_TOL = {torch.bfloat16: (3e-2, 6e-2), torch.float16: (1e-2, 3e-2)}


@pytest.mark.gpu
@pytest.mark.parametrize("use_fc", KINDS)
@pytest.mark.parametrize(
    "dtype", [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="fp16")]
)
def test_gpu_autocast(dtype, use_fc, gen):
    alg = Algebra(3)
    layer = randomize(fnn.Layer(64, alg, use_fc=use_fc, precision="highest"), gen, scale=0.2).cuda()
    low = copy.deepcopy(layer)
    x = torch.randn(alg.D, 256, 64, generator=gen).cuda()
    ref_out = layer(x)
    project(ref_out).backward()
    with torch.autocast("cuda", dtype=dtype):
        out = low(x)
        assert out.dtype == dtype  # the op runs in the autocast dtype, as a matmul does
        loss = project(out)
    loss.backward()
    tol_out, tol_grad = AUTOCAST_TOL[dtype]
    assert_close(out, ref_out, tol_out, "out")
    g_low, g_ref = grads(low), grads(layer)
    for name in g_ref:
        assert g_low[name].dtype == torch.float32  # parameters stay float32
        assert_close(g_low[name], g_ref[name], tol_grad, f"grad {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("use_fc", KINDS)
def test_gpu_cuda_graph_training_step(use_fc, gen):
    alg = Algebra(3)
    model = randomize(
        fnn.CliffordMLP(32, alg, 2, use_fc=use_fc, precision="highest", in_features=4, out_features=2),
        gen,
        scale=0.3,
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    static_x = torch.randn(alg.D, 64, 4, device="cuda")
    static_t = torch.randn(alg.D, 64, 2, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = (model(static_x) - static_t).square().mean()
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture (allocator, lazy init)
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()

    # the same steps in eager mode on a copy taken after capture (capture does not run the work)
    eager = copy.deepcopy(model)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=1e-2)
    for i in range(3):
        xi = torch.randn(alg.D, 64, 4, generator=torch.Generator().manual_seed(i)).cuda()
        ti = torch.randn(alg.D, 64, 2, generator=torch.Generator().manual_seed(100 + i)).cuda()
        static_x.copy_(xi)
        static_t.copy_(ti)
        graph.replay()
        eager_opt.zero_grad(set_to_none=True)
        eager_loss = (eager(xi) - ti).square().mean()
        eager_loss.backward()
        eager_opt.step()
        torch.cuda.synchronize()
        assert torch.isfinite(static_loss).item()
        assert_close(static_loss, eager_loss, 1e-5, f"loss at replay {i}")
    for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
        assert_close(p, q, 1e-5, f"parameter {name} after 3 replays")


@pytest.mark.gpu
@pytest.mark.parametrize("use_fc", KINDS)
def test_gpu_compile_fullgraph_and_reduce_overhead(use_fc, gen):
    alg = Algebra(3)
    model = randomize(
        fnn.CliffordMLP(32, alg, 2, use_fc=use_fc, precision="highest", in_features=4, out_features=2),
        gen,
        scale=0.3,
    ).cuda()
    x = torch.randn(alg.D, 64, 4, generator=gen).cuda()
    _compile_check(model, x)

    torch._dynamo.reset()
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # the first calls record, later ones replay the CUDA graph
        torch.compiler.cudagraph_mark_step_begin()
        model.zero_grad(set_to_none=True)
        out = compiled(x)
        project(out).backward()
        out = out.detach().clone()  # cudagraph outputs are overwritten by the next replay
    eager.zero_grad(set_to_none=True)
    want = eager(x)
    project(want).backward()
    assert_close(out, want, 1e-5, "reduce-overhead out")
    ge = grads(eager)
    for name, g in grads(model).items():
        assert_close(g, ge[name], 1e-5, f"reduce-overhead grad {name}")


@pytest.mark.gpu
def test_gpu_deterministic_bitwise_repeatable(gen):
    alg = Algebra(3)
    model = randomize(fnn.CliffordMLP(64, alg, 2, in_features=4, out_features=2), gen, scale=0.3).cuda()
    fcl = randomize(fnn.Layer(64, alg, use_fc=True, precision="highest"), gen, scale=0.3).cuda()
    x = torch.randn(alg.D, 512, 4, generator=gen).cuda()
    x2 = torch.randn(alg.D, 512, 64, generator=gen).cuda()
    was, warn_only = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True)
    try:
        runs = []
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            fcl.zero_grad(set_to_none=True)
            h, o = model(x), fcl(x2)
            (project(h) + project(o, 1)).backward()
            runs.append(
                [h.detach(), o.detach()] + [p.grad.clone() for p in (*model.parameters(), *fcl.parameters())]
            )
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))


def _np_inputs(alg, seed, B=48, N=40):
    r = np.random.default_rng(seed)
    x = r.standard_normal((alg.D, B, N)).astype(np.float32)
    y = r.standard_normal((alg.D, B, N)).astype(np.float32)
    w = r.standard_normal((N, alg.P)).astype(np.float32)
    g = r.standard_normal((alg.D, B, N)).astype(np.float32)
    return x, y, w, g


@pytest.mark.gpu
def test_gpu_torch_dlpack_ops_without_copies():
    alg = Algebra(3)
    xn, yn, wn, gn = _np_inputs(alg, 1)
    x, y, w, g = (torch.from_numpy(a).cuda() for a in (xn, yn, wn, gn))
    stream = torch.cuda.current_stream().cuda_stream
    buf = ops.sgp_forward(x, y, w, alg, stream=stream)
    out = torch.from_dlpack(buf)
    assert out.data_ptr() == buf.ptr  # imported, not copied
    assert rel_err(out.cpu().numpy(), ref.sgp_np(xn, yn, wn, alg)) <= 1e-5
    dest = torch.empty_like(x)
    ops.sgp_forward(x, y, w, alg, out=dest, stream=stream)  # written in place into torch memory
    assert torch.equal(dest, out)
    want = ref.sgp_backward_np(gn, xn, yn, wn, alg)
    for got, r in zip(ops.sgp_backward(g, x, y, w, alg, stream=stream), want, strict=True):
        assert rel_err(torch.from_dlpack(got).cpu().numpy(), r) <= 1e-5


@pytest.mark.gpu
def test_gpu_cupy_dlpack_ops_without_copies():
    cp = pytest.importorskip("cupy")
    alg = Algebra(3)
    xn, yn, wn, gn = _np_inputs(alg, 2)
    x, y, w, g = (cp.asarray(a) for a in (xn, yn, wn, gn))
    stream = cp.cuda.get_current_stream().ptr  # 0: the legacy default stream
    buf = ops.sgp_forward(x, y, w, alg, stream=stream)
    out = cp.from_dlpack(buf)
    assert out.data.ptr == buf.ptr  # imported, not copied
    assert rel_err(cp.asnumpy(out), ref.sgp_np(xn, yn, wn, alg)) <= 1e-5
    dest = cp.empty_like(x)
    ops.sgp_forward(x, y, w, alg, out=dest, stream=stream)  # written in place into CuPy memory
    assert bool((dest == out).all())
    want = ref.sgp_backward_np(gn, xn, yn, wn, alg)
    gx = cp.empty_like(x)
    got = ops.sgp_backward(g, x, y, w, alg, grad_x=gx, stream=stream)
    assert rel_err(cp.asnumpy(gx), want[0]) <= 1e-5
    for t, r in zip(got[1:], want[1:], strict=True):
        assert rel_err(cp.asnumpy(cp.from_dlpack(t)), r) <= 1e-5
    # FCGP, too
    W = (np.random.default_rng(3).standard_normal((alg.P, 40, 24)) / np.sqrt(40)).astype(np.float32)
    o = cp.from_dlpack(ops.fcgp_forward(x, y, cp.asarray(W), alg, precision="highest", stream=stream))
    assert rel_err(cp.asnumpy(o), ref.fcgp_np(xn, yn, W, alg)) <= 1e-5


@pytest.mark.gpu
def test_gpu_jax_dlpack_ops_without_copies():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    alg = Algebra(3)
    xn, yn, wn, gn = _np_inputs(alg, 4)
    x, y, w, g = (jax.device_put(a, gpu).block_until_ready() for a in (xn, yn, wn, gn))
    buf = ops.sgp_forward(x, y, w, alg)
    out = jnp.from_dlpack(buf)
    if hasattr(out, "unsafe_buffer_pointer"):
        assert out.unsafe_buffer_pointer() == buf.ptr  # imported, not copied
    assert rel_err(np.asarray(out), ref.sgp_np(xn, yn, wn, alg)) <= 1e-5
    want = ref.sgp_backward_np(gn, xn, yn, wn, alg)
    for got, r in zip(ops.sgp_backward(g, x, y, w, alg), want, strict=True):
        assert rel_err(np.asarray(jnp.from_dlpack(got)), r) <= 1e-5
