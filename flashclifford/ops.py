"""The framework-free level: the fused ops on any DLPack producer (SPEC section 4).

Arrays are NumPy, PyTorch, CuPy or JAX arrays (anything with ``__dlpack__``), in the
layout ``(D, *batch, N)``. NumPy in gives NumPy out; CUDA in gives a
``flashclifford._C.DeviceBuffer`` out, which ``torch.from_dlpack`` / ``cupy.from_dlpack``
take without a copy. Every check happens in C before any kernel runs.

``gate=False`` skips the MVGELU of x and y: the plain geometric product (optionally
normalised) on the same fused kernels, for models that apply it between their own maps.

``stream`` is a ``cudaStream_t`` handle as an int (``torch.cuda.current_stream().cuda_stream``,
``cupy.cuda.get_current_stream().ptr``); ``None`` is the legacy default stream.
"""

from __future__ import annotations

from . import _C
from .algebra import Algebra

__all__ = ["sgp_forward", "sgp_backward", "fcgp_forward", "fcgp_backward", "PRECISIONS", "kernel_id"]

#: FCGP float32 matrix-product precisions, in the order of the C enum fc_precision.
PRECISIONS = ("highest", "tf32", "bf16")

_ids: dict = {}


def kernel_id(algebra) -> int:
    """The kernel id of an algebra given as an ``Algebra``, 2, 3 or a metric tuple."""
    if type(algebra) is Algebra:  # the common case first: a small eager call is host-bound
        i = algebra.id
        if i is not None:
            return i
    key = algebra if isinstance(algebra, (int, tuple)) else None
    if key is not None and key in _ids:
        return _ids[key]
    alg = Algebra.resolve(algebra)
    if alg.id is None:
        raise ValueError(
            f"algebra: {alg.name} has no kernels; supported: Cl(2,0), Cl(3,0), Cl(1,3), Cl(3,0,1), Cl(4,0)"
        )
    if key is not None:
        _ids[key] = alg.id
    return alg.id


def precision_code(precision) -> int:
    """0, 1 or 2 for None/"highest", "tf32", "bf16"."""
    if precision is None:
        return 0
    try:
        return PRECISIONS.index(precision)
    except ValueError:
        raise ValueError(f"precision: expected one of {PRECISIONS} or None, got {precision!r}") from None


def sgp_forward(x, y, weight, algebra, normalize=True, *, gate=True, out=None, stream=None):
    """MVGELU (if ``gate``) -> weighted geometric product -> grade RMSNorm (if ``normalize``).

    x, y: (D, *batch, N); weight: (N, P); returns (D, *batch, N) in the dtype of x.
    """
    return _C.sgp_forward(x, y, weight, kernel_id(algebra), bool(normalize), out=out, stream=stream,
                          gate=bool(gate))


def sgp_backward(grad_out, x, y, weight, algebra, normalize=True, *, gate=True, grad_x=None, grad_y=None,
                 grad_weight=None, stream=None):
    """Gradients of :func:`sgp_forward`: returns ``(grad_x, grad_y, grad_weight)``."""
    return _C.sgp_backward(grad_out, x, y, weight, kernel_id(algebra), bool(normalize), grad_x=grad_x,
                           grad_y=grad_y, grad_weight=grad_weight, stream=stream, gate=bool(gate))


def fcgp_forward(x, y, weight, algebra, normalize=True, precision=None, *, gate=True, out=None, stream=None):
    """MVGELU (if ``gate``) -> fully connected geometric product -> grade RMSNorm (if ``normalize``).

    x, y: (D, *batch, N_in); weight: (P, N_in, N_out); returns (D, *batch, N_out).
    precision (float32 inputs): None or "highest" (fp32 FMA), "tf32", "bf16".
    """
    return _C.fcgp_forward(x, y, weight, kernel_id(algebra), bool(normalize), precision_code(precision),
                           out=out, stream=stream, gate=bool(gate))


def fcgp_backward(grad_out, x, y, weight, algebra, normalize=True, precision=None, *, gate=True,
                  grad_x=None, grad_y=None, grad_weight=None, stream=None):
    """Gradients of :func:`fcgp_forward`: returns ``(grad_x, grad_y, grad_weight)``."""
    return _C.fcgp_backward(grad_out, x, y, weight, kernel_id(algebra), bool(normalize),
                            precision_code(precision), grad_x=grad_x, grad_y=grad_y,
                            grad_weight=grad_weight, stream=stream, gate=bool(gate))
