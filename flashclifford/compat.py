"""flash-clifford's function names and signatures, on flashclifford's kernels.

Code written for flash-clifford's ``ops`` (``from ops import fused_gelu_sgp_norm_3d``) runs
unchanged with ``from flashclifford.compat import fused_gelu_sgp_norm_3d``: same arguments,
same layout and the same weight shapes and order.

  fused_gelu_sgp_norm_2d(x, y, weight, normalize=True)    Cl(2,0): x, y (4, B, N), weight (N, 10)
  fused_gelu_sgp_norm_3d(x, y, weight, normalize=True)    Cl(3,0): x, y (8, B, N), weight (N, 20)
  fused_gelu_fcgp_norm_2d(x, y, weight, normalize=True)   Cl(2,0): weight (10, N, N)
  fused_gelu_fcgp_norm_3d(x, y, weight, normalize=True)   Cl(3,0): weight (20, N, N)

The weight index is the product path (left grade, output grade, right grade) in
lexicographic order -- flash-clifford's order, so its trained weights carry over. Beyond
flash-clifford these accept several batch dims, non-contiguous inputs, fp64, CPU tensors,
and FCGP weights (P, N_in, N_out) with N_in != N_out. The FCGP matrix products follow
``torch.get_float32_matmul_precision()`` as flash-clifford's ``torch.bmm`` does.

``Layer(n_features, dims, normalize=True, use_fc=False)`` is flash-clifford's layer
signature for :class:`flashclifford.nn.Layer`. One deliberate difference: the bias is
added to the scalar component only (flash-clifford adds it to every component, which
breaks equivariance), so its ``linear_bias`` is (N,) where flash-clifford's is (1, 1, N).
"""

from __future__ import annotations

from . import nn as _nn
from ._torch_ops import gelu_fcgp_norm, gelu_sgp_norm
from .algebra import Algebra

__all__ = [
    "fused_gelu_sgp_norm_2d",
    "fused_gelu_sgp_norm_3d",
    "fused_gelu_fcgp_norm_2d",
    "fused_gelu_fcgp_norm_3d",
    "Layer",
    "P2M0_NUM_PRODUCT_WEIGHTS",
    "P3M0_NUM_PRODUCT_WEIGHTS",
    "P2M0_NUM_GRADES",
    "P3M0_NUM_GRADES",
]

_CL2 = Algebra((1, 1))
_CL3 = Algebra((1, 1, 1))

# flash-clifford's exported constants (p2m0 = Cl(2,0), p3m0 = Cl(3,0))
P2M0_NUM_PRODUCT_WEIGHTS = _CL2.P  # 10
P3M0_NUM_PRODUCT_WEIGHTS = _CL3.P  # 20
P2M0_NUM_GRADES = _CL2.G  # 3
P3M0_NUM_GRADES = _CL3.G  # 4


def fused_gelu_sgp_norm_2d(x, y, weight, normalize=True):
    """MVGELU -> weighted geometric product -> grade RMSNorm in Cl(2,0).

    x, y: (4, B, N); weight: (N, 10); returns (4, B, N). With autograd.
    """
    return gelu_sgp_norm(x, y, weight, _CL2, normalize)


def fused_gelu_sgp_norm_3d(x, y, weight, normalize=True):
    """MVGELU -> weighted geometric product -> grade RMSNorm in Cl(3,0).

    x, y: (8, B, N); weight: (N, 20); returns (8, B, N). With autograd.
    """
    return gelu_sgp_norm(x, y, weight, _CL3, normalize)


def fused_gelu_fcgp_norm_2d(x, y, weight, normalize=True):
    """MVGELU -> fully connected geometric product -> grade RMSNorm in Cl(2,0).

    x, y: (4, B, N); weight: (10, N, N); returns (4, B, N). With autograd.
    """
    return gelu_fcgp_norm(x, y, weight, _CL2, normalize)


def fused_gelu_fcgp_norm_3d(x, y, weight, normalize=True):
    """MVGELU -> fully connected geometric product -> grade RMSNorm in Cl(3,0).

    x, y: (8, B, N); weight: (20, N, N); returns (8, B, N). With autograd.
    """
    return gelu_fcgp_norm(x, y, weight, _CL3, normalize)


class Layer(_nn.Layer):
    """flash-clifford's ``Layer(n_features, dims, normalize=True, use_fc=False)``.

    ``dims``: 2 for Cl(2,0) or 3 for Cl(3,0). Parameters ``gp_weight``, ``linear_weight``
    (dims + 1, N, N) and ``linear_bias`` (N,), initialised as flash-clifford; the bias goes
    to the scalar component only (see the module docstring).
    Shapes: (2^dims, B, N) -> (2^dims, B, N).
    """

    def __init__(self, n_features, dims, normalize=True, use_fc=False):
        if dims not in (2, 3):
            raise ValueError(f"dims: expected 2 or 3, got {dims!r}")
        super().__init__(n_features, _CL2 if dims == 2 else _CL3, normalize=normalize, use_fc=use_fc)
