"""flashclifford.compat: flash-clifford's signatures on flashclifford's kernels.

The same weights through compat and through the main API give identical results (forward
and gradients); the weight index follows flash-clifford's path order, checked with one-hot
weights through the kernels and with a Cl(2,0) product typed out from the blade rules.
Shapes: x, y (2^dims, B, N); SGP weight (N, P); FCGP weight (P, N, N); P = 10 (2D), 20 (3D).
"""

import math

import pytest
from conftest import rel_err, seed_for

torch = pytest.importorskip("torch")

import flashclifford as fc  # noqa: E402
from flashclifford import compat  # noqa: E402
from flashclifford import nn as fnn  # noqa: E402
from flashclifford.algebra import Algebra  # noqa: E402

FUNCS = {
    ("sgp", 2): compat.fused_gelu_sgp_norm_2d,
    ("sgp", 3): compat.fused_gelu_sgp_norm_3d,
    ("fcgp", 2): compat.fused_gelu_fcgp_norm_2d,
    ("fcgp", 3): compat.fused_gelu_fcgp_norm_3d,
}

# flash-clifford's weight order: (left grade, output grade, right grade) per weight index.
FLASH_PATHS = {
    2: [
        (0, 0, 0),
        (0, 1, 1),
        (0, 2, 2),
        (1, 0, 1),
        (1, 1, 0),
        (1, 1, 2),
        (1, 2, 1),
        (2, 0, 2),
        (2, 1, 1),
        (2, 2, 0),
    ],
    3: [
        (0, 0, 0),
        (0, 1, 1),
        (0, 2, 2),
        (0, 3, 3),
        (1, 0, 1),
        (1, 1, 0),
        (1, 1, 2),
        (1, 2, 1),
        (1, 2, 3),
        (1, 3, 2),
        (2, 0, 2),
        (2, 1, 1),
        (2, 1, 3),
        (2, 2, 0),
        (2, 2, 2),
        (2, 3, 1),
        (3, 0, 3),
        (3, 1, 2),
        (3, 2, 1),
        (3, 3, 0),
    ],
}


@pytest.fixture
def gen(request):
    return torch.Generator().manual_seed(seed_for(request.node.nodeid))


def make(op, dims, gen, B=6, N=10, dtype=torch.float32):
    alg = Algebra(dims)
    x = torch.randn(alg.D, B, N, generator=gen, dtype=dtype)
    y = torch.randn(alg.D, B, N, generator=gen, dtype=dtype)
    shape = (N, alg.P) if op == "sgp" else (alg.P, N, N)
    w = torch.randn(shape, generator=gen, dtype=dtype) / (1 if op == "sgp" else math.sqrt(N))
    return alg, x, y, w


def test_constants_and_weight_order():
    assert (compat.P2M0_NUM_PRODUCT_WEIGHTS, compat.P3M0_NUM_PRODUCT_WEIGHTS) == (10, 20)
    assert (compat.P2M0_NUM_GRADES, compat.P3M0_NUM_GRADES) == (3, 4)
    for dims, paths in FLASH_PATHS.items():
        assert Algebra(dims).paths == paths


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("op", ["sgp", "fcgp"])
def test_compat_equals_main_api_with_the_same_weights(op, dims, normalize, gen):
    alg, x, y, w = make(op, dims, gen)
    leaves_a = [t.clone().requires_grad_() for t in (x, y, w)]
    leaves_b = [t.clone().requires_grad_() for t in (x, y, w)]
    out_a = FUNCS[op, dims](*leaves_a, normalize=normalize)
    main = fc.gelu_sgp_norm if op == "sgp" else fc.gelu_fcgp_norm
    out_b = main(*leaves_b, alg, normalize)
    assert torch.equal(out_a, out_b)
    g = torch.randn(out_a.shape, generator=gen)
    out_a.backward(g)
    out_b.backward(g)
    for a, b in zip(leaves_a, leaves_b, strict=True):
        assert torch.equal(a.grad, b.grad)
    # positional normalize, as flash-clifford's callers pass it
    assert torch.equal(FUNCS[op, dims](x, y, w, normalize), out_b.detach())


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("op", ["sgp", "fcgp"])
def test_each_weight_index_drives_flash_cliffords_grade_triple(op, dims, gen):
    alg = Algebra(dims)
    grades = torch.tensor(alg.grades.tolist())
    N = 3
    for p, (gl, go, gr) in enumerate(FLASH_PATHS[dims]):
        # x only in grade gl and y only in grade gr: path p must write grade go and nothing else
        x = torch.randn(alg.D, 4, N, generator=gen, dtype=torch.float64) * (grades == gl)[:, None, None]
        y = torch.randn(alg.D, 4, N, generator=gen, dtype=torch.float64) * (grades == gr)[:, None, None]
        if op == "sgp":
            w = torch.zeros(N, alg.P, dtype=torch.float64)
            w[:, p] = 1.0
        else:
            w = torch.zeros(alg.P, N, N, dtype=torch.float64)
            w[p] = torch.eye(N, dtype=torch.float64)
        out = FUNCS[op, dims](x, y, w, normalize=False)
        energy = [out[grades == g].square().sum().item() for g in range(alg.G)]
        assert energy[go] > 1e-6, (p, energy)
        assert sum(e for g, e in enumerate(energy) if g != go) == 0.0, (p, energy)


