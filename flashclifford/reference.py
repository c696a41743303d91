"""The baselines the kernels are checked and benchmarked against.

Shapes (SPEC section 2): D components, P paths, B batch rows, N features.
  x, y            (D, *batch, N_in)   several batch dims are flattened to B and restored
  output          (D, *batch, N_out)  N_out = N_in for sgp
  sgp weight      (N, P)
  fcgp weight     (P, N_in, N_out)

Three families, each built only from flashclifford.algebra's tables (never the C code):
  *_np        NumPy, always float64 whatever the input dtype: the accuracy reference.
              sgp_backward_np / fcgp_backward_np give the exact analytic gradients.
  *_torch     the same dense einsum in torch, in the input dtype, on any device, with
              autograd (sgp_torch, fcgp_torch).
  unfused_*   the unfused torch baseline as separate ops (mvgelu_torch,
              geometric_product_torch, grade_rmsnorm_torch) composed; this is what the
              benchmarks compile with torch.compile.

Every product takes a keyword ``gate`` (default True): False skips the MVGELU of x and y,
the plain geometric product (xg = x, yg = y) that the kernels compute with ``gate=False``.

The product is the CGENN weighted Cayley einsum: with M[p, i, j, k] = C[i, j, k] where
path(i, j, k) = p (Algebra.path_masks), the SGP weighted table is
Cw[n, i, j, k] = sum_p w[n, p] M[p, i, j, k] and o_j = sum_ik Cw[n, i, j, k] xg_i yg_k.
For FCGP the per-path products h[p, j, b, n] = sum_ik M[p, i, j, k] xg_i yg_k are mixed
over (p, n) by W, which avoids the (N_in, N_out, D, D, D) table.

This module imports torch only inside the torch functions.
"""

from __future__ import annotations

import math

import numpy as np

from .algebra import Algebra

__all__ = [
    "NORM_EPS",
    "mvgelu_np",
    "grade_norms_np",
    "sgp_np",
    "fcgp_np",
    "sgp_backward_np",
    "fcgp_backward_np",
    "sgp_torch",
    "fcgp_torch",
    "mvgelu_torch",
    "geometric_product_torch",
    "grade_rmsnorm_torch",
    "unfused_sgp_torch",
    "unfused_fcgp_torch",
]

NORM_EPS = 1e-6  # r_g = sqrt(q_g + NORM_EPS), SPEC section 2

_erf = np.frompyfunc(math.erf, 1, 1)  # NumPy has no erf; math.erf is exact to double


# ---------------------------------------------------------------------------------------
# shapes


def _as_f64(a, name):
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: expected a real array, got {type(a).__name__}") from e


def _check(alg, x, y, weight, fc, grad_out=None):
    """Validate shapes; return (B, N_in, N_out, batch_shape)."""
    if x.ndim < 3:
        raise ValueError(f"x: expected shape (D, *batch, N) with D = {alg.D}, got {tuple(x.shape)}")
    if x.shape[0] != alg.D:
        raise ValueError(f"x: expected {alg.D} components for {alg.name}, got shape {tuple(x.shape)}")
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"y: expected shape {tuple(x.shape)} (that of x), got {tuple(y.shape)}")
    batch = tuple(x.shape[1:-1])
    B, N = math.prod(batch), x.shape[-1]
    if fc:
        if weight.ndim != 3 or tuple(weight.shape[:2]) != (alg.P, N):
            raise ValueError(
                f"weight: expected shape ({alg.P}, {N}, N_out) for {alg.name} FCGP, got {tuple(weight.shape)}"
            )
        M = weight.shape[2]
    else:
        if tuple(weight.shape) != (N, alg.P):
            raise ValueError(
                f"weight: expected shape ({N}, {alg.P}) for {alg.name} SGP, got {tuple(weight.shape)}"
            )
        M = N
    if grad_out is not None and tuple(grad_out.shape) != (alg.D, *batch, M):
        raise ValueError(f"grad_out: expected shape {(alg.D, *batch, M)}, got {tuple(grad_out.shape)}")
    return B, N, M, batch


# ---------------------------------------------------------------------------------------
# NumPy float64 reference


def _phi_np(t):
    """Standard normal CDF Phi(t) = (1 + erf(t / sqrt 2)) / 2, float64."""
    return 0.5 * (1.0 + _erf(t / math.sqrt(2.0)).astype(np.float64))


def mvgelu_np(x):
    """MVGELU, float64: xg_i = x_i * Phi(x_0), the gate from the raw scalar component.

    x: (D, ...) -> (D, ...) float64.
    """
    x = _as_f64(x, "x")
    return x * _phi_np(x[0])


