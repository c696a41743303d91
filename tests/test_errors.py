"""Bad input (SPEC section 5): every case raises the documented exception type with a
message that names the argument, before any kernel runs, and the next valid call works."""

import numpy as np
import pytest

import flashclifford as fc
from flashclifford import _C

rng = np.random.default_rng(7)
D, B, N, P = 8, 4, 6, 20  # Cl(3,0)


def arr(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


X, Y, W = arr(D, B, N), arr(D, B, N), arr(N, P)
WF = arr(P, N, 3)


def sgp(**kw):
    a = dict(x=X, y=Y, weight=W, algebra=3)
    a.update(kw)
    return lambda: fc.ops.sgp_forward(a.pop("x"), a.pop("y"), a.pop("weight"), a.pop("algebra"), **a)


def sgp_bwd(**kw):
    a = dict(grad_out=X, x=X, y=Y, weight=W, algebra=3)
    a.update(kw)
    return lambda: fc.ops.sgp_backward(a.pop("grad_out"), a.pop("x"), a.pop("y"), a.pop("weight"),
                                       a.pop("algebra"), **a)


def fcgp(**kw):
    a = dict(x=X, y=Y, weight=WF, algebra=3)
    a.update(kw)
    return lambda: fc.ops.fcgp_forward(a.pop("x"), a.pop("y"), a.pop("weight"), a.pop("algebra"), **a)


def fcgp_bwd(**kw):
    a = dict(grad_out=arr(D, B, 3), x=X, y=Y, weight=WF, algebra=3)
    a.update(kw)
    return lambda: fc.ops.fcgp_backward(a.pop("grad_out"), a.pop("x"), a.pop("y"), a.pop("weight"),
                                        a.pop("algebra"), **a)


CASES = [
    # (call, exception, message regex)
    (sgp(weight=arr(N, 10)), ValueError,
     r"weight: expected shape \(6, 20\) for Cl\(3,0\) SGP, got \(6, 10\)"),
    (sgp(weight=arr(N + 1, P)), ValueError, r"weight: expected shape \(6, 20\)"),
    (sgp(x=arr(4, B, N)), ValueError, r"x: expected shape \(8, \*batch, N\) for Cl\(3,0\)"),
    (sgp(x=arr(D)), ValueError, r"x: expected shape \(8, \*batch, N\)"),
    (sgp(y=arr(D, B, N + 1)), ValueError, r"y: expected shape \(8, 4, 6\)"),
    (sgp(y=arr(D, B + 1, N)), ValueError, r"y: expected shape \(8, 4, 6\)"),
    (sgp(x=X.astype(np.int32)), TypeError,
     r"x: expected dtype float32, float64, bfloat16 or float16, got int32"),
    (sgp(x=X.astype(np.complex64)), TypeError, r"x: expected dtype .* got complex64"),
    (sgp(y=Y.astype(np.float64)), TypeError, r"y: expected dtype float32 \(the dtype of x\), got float64"),
    (sgp(weight=W.astype(np.float64)), TypeError, r"weight: expected dtype float32"),
    (sgp(x=X.astype(np.float16), y=Y.astype(np.float16), weight=W.astype(np.float16)), TypeError,
     r"x: dtype float16 is not supported by the CPU backend"),
    (sgp(x=X[:, :, ::2].copy()[:, :, :3]), ValueError, r"y: expected shape \(8, 4, 3\)"),
    (sgp(x=np.asfortranarray(X)), ValueError, r"x: expected a C-contiguous array"),
    (sgp(weight=np.asfortranarray(W)), ValueError, r"weight: expected a C-contiguous array"),
    (sgp(x=[[1.0]]), TypeError, r"x: expected an array with __dlpack__"),
    (sgp(weight="w"), TypeError, r"weight: expected an array with __dlpack__"),
    (sgp(algebra=(1, 1, 1, 1, 1)), ValueError, r"algebra: Cl\(5,0\) has no kernels"),
    (sgp(algebra=(2, 1)), ValueError, r"algebra"),
    (sgp(algebra="Cl(3,0)x"), ValueError, r"algebra"),
    (sgp(algebra=2), ValueError, r"x: expected shape \(4, \*batch, N\) for Cl\(2,0\)"),
    (sgp(out=np.empty((D, B, N), np.float64)), TypeError, r"out: expected dtype float32"),
    (sgp(out=np.empty((D, B, N + 1), np.float32)), ValueError, r"out: expected shape \(8, 4, 6\)"),
    (sgp(out=X), ValueError, r"out: must not overlap x"),
    (sgp(out=Y[:, :2]), ValueError, r"out: expected shape"),
    (sgp(stream="s"), TypeError, r"stream: expected an int"),
    (sgp_bwd(grad_out=arr(D, B, N + 1)), ValueError, r"grad_out: expected shape \(8, 4, 6\)"),
    (sgp_bwd(grad_out=X.astype(np.float64)), TypeError, r"grad_out: expected dtype float32"),
    (sgp_bwd(grad_x=np.empty((D, B, N), np.float32), grad_y=None, grad_weight=np.empty((N, 19), np.float32)),
     ValueError, r"grad_weight: expected shape \(6, 20\)"),
    (fcgp(weight=arr(P, N, 3, 1)), ValueError, r"weight: expected shape \(20, 6, .*\) for Cl\(3,0\) FCGP"),
    (fcgp(weight=arr(P - 1, N, 3)), ValueError, r"weight: expected shape \(20, 6, 3\) for Cl\(3,0\) FCGP"),
    (fcgp(weight=arr(P, N + 1, 3)), ValueError, r"weight: expected shape \(20, 6, 3\)"),
    (fcgp(precision="fp8"), ValueError, r"precision: expected one of"),
    (fcgp_bwd(grad_out=arr(D, B, N)), ValueError, r"grad_out: expected shape \(8, 4, 3\)"),
]


@pytest.mark.parametrize("call, exc, match", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_bad_input_raises(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
    # the process is unharmed: a valid call right after gives the right shape
    assert fc.ops.sgp_forward(X, Y, W, 3).shape == (D, B, N)


def test_raw_binding_checks_ids_and_precision():
    with pytest.raises(ValueError, match="algebra: expected an algebra id from 0 to 4, got 9"):
        _C.sgp_forward(X, Y, W, 9, True)
    with pytest.raises(ValueError, match="precision: expected 0"):
        _C.fcgp_forward(X, Y, WF, 1, True, 7)
    with pytest.raises(TypeError):
        _C.sgp_forward(X, Y, W)  # missing arguments
    with pytest.raises(TypeError):
        _C.sgp_forward(X, Y, W, 1, True, bogus=1)
    with pytest.raises(ValueError, match="workspace: only CUDA ops take a workspace"):
        _C.sgp_forward(X, Y, W, 1, True, workspace=np.empty(16, np.uint8))


def test_norms_argument_checked():
    with pytest.raises(ValueError, match=r"norms: expected shape \(4, 4\)"):
        _C.sgp_forward(X, Y, W, 1, True, norms=np.empty((B, 3), np.float32))
    with pytest.raises(TypeError, match=r"norms: expected dtype float32 \(the compute type of x\)"):
        _C.sgp_forward(X, Y, W, 1, True, norms=np.empty((B, 4), np.float64))


def test_fcgp_backward_out_argument_checked():
    # the forward's output, an input of the FCGP backward (its norm's gradient on CUDA)
    G = arr(D, B, 3)
    args = (G, X, Y, WF, 1, True, 0)
    with pytest.raises(ValueError, match=r"out: expected shape \(8, 4, 3\)"):
        _C.fcgp_backward(*args, out=arr(D, B, N))
    with pytest.raises(TypeError, match=r"out: expected dtype float32"):
        _C.fcgp_backward(*args, out=arr(D, B, 3, dtype=np.float64))
    with pytest.raises(ValueError, match="grad_x: must not overlap out"):
        buf = arr(D, B, N)
        _C.fcgp_backward(arr(D, B, N), X, Y, arr(P, N, N), 1, True, 0, out=buf, grad_x=buf)
    # a valid out changes nothing on the CPU backend, which recomputes
    want = _C.fcgp_backward(*args)
    got = _C.fcgp_backward(*args, out=_C.fcgp_forward(X, Y, WF, 1, True, 0))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_empty_batch_and_features():
    out = fc.ops.sgp_forward(arr(D, 0, N), arr(D, 0, N), W, 3)
    assert out.shape == (D, 0, N)
    gx, gy, gw = fc.ops.sgp_backward(arr(D, 0, N), arr(D, 0, N), arr(D, 0, N), W, 3)
    assert gx.shape == (D, 0, N) and gw.shape == (N, P)
    np.testing.assert_array_equal(gw, 0)
    out = fc.ops.sgp_forward(arr(D, B, 0), arr(D, B, 0), arr(0, P), 3)
    assert out.shape == (D, B, 0)


@pytest.mark.skipif(_C.build_info()["gpu_usable"], reason="checks the no-GPU error")
def test_cuda_tensor_without_usable_gpu():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "cuda") or torch.cuda.is_available():
        pytest.skip("torch sees a GPU")
    from dlpack_forge import KDL_CUDA, Forged

    fx = Forged(X, device=(KDL_CUDA, 0), data=0x1000)
    with pytest.raises(RuntimeError, match="without CUDA|no such GPU"):
        fc.ops.sgp_forward(fx, Y, W, 3)


def test_torch_op_errors_name_the_argument():
    torch = pytest.importorskip("torch")
    x, y, w = torch.from_numpy(X), torch.from_numpy(Y), torch.from_numpy(W)
    with pytest.raises(ValueError,
                       match=r"weight: expected shape \(6, 20\) for Cl\(3,0\) SGP, got \(6, 10\)"):
        fc.gelu_sgp_norm(x, y, w[:, :10], 3)
    with pytest.raises(ValueError, match="algebra"):
        fc.gelu_sgp_norm(x, y, w, (1, 1, 1, 1, 1))
    with pytest.raises(TypeError, match="y: expected dtype float32"):
        fc.gelu_sgp_norm(x, y.double(), w, 3)


def test_tuning_entry_points_check_their_arguments():
    with pytest.raises(ValueError, match="rows >= 0"):
        _C._sgp_shape_override(-1, 0)
    _C._sgp_shape_override(0, 0)  # the default choice: a no-op
    with pytest.raises(ValueError, match="B >= 1"):
        _C._sgp_config(False, 3, "float32", 0, 16)
    if not _C.build_info()["gpu_usable"]:
        with pytest.raises(RuntimeError, match="no usable CUDA device"):
            _C._sgp_config(False, 3, "float32", 64, 16)
    else:
        with pytest.raises(TypeError, match="dtype"):
            _C._sgp_config(False, 3, "int8", 64, 16)
