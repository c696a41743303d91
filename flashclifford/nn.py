"""PyTorch modules: the fused ``Layer``, its unfused building blocks, and ``CliffordMLP``.

Shapes (SPEC sections 2 and 3): multivectors are (D, *batch, N) -- component, batch,
feature -- with D = 2^n components, G = n + 1 grades, P product paths.

  GradeLinear                     (D, *batch, N_in) -> (D, *batch, N_out); weight (G, N_in, N_out)
  MVGELU, GradeRMSNorm            (D, *batch, N) -> (D, *batch, N); no parameters
  WeightedGeometricProduct        x, y (D, *batch, N) -> (D, *batch, N); weight (N, P)
  FullyConnectedGeometricProduct  x, y (D, *batch, N_in) -> (D, *batch, N_out); weight (P, N_in, N_out)
  Layer, BaselineLayer            (D, *batch, N) -> (D, *batch, N)
  CliffordMLP                     (D, *batch, N_in) -> (D, *batch, N_out)

The grade-wise linear map is one batched matmul over the component axis: the (G, N, N)
weight is gathered per component by grade into (D, N, N), which is what the (D, B, N)
layout was chosen for. ``BaselineLayer`` holds exactly the parameters of ``Layer`` (same
names, shapes, initialisation) but computes the product with the unfused torch ops of
``flashclifford.reference``, so ``load_state_dict`` moves weights between the two.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import reference
from ._torch_ops import gelu_fcgp_norm, gelu_sgp_norm
from .algebra import Algebra
from .ops import PRECISIONS, kernel_id

__all__ = [
    "grade_linear",
    "GradeLinear",
    "MVGELU",
    "GradeRMSNorm",
    "WeightedGeometricProduct",
    "FullyConnectedGeometricProduct",
    "Layer",
    "BaselineLayer",
    "CliffordMLP",
]


# ---------------------------------------------------------------------------------------
# helpers


def _resolve(algebra, need_kernels: bool) -> Algebra:
    alg = Algebra.resolve(algebra)
    if need_kernels:
        kernel_id(alg)  # raises ValueError naming the supported algebras
    # Derive the tables now: their first derivation takes a lock, which torch.compile cannot trace.
    alg.P  # noqa: B018
    return alg


def _warm_reference_tables(alg: Algebra, dtype, device) -> None:
    """Build reference.py's cached torch tables outside any torch.compile region."""
    if dtype.is_floating_point:
        reference._tables_torch(alg, dtype, torch.device(device))


def _grades_buffer(alg: Algebra, device) -> torch.Tensor:
    return torch.tensor(alg.grades.tolist(), dtype=torch.long, device=device)


def _check_precision(precision):
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS} or None, got {precision!r}")
    return precision