def _gate_np(x, gate):
    return mvgelu_np(x) if gate else x


def _mvgelu_backward_np(g, x, gate=True):
    """Gradient of mvgelu at x (D, ...) for the output gradient g (D, ...); g itself without the gate."""
    if not gate:
        return g
    gate = _phi_np(x[0])
    dens = np.exp(-0.5 * x[0] ** 2) / math.sqrt(2.0 * math.pi)  # Phi'(x_0)
    gx = g * gate
    gx[0] += dens * np.sum(g * x, axis=0)
    return gx


def _grade_matrix(alg):
    """(G, D) float64: s_A where grade(A) == g, else 0."""
    gm = np.zeros((alg.G, alg.D))
    gm[alg.grades, np.arange(alg.D)] = alg.grade_signs
    return gm


def _norm_parts_np(o, alg):
    """t (G, B, N) = sum_{A in g} s_A o_A^2 and r (G, B) = sqrt(mean_n |t| + eps)."""
    t = np.einsum("ga,abn->gbn", _grade_matrix(alg), o * o)
    r = np.sqrt(np.abs(t).mean(axis=-1) + NORM_EPS)
    return t, r


def grade_norms_np(o, algebra):
    """The grade RMS r_g[b] of an unnormalised product o (D, *batch, N): (B, G) float64.

    This is the `norms` array of the C ops (their layout is (B, G)).
    """
    alg = Algebra.resolve(algebra)
    o = _as_f64(o, "o")
    o = o.reshape(alg.D, -1, o.shape[-1])
    return _norm_parts_np(o, alg)[1].T.copy()


def _norm_backward_np(gout, o, t, r, alg):
    """Gradient of out_A = o_A / r_{grade(A)} with respect to o; all (D, B, N) / (G, B, N)."""
    N = o.shape[-1]
    ra = r[alg.grades][:, :, None]  # (D, B, 1)
    # dL/dr_g = -sum_{A in g, n} gout_A o_A / r_g^2;  dr_g/do_A = s_A sign(t_g) o_A / (N r_g)
    dot = np.zeros_like(r)
    np.add.at(dot, alg.grades, np.sum(gout * o, axis=-1))
    c = dot / (r**3 * N)  # (G, B)
    corr = (c[:, :, None] * np.sign(t))[alg.grades] * alg.grade_signs[:, None, None] * o
    return gout / ra - corr


def _finish_np(o, alg, normalize):
    if not normalize:
        return o
    _, r = _norm_parts_np(o, alg)
    return o / r[alg.grades][:, :, None]


def _sgp_parts_np(x, y, w, alg, gate):
    xg, yg = _gate_np(x, gate), _gate_np(y, gate)
    cw = np.einsum("np,pijk->nijk", w, alg.path_masks)
    o = np.einsum("ibn,nijk,kbn->jbn", xg, cw, yg, optimize=True)
    return xg, yg, cw, o


def sgp_np(x, y, w, algebra, normalize=True, *, gate=True):
    """Fused GELU -> weighted geometric product -> grade RMSNorm, float64 reference.

    x, y: (D, *batch, N); w: (N, P). Returns (D, *batch, N) float64. gate=False: no GELU.
    """
    alg = Algebra.resolve(algebra)
    x, y, w = _as_f64(x, "x"), _as_f64(y, "y"), _as_f64(w, "weight")
    B, N, _, batch = _check(alg, x, y, w, fc=False)
    x, y = x.reshape(alg.D, B, N), y.reshape(alg.D, B, N)
    o = _sgp_parts_np(x, y, w, alg, gate)[3]
    return _finish_np(o, alg, normalize).reshape(alg.D, *batch, N)


def sgp_backward_np(gout, x, y, w, algebra, normalize=True, *, gate=True):
    """Exact gradients of sgp_np: returns (grad_x, grad_y, grad_weight), float64.

    gout, x, y: (D, *batch, N); w: (N, P). grad_weight is (N, P).
    """
    alg = Algebra.resolve(algebra)
    x, y, w = _as_f64(x, "x"), _as_f64(y, "y"), _as_f64(w, "weight")
    gout = _as_f64(gout, "grad_out")
    B, N, _, batch = _check(alg, x, y, w, fc=False, grad_out=gout)
    x, y, gout = (a.reshape(alg.D, B, N) for a in (x, y, gout))
    xg, yg, cw, o = _sgp_parts_np(x, y, w, alg, gate)
    go = _norm_backward_np(gout, o, *_norm_parts_np(o, alg), alg) if normalize else gout
    gxg = np.einsum("nijk,jbn,kbn->ibn", cw, go, yg, optimize=True)
    gyg = np.einsum("nijk,ibn,jbn->kbn", cw, xg, go, optimize=True)
    gw = np.einsum("pijk,ibn,jbn,kbn->np", alg.path_masks, xg, go, yg, optimize=True)
    gx = _mvgelu_backward_np(gxg, x, gate).reshape(alg.D, *batch, N)
    gy = _mvgelu_backward_np(gyg, y, gate).reshape(alg.D, *batch, N)
    return gx, gy, gw


