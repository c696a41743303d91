"""The torch ops (flashclifford.gelu_sgp_norm / gelu_fcgp_norm) on the CPU: values and
gradients against the float64 einsum reference, gradcheck, opcheck, torch.compile
(fullgraph, forward and backward), half inputs, and the precision default; each with the
gate on and off (gate=False: the plain product)."""

import numpy as np
import pytest
from conftest import ALGEBRAS, rel_err

torch = pytest.importorskip("torch")

import flashclifford as fc  # noqa: E402
from flashclifford import reference  # noqa: E402

OPS = ["sgp", "fcgp"]
GATES = [pytest.param(True, id="gate"), pytest.param(False, id="plain")]


def make(op, alg, B=3, n_in=5, n_out=4, dtype=torch.float64, seed=0, batch=None):
    g = torch.Generator().manual_seed(seed)
    batch = batch or (B,)
    x = torch.randn(alg.D, *batch, n_in, generator=g, dtype=dtype)
    y = torch.randn(alg.D, *batch, n_in, generator=g, dtype=dtype)
    if op == "sgp":
        w = torch.randn(n_in, alg.P, generator=g, dtype=dtype)
    else:
        w = torch.randn(alg.P, n_in, n_out, generator=g, dtype=dtype) / n_in**0.5
    return x, y, w


def fused(op, x, y, w, alg, normalize, **kw):
    f = fc.gelu_sgp_norm if op == "sgp" else fc.gelu_fcgp_norm
    return f(x, y, w, alg, normalize, **kw)


def ref_np(op, x, y, w, alg, normalize, gate=True):
    f = reference.sgp_np if op == "sgp" else reference.fcgp_np
    args = [t.detach().double().numpy() for t in (x, y, w)]
    return f(*args, alg, normalize, gate=gate)