def cl2_sgp_by_hand(x, y, w, normalize):
    """Cl(2,0) weighted product typed out from e1e1 = e2e2 = 1, e1e2 = -e2e1 = e12 (float64).

    x, y: (4, B, N) raw inputs (gated here); w: (N, 10) in flash-clifford's order.
    """
    gx = x * 0.5 * (1 + torch.erf(x[0] / math.sqrt(2)))
    gy = y * 0.5 * (1 + torch.erf(y[0] / math.sqrt(2)))
    x0, x1, x2, x3 = gx
    y0, y1, y2, y3 = gy
    w = w.T  # (10, N): w[p] broadcasts over the batch
    o0 = w[0] * x0 * y0 + w[3] * (x1 * y1 + x2 * y2) - w[7] * x3 * y3
    o1 = w[1] * x0 * y1 + w[4] * x1 * y0 - w[5] * x2 * y3 + w[8] * x3 * y2
    o2 = w[1] * x0 * y2 + w[4] * x2 * y0 + w[5] * x1 * y3 - w[8] * x3 * y1
    o3 = w[2] * x0 * y3 + w[6] * (x1 * y2 - x2 * y1) + w[9] * x3 * y0
    if normalize:
        r0 = torch.sqrt(o0.square().mean(-1, keepdim=True) + 1e-6)
        r1 = torch.sqrt((o1.square() + o2.square()).mean(-1, keepdim=True) + 1e-6)
        r2 = torch.sqrt(o3.square().mean(-1, keepdim=True) + 1e-6)
        o0, o1, o2, o3 = o0 / r0, o1 / r1, o2 / r1, o3 / r2
    return torch.stack([o0, o1, o2, o3])


@pytest.mark.parametrize("normalize", [True, False])
def test_2d_sgp_matches_product_typed_out_by_hand(normalize, gen):
    alg, x, y, w = make("sgp", 2, gen, dtype=torch.float64)
    want = cl2_sgp_by_hand(x, y, w, normalize)
    assert rel_err(compat.fused_gelu_sgp_norm_2d(x, y, w, normalize).numpy(), want.numpy()) <= 1e-12


def test_layer_with_flash_clifford_signature(gen):
    for dims in (2, 3):
        for use_fc in (False, True):
            layer = compat.Layer(12, dims, normalize=True, use_fc=use_fc)
            assert isinstance(layer, fnn.Layer) and layer.algebra == Algebra(dims)
            assert layer.linear_weight.shape == (dims + 1, 12, 12)
            main = fnn.Layer(12, dims, use_fc=use_fc)
            main.load_state_dict(layer.state_dict())
            x = torch.randn(2**dims, 5, 12, generator=gen)
            assert torch.equal(layer(x), main(x))
    with pytest.raises(ValueError, match="dims"):
        compat.Layer(4, 4)


def test_compat_under_torch_compile(gen):
    alg, x, y, w = make("sgp", 3, gen)
    torch._dynamo.reset()
    f = torch.compile(compat.fused_gelu_sgp_norm_3d, fullgraph=True)
    assert torch.equal(f(x, y, w), compat.fused_gelu_sgp_norm_3d(x, y, w))