def _fcgp_parts_np(x, y, W, alg, gate):
    xg, yg = _gate_np(x, gate), _gate_np(y, gate)
    h = np.einsum("pijk,ibn,kbn->pjbn", alg.path_masks, xg, yg, optimize=True)
    o = np.einsum("pjbn,pnm->jbm", h, W, optimize=True)
    return xg, yg, h, o


def fcgp_np(x, y, W, algebra, normalize=True, *, gate=True):
    """Fused GELU -> fully connected geometric product -> grade RMSNorm, float64 reference.

    x, y: (D, *batch, N_in); W: (P, N_in, N_out). Returns (D, *batch, N_out) float64.
    gate=False: no GELU.
    """
    alg = Algebra.resolve(algebra)
    x, y, W = _as_f64(x, "x"), _as_f64(y, "y"), _as_f64(W, "weight")
    B, N, M, batch = _check(alg, x, y, W, fc=True)
    x, y = x.reshape(alg.D, B, N), y.reshape(alg.D, B, N)
    o = _fcgp_parts_np(x, y, W, alg, gate)[3]
    return _finish_np(o, alg, normalize).reshape(alg.D, *batch, M)


def fcgp_backward_np(gout, x, y, W, algebra, normalize=True, *, gate=True):
    """Exact gradients of fcgp_np: returns (grad_x, grad_y, grad_weight), float64.

    gout: (D, *batch, N_out); x, y: (D, *batch, N_in); W: (P, N_in, N_out).
    """
    alg = Algebra.resolve(algebra)
    x, y, W = _as_f64(x, "x"), _as_f64(y, "y"), _as_f64(W, "weight")
    gout = _as_f64(gout, "grad_out")
    B, N, M, batch = _check(alg, x, y, W, fc=True, grad_out=gout)
    x, y, gout = x.reshape(alg.D, B, N), y.reshape(alg.D, B, N), gout.reshape(alg.D, B, M)
    xg, yg, h, o = _fcgp_parts_np(x, y, W, alg, gate)
    go = _norm_backward_np(gout, o, *_norm_parts_np(o, alg), alg) if normalize else gout
    gW = np.einsum("pjbn,jbm->pnm", h, go, optimize=True)
    gh = np.einsum("jbm,pnm->pjbn", go, W, optimize=True)
    gxg = np.einsum("pijk,pjbn,kbn->ibn", alg.path_masks, gh, yg, optimize=True)
    gyg = np.einsum("pijk,pjbn,ibn->kbn", alg.path_masks, gh, xg, optimize=True)
    gx = _mvgelu_backward_np(gxg, x, gate).reshape(alg.D, *batch, N)
    gy = _mvgelu_backward_np(gyg, y, gate).reshape(alg.D, *batch, N)
    return gx, gy, gW


# ---------------------------------------------------------------------------------------
# torch: the einsum reference and the unfused baseline

_torch_tables: dict = {}


def _tables_torch(alg, dtype, device):
    """(path masks (P, D, D, D), grade matrix (G, D), grades (D,)) as torch tensors, cached."""
    import torch

    device = torch.device(device)
    if device.type == "cuda" and device.index is None:  # tensors always carry an index
        device = torch.device("cuda", torch.cuda.current_device())
    key = (alg.metric, dtype, str(device))
    t = _torch_tables.get(key)
    if t is None:
        t = (
            torch.tensor(alg.path_masks, dtype=dtype, device=device),
            torch.tensor(_grade_matrix(alg), dtype=dtype, device=device),
            torch.tensor(alg.grades, dtype=torch.long, device=device),
        )
        _torch_tables[key] = t
    return t


def _check_torch(alg, x, y, weight, fc):
    B, N, M, batch = _check(alg, x, y, weight, fc)
    return x.reshape(alg.D, B, N), y.reshape(alg.D, B, N), M, batch


def mvgelu_torch(x):
    """MVGELU in torch: x_i * Phi(x_0) for every component i. x: (D, ...) -> (D, ...)."""
    import torch

    return x * (0.5 * (1.0 + torch.erf(x[:1] * (1.0 / math.sqrt(2.0)))))