def _check_input(x, alg: Algebra, n_features: int, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 3 or x.shape[0] != alg.D or x.shape[-1] != n_features:
        raise ValueError(
            f"{name}: expected shape ({alg.D}, *batch, {n_features}) for {alg.name}, got {tuple(x.shape)}"
        )


def grade_linear(x: torch.Tensor, weight: torch.Tensor, bias, grades: torch.Tensor) -> torch.Tensor:
    """Grade-wise linear map y_A = x_A @ weight[grade(A)], bias added to the scalar component.

    x: (D, *batch, N_in); weight: (G, N_in, N_out); bias: (N_out,) or None;
    grades: (D,) int64, the grade of each component (``Algebra.grades``).
    Returns (D, *batch, N_out). One batched matmul over the D components.
    """
    D = x.shape[0]
    x3 = x.flatten(1, -2)  # (D, B, N_in); also for B = 0, where reshape(D, -1, N) is ambiguous
    w = weight.index_select(0, grades)  # (D, N_in, N_out)
    if bias is None:
        y = torch.bmm(x3, w)
    else:
        # (D, 1, N_out), zero except the scalar row: the bias rides in the matmul's beta term
        b = F.pad(bias.view(1, 1, -1), (0, 0, 0, 0, 0, D - 1))
        y = torch.baddbmm(b, x3, w)
    return y.reshape(*x.shape[:-1], weight.shape[-1])


# ---------------------------------------------------------------------------------------
# building blocks


class GradeLinear(nn.Module):
    """Grade-wise linear map: one (N_in, N_out) matrix per grade, shared by its components.

    ``y_A = x_A @ weight[grade(A)]``, plus ``bias`` on the scalar component only (adding it to
    other components would break equivariance).

    Args:
        in_features, out_features: N_in and N_out (may differ).
        algebra: an :class:`~flashclifford.Algebra`, 2, 3 or a metric tuple (any metric).
        bias: learn a (N_out,) bias on the scalar component.

    Parameters: ``weight`` (G, N_in, N_out), normal with std 1/sqrt(N_in); ``bias`` (N_out,), zero.
    Shapes: input (D, *batch, N_in), output (D, *batch, N_out).
    """

    def __init__(
        self, in_features: int, out_features: int, algebra, bias: bool = True, *, device=None, dtype=None
    ):
        super().__init__()
        self.algebra = _resolve(algebra, need_kernels=False)
        self.in_features, self.out_features = int(in_features), int(out_features)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(
            torch.empty(self.algebra.G, self.in_features, self.out_features, **factory)
        )
        self.bias = nn.Parameter(torch.empty(self.out_features, **factory)) if bias else None
        self.register_buffer("grades", _grades_buffer(self.algebra, device), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(self.in_features))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (D, *batch, N_in) -> (D, *batch, N_out)."""
        _check_input(x, self.algebra, self.in_features)
        return grade_linear(x, self.weight, self.bias, self.grades)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"algebra={self.algebra.name}, bias={self.bias is not None}"
        )


class MVGELU(nn.Module):
    """Multivector GELU: every component times Phi(x_0), the normal CDF of the scalar part.

    Shapes: (D, ...) -> (D, ...). No parameters. Unfused (torch elementwise ops); the fused
    ops apply it to both inputs of the product themselves.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (D, ...) -> (D, ...)."""
        return reference.mvgelu_torch(x)


class GradeRMSNorm(nn.Module):
    """Grade-wise RMSNorm (SPEC section 2): each grade of each batch row divided by its RMS
    over the features, r_g = sqrt(mean_n |sum_{A in g} s_A o_A^2| + 1e-6).

    Args:
        algebra: an :class:`~flashclifford.Algebra`, 2, 3 or a metric tuple.

    Shapes: (D, *batch, N) -> (D, *batch, N). No parameters. Unfused (torch ops).
    """

    def __init__(self, algebra):
        super().__init__()
        self.algebra = _resolve(algebra, need_kernels=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (D, *batch, N) -> (D, *batch, N)."""
        if not torch.compiler.is_compiling():
            _warm_reference_tables(self.algebra, x.dtype, x.device)
        return reference.grade_rmsnorm_torch(x, self.algebra)

    def extra_repr(self) -> str:
        return f"algebra={self.algebra.name}"


class WeightedGeometricProduct(nn.Module):
    """Weighted geometric product (SGP), one weight per feature and product path:
    ``o_j[b, n] = sum_{i,k} C[i,j,k] w[n, path(i,j,k)] xg_i[b, n] yg_k[b, n]``.

    Args:
        n_features: N.
        algebra: one of the kernel algebras (Cl(2,0), Cl(3,0), Cl(1,3), Cl(3,0,1), Cl(4,0)).
        gate: apply MVGELU to x and y first (xg = MVGELU(x)); else xg = x.
        normalize: apply grade-wise RMSNorm to the product.

    Every combination of ``gate`` and ``normalize`` runs on the fused kernel (``gelu_sgp_norm``);
    ``gate=False, normalize=False`` is the plain weighted geometric product.

    Parameters: ``weight`` (N, P), normal with std 1/sqrt(n + 1).
    Shapes: forward(x, y) with x, y (D, *batch, N) -> (D, *batch, N).
    """

    def __init__(
        self, n_features: int, algebra, gate: bool = True, normalize: bool = True, *, device=None, dtype=None
    ):
        super().__init__()
        self.algebra = _resolve(algebra, need_kernels=True)
        self.n_features, self.gate, self.normalize = int(n_features), bool(gate), bool(normalize)
        self.weight = nn.Parameter(torch.empty(self.n_features, self.algebra.P, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(self.algebra.n + 1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x, y: (D, *batch, N) -> (D, *batch, N)."""
        return gelu_sgp_norm(x, y, self.weight, self.algebra, self.normalize, gate=self.gate)

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, algebra={self.algebra.name}, gate={self.gate}, "
            f"normalize={self.normalize}"
        )


class FullyConnectedGeometricProduct(nn.Module):
    """Fully connected geometric product (FCGP), features mixed per path:
    ``o_j[b, m] = sum_{i,k} C[i,j,k] sum_n xg_i[b, n] yg_k[b, n] W[path(i,j,k), n, m]``.

    Args:
        in_features, out_features: N_in and N_out (may differ).
        algebra: one of the kernel algebras.
        gate: apply MVGELU to x and y first; normalize: grade-wise RMSNorm on the output.
        precision: float32 matrix-product precision, "highest", "tf32", "bf16", or None to
            follow ``torch.get_float32_matmul_precision()``.

    Every combination of ``gate`` and ``normalize`` runs on the fused kernel (``gelu_fcgp_norm``).

    Parameters: ``weight`` (P, N_in, N_out), normal with std 1/sqrt(n + 1) (flash-clifford's choice).
    Shapes: forward(x, y) with x, y (D, *batch, N_in) -> (D, *batch, N_out).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        algebra,
        gate: bool = True,
        normalize: bool = True,
        precision=None,
        *,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.algebra = _resolve(algebra, need_kernels=True)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.gate, self.normalize, self.precision = bool(gate), bool(normalize), _check_precision(precision)
        self.weight = nn.Parameter(
            torch.empty(self.algebra.P, self.in_features, self.out_features, device=device, dtype=dtype)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(self.algebra.n + 1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x, y: (D, *batch, N_in) -> (D, *batch, N_out)."""
        return gelu_fcgp_norm(x, y, self.weight, self.algebra, self.normalize, self.precision, gate=self.gate)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, algebra={self.algebra.name}, "
            f"gate={self.gate}, normalize={self.normalize}, precision={self.precision}"
        )


# ---------------------------------------------------------------------------------------
# the layer


class Layer(nn.Module):
    """flash-clifford's layer, corrected (SPEC section 3), on the fused kernels.

    ``y_A = x_A @ linear_weight[grade(A)]``; ``y_0 += linear_bias``;
    ``out = gelu_sgp_norm(x, y, gp_weight)`` (or ``gelu_fcgp_norm`` with ``use_fc``).

    Args:
        n_features: N.
        algebra: one of the kernel algebras, as an Algebra, 2, 3 or a metric tuple.
        normalize: grade-wise RMSNorm on the product.
        use_fc: fully connected product (gp_weight (P, N, N)) instead of the weighted one (N, P).
        precision: FCGP float32 matmul precision ("highest", "tf32", "bf16" or None to follow
            ``torch.get_float32_matmul_precision()``); ignored for SGP.

    Parameters (initialisation as flash-clifford):
        ``linear_weight`` (G, N, N): normal, std 1/sqrt(N (n+1)) for SGP, 1/sqrt(N) for FCGP.
        ``linear_bias`` (N,): zero; added to the scalar component only.
        ``gp_weight`` (N, P) for SGP or (P, N, N) for FCGP: normal, std 1/sqrt(n+1).

    Shapes: (D, *batch, N) -> (D, *batch, N).
    """

    _needs_kernels = True

    def __init__(
        self,
        n_features: int,
        algebra,
        normalize: bool = True,
        use_fc: bool = False,
        precision=None,
        *,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.algebra = _resolve(algebra, need_kernels=self._needs_kernels)
        self.n_features, self.normalize, self.use_fc = int(n_features), bool(normalize), bool(use_fc)
        self.precision = _check_precision(precision)
        alg, N = self.algebra, self.n_features
        factory = {"device": device, "dtype": dtype}
        gp_shape = (alg.P, N, N) if self.use_fc else (N, alg.P)
        self.gp_weight = nn.Parameter(torch.empty(gp_shape, **factory))
        self.linear_weight = nn.Parameter(torch.empty(alg.G, N, N, **factory))
        self.linear_bias = nn.Parameter(torch.empty(N, **factory))
        self.register_buffer("grades", _grades_buffer(alg, device), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        n, N = self.algebra.n, self.n_features
        nn.init.normal_(self.gp_weight, std=1.0 / math.sqrt(n + 1))
        linear_std = 1.0 / math.sqrt(N) if self.use_fc else 1.0 / math.sqrt(N * (n + 1))
        nn.init.normal_(self.linear_weight, std=linear_std)
        nn.init.zeros_(self.linear_bias)

    def _product(self, x, y):
        if self.use_fc:
            return gelu_fcgp_norm(x, y, self.gp_weight, self.algebra, self.normalize, self.precision)
        return gelu_sgp_norm(x, y, self.gp_weight, self.algebra, self.normalize)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (D, *batch, N) -> (D, *batch, N)."""
        _check_input(x, self.algebra, self.n_features)
        y = grade_linear(x, self.linear_weight, self.linear_bias, self.grades)
        return self._product(x, y)

    def extra_repr(self) -> str:
        s = (
            f"n_features={self.n_features}, algebra={self.algebra.name}, normalize={self.normalize}, "
            f"use_fc={self.use_fc}"
        )
        return s + (f", precision={self.precision}" if self.use_fc and self.precision is not None else "")


class BaselineLayer(Layer):
    """``Layer`` computed by the unfused torch ops of :mod:`flashclifford.reference`.

    Same arguments, parameters (names, shapes, initialisation) and state_dict as
    :class:`Layer`, so weights load across the two; the product is
    ``reference.unfused_sgp_torch`` / ``unfused_fcgp_torch`` (MVGELU, dense Cayley einsum,
    grade RMSNorm as separate torch ops). This is the baseline the benchmarks compile with
    ``torch.compile``. Works for any metric, not only the kernel algebras.

    Shapes: (D, *batch, N) -> (D, *batch, N).
    """

    _needs_kernels = False

    def __init__(
        self,
        n_features: int,
        algebra,
        normalize: bool = True,
        use_fc: bool = False,
        precision=None,
        *,
        device=None,
        dtype=None,
    ):
        super().__init__(n_features, algebra, normalize, use_fc, precision, device=device, dtype=dtype)
        _warm_reference_tables(self.algebra, self.gp_weight.dtype, self.gp_weight.device)

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        _warm_reference_tables(self.algebra, self.gp_weight.dtype, self.gp_weight.device)
        return out

    def _product(self, x, y):
        if not torch.compiler.is_compiling():
            _warm_reference_tables(self.algebra, x.dtype, x.device)
        if self.use_fc:
            return reference.unfused_fcgp_torch(x, y, self.gp_weight, self.algebra, self.normalize)
        return reference.unfused_sgp_torch(x, y, self.gp_weight, self.algebra, self.normalize)


class CliffordMLP(nn.Module):
    """A stack of :class:`Layer` s, with optional residual connections and grade-wise linear
    embedding / read-out maps.

    ``h = embed(x)``; for each layer ``h = h + layer(h)`` (``residual``) or ``h = layer(h)``;
    ``out = readout(h)``.

    Args:
        n_features: N, the width of every Layer.
        algebra: one of the kernel algebras (any metric with ``baseline=True``).
        n_layers: number of Layers.
        residual: add each Layer's input to its output.
        normalize, use_fc, precision: passed to every Layer.
        in_features: if given, a :class:`GradeLinear` (in_features -> N) embeds the input.
        out_features: if given, a :class:`GradeLinear` (N -> out_features) reads the output.
        baseline: build :class:`BaselineLayer` s (unfused torch) instead; the state_dict is the
            same, so ``baseline_mlp.load_state_dict(mlp.state_dict())`` copies the weights.

    Shapes: (D, *batch, in_features or N) -> (D, *batch, out_features or N).
    """

    def __init__(
        self,
        n_features: int,
        algebra,
        n_layers: int,
        residual: bool = True,
        normalize: bool = True,
        use_fc: bool = False,
        precision=None,
        in_features=None,
        out_features=None,
        baseline: bool = False,
        *,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if int(n_layers) < 0:
            raise ValueError(f"n_layers: expected a number >= 0, got {n_layers}")
        self.algebra = _resolve(algebra, need_kernels=not baseline)
        self.n_features, self.residual, self.baseline = int(n_features), bool(residual), bool(baseline)
        factory = {"device": device, "dtype": dtype}
        cls = BaselineLayer if baseline else Layer
        self.embed = (
            GradeLinear(in_features, n_features, algebra, **factory) if in_features is not None else None
        )
        self.layers = nn.ModuleList(
            cls(n_features, self.algebra, normalize=normalize, use_fc=use_fc, precision=precision, **factory)
            for _ in range(int(n_layers))
        )
        self.readout = (
            GradeLinear(n_features, out_features, algebra, **factory) if out_features is not None else None
        )

    def reset_parameters(self) -> None:
        for m in (self.embed, *self.layers, self.readout):
            if m is not None:
                m.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (D, *batch, in_features or N) -> (D, *batch, out_features or N)."""
        h = self.embed(x) if self.embed is not None else x
        for layer in self.layers:
            h = h + layer(h) if self.residual else layer(h)
        return self.readout(h) if self.readout is not None else h

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, algebra={self.algebra.name}, n_layers={len(self.layers)}, "
            f"residual={self.residual}, baseline={self.baseline}"
        )