def ref_backward_np(op, g, x, y, w, alg, normalize, gate=True):
    f = reference.sgp_backward_np if op == "sgp" else reference.fcgp_backward_np
    args = [t.detach().double().numpy() for t in (g, x, y, w)]
    return f(*args, alg, normalize, gate=gate)


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("alg", ALGEBRAS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_values_and_gradients(op, alg, normalize, gate, dtype, tol):
    # separate leaves for our op; the reference works on float64 copies
    x, y, w = (t.requires_grad_()
               for t in make(op, alg, dtype=dtype, batch=(2, 3), seed=hash((op, alg.name)) % 1000))
    out = fused(op, x, y, w, alg, normalize, gate=gate)
    assert out.dtype == dtype and out.shape == (alg.D, 2, 3, x.shape[-1] if op == "sgp" else 4)
    assert rel_err(out.detach().numpy(), ref_np(op, x, y, w, alg, normalize, gate)) <= tol
    g = torch.randn_like(out)
    out.backward(g)
    refs = ref_backward_np(op, g, x, y, w, alg, normalize, gate)
    for name, t, r in zip("xyw", (x, y, w), refs, strict=True):
        assert rel_err(t.grad.numpy(), r) <= tol, name


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("alg", [ALGEBRAS[1], ALGEBRAS[3]])
def test_gradcheck(op, alg, normalize, gate):
    x, y, w = (t.requires_grad_() for t in make(op, alg, B=2, n_in=3, n_out=2))
    assert torch.autograd.gradcheck(lambda a, b, c: fused(op, a, b, c, alg, normalize, gate=gate), (x, y, w),
                                    fast_mode=False)


@pytest.mark.parametrize("gate", [True, False, None], ids=["gate", "plain", "default"])
@pytest.mark.parametrize("normalize", [True, False])
def test_opcheck(normalize, gate):
    # None: the schema's default for gate (True), the argument left out
    alg = fc.Algebra(3)
    for op, name in (("sgp", "gelu_sgp_norm"), ("fcgp", "gelu_fcgp_norm")):
        x, y, w = (t.requires_grad_() for t in make(op, alg, dtype=torch.float32))
        extra = (() if op == "sgp" else (0,)) + (() if gate is None else (gate,))
        torch.library.opcheck(getattr(torch.ops.flashclifford, name).default,
                              (x, y, w, alg.id, normalize, *extra))
        out, norms = getattr(torch.ops.flashclifford, name)(x, y, w, alg.id, normalize, *extra)
        g = torch.randn_like(out)
        torch.library.opcheck(getattr(torch.ops.flashclifford, name + "_backward").default,
                              (g, x.detach(), y.detach(), w.detach(), norms.detach(), alg.id, normalize,
                               *extra))


@pytest.mark.parametrize("op", OPS)
def test_registered_op_and_eager_path_agree_without_gate(op):
    # the registered op (torch.compile's path) against the eager autograd.Function, gate off
    alg = fc.Algebra((1, -1, -1, -1))
    x, y, w = make(op, alg, B=4, n_in=5, n_out=3)
    g = torch.randn(alg.D, 4, 5 if op == "sgp" else 3, dtype=torch.float64)
    name = "gelu_sgp_norm" if op == "sgp" else "gelu_fcgp_norm"
    extra = () if op == "sgp" else (0,)
    leaves_e = [t.clone().requires_grad_() for t in (x, y, w)]
    leaves_r = [t.clone().requires_grad_() for t in (x, y, w)]
    fused(op, *leaves_e, alg, True, gate=False).backward(g)
    getattr(torch.ops.flashclifford, name)(*leaves_r, alg.id, True, *extra, False)[0].backward(g)
    for a, b in zip(leaves_e, leaves_r, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    with pytest.raises(TypeError):
        fused(op, x, y, w, alg, True, "highest", False)  # gate is keyword-only


@pytest.mark.parametrize("op", OPS)
def test_forward_without_grad_skips_autograd_and_matches(op):
    # no input needs a gradient (or grad mode is off): the eager path calls the impl directly;
    # the output equals the autograd path's bitwise and carries no graph
    alg = fc.Algebra(3)
    x, y, w = make(op, alg, B=4, n_in=6, n_out=5, dtype=torch.float32, seed=3)
    with_graph = fused(op, *(t.clone().requires_grad_() for t in (x, y, w)), alg, True)
    plain = fused(op, x, y, w, alg, True)
    with torch.no_grad():
        no_grad = fused(op, *(t.clone().requires_grad_() for t in (x, y, w)), alg, True)
    assert with_graph.grad_fn is not None and plain.grad_fn is None and no_grad.grad_fn is None
    assert not plain.requires_grad and not no_grad.requires_grad
    for out in (plain, no_grad):
        torch.testing.assert_close(out, with_graph.detach(), rtol=0, atol=0)
    assert rel_err(plain.numpy(), ref_np(op, x, y, w, alg, True)) <= 1e-5
    # a forward-mode tangent needs no requires_grad: it must be refused, not dropped
    import torch.autograd.forward_ad as fw_ad
    with fw_ad.dual_level(), pytest.raises(NotImplementedError, match="jvp"):
        fused(op, fw_ad.make_dual(x, torch.ones_like(x)), y, w, alg, True)


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("op", OPS)
def test_compile_fullgraph_forward_backward(op, gate):
    alg = fc.Algebra(3)
    x, y, w = make(op, alg, dtype=torch.float32, B=6, n_in=8, n_out=8)

    def step(a, b, c):
        return (fused(op, a, b, c, alg, True, gate=gate) ** 2).sum()

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    leaves_e = [t.clone().requires_grad_() for t in (x, y, w)]
    leaves_c = [t.clone().requires_grad_() for t in (x, y, w)]
    le, lc = step(*leaves_e), compiled(*leaves_c)
    le.backward()
    lc.backward()
    torch.testing.assert_close(lc, le)
    for a, b in zip(leaves_c, leaves_e, strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_compile_inductor_fullgraph():
    alg = fc.Algebra(2)
    x, y, w = make("sgp", alg, dtype=torch.float32, B=4, n_in=6)
    f = torch.compile(lambda a, b, c: fc.gelu_sgp_norm(a, b, c, alg) * 2 + 1, fullgraph=True)
    torch.testing.assert_close(f(x, y, w), fc.gelu_sgp_norm(x, y, w, alg) * 2 + 1)


@pytest.mark.parametrize("gate", GATES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", OPS)
def test_half_inputs_on_cpu_computed_in_float32(op, dtype, gate):
    alg = fc.Algebra(3)
    x, y, w = make(op, alg, dtype=dtype, B=4, n_in=8, n_out=8)
    out = fused(op, x, y, w, alg, True, gate=gate)
    assert out.dtype == dtype
    ref = ref_np(op, x, y, w, alg, True, gate)  # the reference of the rounded inputs
    assert rel_err(out.float().numpy(), ref) <= (2e-2 if dtype == torch.bfloat16 else 5e-3)


def test_mixed_dtypes_rejected():
    alg = fc.Algebra(3)
    x, y, w = make("sgp", alg, dtype=torch.float32)
    with pytest.raises(TypeError, match="weight: expected dtype float32"):
        fc.gelu_sgp_norm(x, y, w.double(), alg)


def test_noncontiguous_inputs_are_made_contiguous():
    alg = fc.Algebra(3)
    x, y, w = make("sgp", alg, dtype=torch.float64, B=4, n_in=6)
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)  # same values, other strides
    assert not xt.is_contiguous()
    torch.testing.assert_close(fc.gelu_sgp_norm(xt, y, w, alg), fc.gelu_sgp_norm(x, y, w, alg),
                               rtol=0, atol=0)


def test_precision_default_follows_torch():
    alg = fc.Algebra(3)
    x, y, w = make("fcgp", alg, dtype=torch.float32, B=4, n_in=8, n_out=8)
    old = torch.get_float32_matmul_precision()
    try:
        for setting, name in (("highest", "highest"), ("high", "tf32"), ("medium", "bf16")):
            torch.set_float32_matmul_precision(setting)
            torch.testing.assert_close(fc.gelu_fcgp_norm(x, y, w, alg),
                                       fc.gelu_fcgp_norm(x, y, w, alg, precision=name), rtol=0, atol=0)
    finally:
        torch.set_float32_matmul_precision(old)


def test_numpy_and_torch_give_identical_results():
    alg = fc.Algebra(3)
    x, y, w = make("sgp", alg, dtype=torch.float32, B=5, n_in=7)
    a = fc.gelu_sgp_norm(x, y, w, alg).numpy()
    b = fc.ops.sgp_forward(x.numpy(), y.numpy(), w.numpy(), alg)
    np.testing.assert_array_equal(a, b)