def grade_rmsnorm_torch(o, algebra):
    """Grade-wise RMSNorm (SPEC section 2). o: (D, *batch, N) -> (D, *batch, N).

    q_g[b] = mean_n |sum_{A in g} s_A o_A[b, n]^2|, out_A = o_A / sqrt(q_g[b] + 1e-6).
    """
    import torch

    alg = Algebra.resolve(algebra)
    shape = o.shape
    o = o.reshape(alg.D, -1, shape[-1])
    _, gm, grades = _tables_torch(alg, o.dtype, o.device)
    t = torch.einsum("ga,abn->gbn", gm, o * o)
    r = torch.sqrt(t.abs().mean(dim=-1) + NORM_EPS)  # (G, B)
    return (o / r[grades].unsqueeze(-1)).reshape(shape)


def geometric_product_torch(x, y, weight, algebra):
    """Weighted or fully connected geometric product in torch (no GELU, no norm).

    weight (N, P): SGP, x, y (D, *batch, N) -> (D, *batch, N).
    weight (P, N_in, N_out): FCGP, x, y (D, *batch, N_in) -> (D, *batch, N_out).
    """
    import torch

    alg = Algebra.resolve(algebra)
    fc = weight.ndim == 3
    x, y, M, batch = _check_torch(alg, x, y, weight, fc)
    masks, _, _ = _tables_torch(alg, x.dtype, x.device)
    xy = x.unsqueeze(1) * y.unsqueeze(0)  # (D_i, D_k, B, N)
    if not fc:
        cw = torch.einsum("np,pijk->nijk", weight, masks)
        o = torch.einsum("ikbn,nijk->jbn", xy, cw)
    else:
        D, B, N = x.shape
        h = torch.einsum("pijk,ikbn->jbpn", masks, xy)  # per-path products
        o = (h.reshape(D * B, alg.P * N) @ weight.reshape(alg.P * N, M)).reshape(D, B, M)
    return o.reshape(alg.D, *batch, M)


def _gate_torch(x, gate):
    return mvgelu_torch(x) if gate else x


def unfused_sgp_torch(x, y, w, algebra, normalize=True, *, gate=True):
    """The unfused baseline: mvgelu_torch, geometric_product_torch, grade_rmsnorm_torch.

    x, y: (D, *batch, N); w: (N, P). Returns (D, *batch, N) in the input dtype.
    """
    o = geometric_product_torch(_gate_torch(x, gate), _gate_torch(y, gate), w, algebra)
    return grade_rmsnorm_torch(o, algebra) if normalize else o


def unfused_fcgp_torch(x, y, W, algebra, normalize=True, *, gate=True):
    """The unfused FCGP baseline. x, y: (D, *batch, N_in); W: (P, N_in, N_out)."""
    o = geometric_product_torch(_gate_torch(x, gate), _gate_torch(y, gate), W, algebra)
    return grade_rmsnorm_torch(o, algebra) if normalize else o


def _finish_torch(o, alg, normalize):
    import torch

    if not normalize:
        return o
    _, gm, grades = _tables_torch(alg, o.dtype, o.device)
    q = torch.einsum("ga,abn->gbn", gm, o * o).abs().mean(dim=-1)
    return o / torch.sqrt(q + NORM_EPS)[grades].unsqueeze(-1)


def sgp_torch(x, y, w, algebra, normalize=True, *, gate=True):
    """The einsum reference in torch, autograd-capable, in the input dtype and device.

    x, y: (D, *batch, N); w: (N, P). Returns (D, *batch, N).
    """
    import torch

    alg = Algebra.resolve(algebra)
    x, y, _, batch = _check_torch(alg, x, y, w, fc=False)
    masks, _, _ = _tables_torch(alg, x.dtype, x.device)
    cw = torch.einsum("np,pijk->nijk", w, masks)
    o = torch.einsum("ibn,nijk,kbn->jbn", _gate_torch(x, gate), cw, _gate_torch(y, gate))
    return _finish_torch(o, alg, normalize).reshape(alg.D, *batch, x.shape[-1])


def fcgp_torch(x, y, W, algebra, normalize=True, *, gate=True):
    """The FCGP einsum reference in torch. x, y: (D, *batch, N_in); W: (P, N_in, N_out)."""
    import torch

    alg = Algebra.resolve(algebra)
    x, y, M, batch = _check_torch(alg, x, y, W, fc=True)
    masks, _, _ = _tables_torch(alg, x.dtype, x.device)
    xy = torch.einsum("ibn,kbn->ikbn", _gate_torch(x, gate), _gate_torch(y, gate))
    h = torch.einsum("pijk,ikbn->pjbn", masks, xy)
    o = torch.einsum("pjbn,pnm->jbm", h, W)
    return _finish_torch(o, alg, normalize).reshape(alg.D, *batch, M)
