"""PyTorch operators: ``flashclifford::gelu_sgp_norm`` and ``flashclifford::gelu_fcgp_norm``.

Registered with ``torch.library.Library.define`` / ``impl`` (not the ``custom_op`` decorator,
whose per-call cost is as long as the kernel at these sizes), with a fake implementation
for torch.compile, an autograd rule, and an autocast rule that runs the op in the autocast
dtype like a matmul. Each forward op returns ``(out, norms)``: the (B, G) grade RMS is what
the SGP backward needs instead of the output (empty when ``normalize`` is False); the FCGP
backward also takes the output when normalized (``out``), so that on CUDA it forms the norm's
gradient from it instead of recomputing the product. Every op takes ``gate`` (default True);
False is the plain geometric product, no MVGELU, on the same kernels.

The kernels run on the current stream of the tensors' device; outputs and CUDA workspace
come from PyTorch's allocator, so the ops can be captured in CUDA graphs.
"""

from __future__ import annotations

import math

import torch

from . import _C
from .ops import kernel_id, precision_code

__all__ = ["gelu_sgp_norm", "gelu_fcgp_norm"]

_lib = torch.library.Library("flashclifford", "DEF")
_lib.define(
    "gelu_sgp_norm(Tensor x, Tensor y, Tensor weight, int algebra, bool normalize, bool gate=True) "
    "-> (Tensor, Tensor)"
)
_lib.define(
    "gelu_sgp_norm_backward(Tensor grad_out, Tensor x, Tensor y, Tensor weight, Tensor norms, int algebra, "
    "bool normalize, bool gate=True) -> (Tensor, Tensor, Tensor)"
)
_lib.define(
    "gelu_fcgp_norm(Tensor x, Tensor y, Tensor weight, int algebra, bool normalize, int precision, "
    "bool gate=True) -> (Tensor, Tensor)"
)
_lib.define(
    "gelu_fcgp_norm_backward(Tensor grad_out, Tensor x, Tensor y, Tensor weight, Tensor norms, int algebra, "
    "bool normalize, int precision, bool gate=True, Tensor? out=None) -> (Tensor, Tensor, Tensor)"
)

_GRADES = [_C.algebra_table(i)["G"] for i in range(_C.NUM_ALGEBRAS)]
_HALF = (torch.bfloat16, torch.float16)
_DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
                torch.float16: "float16"}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


# is_cuda / get_device() rather than t.device: building a torch.device costs more than the rest
# of these checks together, and a small eager call is host-bound (issue 3: <= 25 us a forward)
def _stream(t: torch.Tensor):
    if not t.is_cuda:
        return None
    return _raw_stream(t.get_device()) if _raw_stream else torch.cuda.current_stream(t.device).cuda_stream


def _compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _norms_shape(x, algebra, normalize):
    batch = math.prod(x.shape[1:-1])
    return (batch if normalize else 0, _GRADES[algebra])


def _workspace(op, backward, algebra, x, n_in, n_out, precision=0, gate=True, saved_out=False):
    if not x.is_cuda:
        return None
    batch = math.prod(x.shape[1:-1])
    size = _C.workspace_size(op, backward, algebra, _DTYPE_NAMES.get(x.dtype, "float32"), batch, n_in, n_out,
                             precision, gate, x.get_device(), saved_out)
    return torch.empty(size, dtype=torch.uint8, device=x.device) if size else None


def _upcast_cpu_half(x, *others):
    """The CPU kernels compute float32/float64; half inputs are computed in float32 (SPEC)."""
    return x.is_cpu and x.dtype in _HALF and all(t.dtype == x.dtype for t in others)


# --- SGP --------------------------------------------------------------------------------------


def _sgp_impl(x, y, weight, algebra, normalize, gate=True, keep_norms=True):
    """keep_norms=False (an eager call with nothing to differentiate): the norms that only
    backward reads are neither allocated nor written, and None is returned for them."""
    if _upcast_cpu_half(x, y, weight):
        out, norms = _sgp_impl(x.float(), y.float(), weight.float(), algebra, normalize, gate, keep_norms)
        return out.to(x.dtype), norms
    x, y, weight = x.contiguous(), y.contiguous(), weight.contiguous()
    out = torch.empty_like(x)
    norms = None
    if keep_norms:
        norms = x.new_empty(_norms_shape(x, algebra, normalize), dtype=_compute_dtype(x.dtype))
    _C.sgp_forward(x, y, weight, algebra, normalize, out=out, norms=norms if normalize else None,
                   stream=_stream(x), gate=gate)
    return out, norms


def _sgp_backward_impl(grad_out, x, y, weight, norms, algebra, normalize, gate=True):
    if _upcast_cpu_half(x, y, weight, grad_out):
        gx, gy, gw = _sgp_backward_impl(grad_out.float(), x.float(), y.float(), weight.float(), norms,
                                        algebra, normalize, gate)
        return gx.to(x.dtype), gy.to(x.dtype), gw.to(x.dtype)
    grad_out, x, y, weight = grad_out.contiguous(), x.contiguous(), y.contiguous(), weight.contiguous()
    gx, gy, gw = torch.empty_like(x), torch.empty_like(y), torch.empty_like(weight)
    n = x.shape[-1]
    _C.sgp_backward(grad_out, x, y, weight, algebra, normalize, norms=norms if normalize else None, grad_x=gx,
                    grad_y=gy, grad_weight=gw, workspace=_workspace("sgp", True, algebra, x, n, n, 0, gate),
                    stream=_stream(x), gate=gate)
    return gx, gy, gw


# --- FCGP -------------------------------------------------------------------------------------


def _fcgp_impl(x, y, weight, algebra, normalize, precision, gate=True, keep_norms=True):
    """keep_norms: as _sgp_impl."""
    if _upcast_cpu_half(x, y, weight):
        out, norms = _fcgp_impl(x.float(), y.float(), weight.float(), algebra, normalize, precision, gate,
                                keep_norms)
        return out.to(x.dtype), norms
    x, y, weight = x.contiguous(), y.contiguous(), weight.contiguous()
    out = x.new_empty((*x.shape[:-1], weight.shape[-1]) if weight.dim() == 3 else x.shape)
    norms = None
    if keep_norms:
        norms = x.new_empty(_norms_shape(out, algebra, normalize), dtype=_compute_dtype(x.dtype))
    n_out = out.shape[-1]
    _C.fcgp_forward(x, y, weight, algebra, normalize, precision, out=out, norms=norms if normalize else None,
                    workspace=_workspace("fcgp", False, algebra, x, x.shape[-1], n_out, precision, gate),
                    stream=_stream(x), gate=gate)
    return out, norms


def _fcgp_backward_impl(grad_out, x, y, weight, norms, algebra, normalize, precision, gate=True, out=None):
    """out: the forward's output (normalize only; None: the CUDA backward recomputes the product)."""
    if _upcast_cpu_half(x, y, weight, grad_out):  # the CPU backend recomputes: out is not needed
        gx, gy, gw = _fcgp_backward_impl(grad_out.float(), x.float(), y.float(), weight.float(), norms,
                                         algebra, normalize, precision, gate)
        return gx.to(x.dtype), gy.to(x.dtype), gw.to(x.dtype)
    grad_out, x, y, weight = grad_out.contiguous(), x.contiguous(), y.contiguous(), weight.contiguous()
    out = out.contiguous() if out is not None and normalize and x.is_cuda else None
    gx, gy, gw = torch.empty_like(x), torch.empty_like(y), torch.empty_like(weight)
    n_in, n_out = x.shape[-1], grad_out.shape[-1]
    ws = _workspace("fcgp", True, algebra, x, n_in, n_out, precision, gate, saved_out=out is not None)
    _C.fcgp_backward(grad_out, x, y, weight, algebra, normalize, precision,
                     norms=norms if normalize else None, grad_x=gx, grad_y=gy, grad_weight=gw, workspace=ws,
                     stream=_stream(x), gate=gate, out=out)
    return gx, gy, gw


for _name, _fn in (("gelu_sgp_norm", _sgp_impl), ("gelu_sgp_norm_backward", _sgp_backward_impl),
                   ("gelu_fcgp_norm", _fcgp_impl), ("gelu_fcgp_norm_backward", _fcgp_backward_impl)):
    _lib.impl(_name, _fn, "CPU")
    _lib.impl(_name, _fn, "CUDA")


# --- fake (shape-only) implementations for torch.compile ---------------------------------------


@torch.library.register_fake("flashclifford::gelu_sgp_norm")
def _sgp_fake(x, y, weight, algebra, normalize, gate=True):
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    return out, x.new_empty(_norms_shape(x, algebra, normalize), dtype=_compute_dtype(x.dtype))


@torch.library.register_fake("flashclifford::gelu_sgp_norm_backward")
def _sgp_backward_fake(grad_out, x, y, weight, norms, algebra, normalize, gate=True):
    fmt = torch.contiguous_format
    return (torch.empty_like(x, memory_format=fmt), torch.empty_like(y, memory_format=fmt),
            torch.empty_like(weight, memory_format=fmt))


@torch.library.register_fake("flashclifford::gelu_fcgp_norm")
def _fcgp_fake(x, y, weight, algebra, normalize, precision, gate=True):
    out = x.new_empty((*x.shape[:-1], weight.shape[-1]))
    return out, x.new_empty(_norms_shape(out, algebra, normalize), dtype=_compute_dtype(x.dtype))


@torch.library.register_fake("flashclifford::gelu_fcgp_norm_backward")
def _fcgp_backward_fake(grad_out, x, y, weight, norms, algebra, normalize, precision, gate=True, out=None):
    fmt = torch.contiguous_format
    return (torch.empty_like(x, memory_format=fmt), torch.empty_like(y, memory_format=fmt),
            torch.empty_like(weight, memory_format=fmt))


# --- autograd ---------------------------------------------------------------------------------


def _setup_context(ctx, inputs, output):
    # inputs carry every schema argument, defaults filled: sgp (..., normalize, gate),
    # fcgp (..., normalize, precision, gate)
    x, y, weight, algebra, normalize, *rest = inputs
    fcgp = len(rest) == 2
    # the FCGP backward forms the norm's gradient from the output (no recomputed product)
    saved_out = output[0] if fcgp and normalize else None
    ctx.save_for_backward(x, y, weight, output[1], saved_out)
    ctx.algebra, ctx.normalize, ctx.gate = algebra, normalize, rest[-1]
    ctx.precision = rest[0] if fcgp else None


def _sgp_backward(ctx, grad_out, _grad_norms):
    x, y, weight, norms, _ = ctx.saved_tensors
    gx, gy, gw = torch.ops.flashclifford.gelu_sgp_norm_backward(grad_out, x, y, weight, norms, ctx.algebra,
                                                                ctx.normalize, ctx.gate)
    return gx, gy, gw, None, None, None


def _fcgp_backward(ctx, grad_out, _grad_norms):
    x, y, weight, norms, out = ctx.saved_tensors
    gx, gy, gw = torch.ops.flashclifford.gelu_fcgp_norm_backward(grad_out, x, y, weight, norms, ctx.algebra,
                                                                 ctx.normalize, ctx.precision, ctx.gate, out)
    return gx, gy, gw, None, None, None, None


torch.library.register_autograd("flashclifford::gelu_sgp_norm", _sgp_backward, setup_context=_setup_context,
                                lib=_lib)
torch.library.register_autograd("flashclifford::gelu_fcgp_norm", _fcgp_backward, setup_context=_setup_context,
                                lib=_lib)


# --- autocast: run in the autocast dtype, as a matmul does ---------------------------------------


def _register_autocast(name, device_type):
    op = getattr(torch.ops.flashclifford, name).default
    key = getattr(torch._C.DispatchKey, "Autocast" + torch._C._dispatch_key_for_device(device_type))

    def cast_and_call(*args):
        dtype = torch.get_autocast_dtype(device_type)
        args = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return op(*args)

    op.py_impl(key)(cast_and_call)  # used while tracing (torch.compile)
    _lib.impl(name, lambda _keyset, *args: cast_and_call(*args), key.name, with_keyset=True)


for _name in ("gelu_sgp_norm", "gelu_fcgp_norm"):
    _register_autocast(_name, "cuda")


# --- eager fast path ---------------------------------------------------------------------------
# Going through the dispatcher into a Python kernel and register_autograd's generic
# machinery costs more host time than these kernels take at small sizes. In plain eager
# mode the public functions call the same impls through an autograd.Function instead (or
# directly, when no input needs a gradient);
# under torch.compile, fake tensors, tensor subclasses, modes or functorch transforms they
# use the registered op, which those systems understand.

import torch.autograd.forward_ad as _fw_ad  # noqa: E402
from torch.utils._python_dispatch import is_in_torch_dispatch_mode  # noqa: E402


def _plain(x, y, weight) -> bool:
    return (
        not torch.compiler.is_compiling()
        and type(x) is torch.Tensor and type(y) is torch.Tensor and type(weight) is torch.Tensor
        and not torch._C._is_torch_function_mode_enabled()
        and not is_in_torch_dispatch_mode()
        and torch._C._functorch.peek_interpreter_stack() is None
    )


def _require_tensors(**named):
    """SPEC section 5: a non-tensor argument is a TypeError naming it (the dispatcher would
    raise a RuntimeError about schemas instead)."""
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got "
                            f"{type(t).__module__}.{type(t).__qualname__} "
                            "(flashclifford.ops takes any DLPack array)")


def _needs_grad(x, y, weight) -> bool:
    # without a graph to record, autograd.Function.apply is pure host cost (a third of an
    # eager forward call at small sizes): the impl is called directly. Inside a forward-mode
    # AD level, inputs may carry tangents without requiring grad: those go through the
    # Function, which refuses them (no jvp) instead of dropping the tangent.
    if getattr(_fw_ad, "_current_level", 0) >= 0:
        return True
    return torch.is_grad_enabled() and (x.requires_grad or y.requires_grad or weight.requires_grad)


def _autocast(tensors):
    if tensors[0].is_cuda and torch.is_autocast_enabled("cuda"):
        dtype = torch.get_autocast_dtype("cuda")
        return [t.to(dtype) if t.is_floating_point() else t for t in tensors]
    return tensors


class _SGP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, weight, algebra, normalize, gate):
        out, norms = _sgp_impl(x, y, weight, algebra, normalize, gate)
        ctx.save_for_backward(x, y, weight, norms)
        ctx.algebra, ctx.normalize, ctx.gate = algebra, normalize, gate
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, y, weight, norms = ctx.saved_tensors
        grads = _sgp_backward_impl(grad_out, x, y, weight, norms, ctx.algebra, ctx.normalize, ctx.gate)
        return (*grads, None, None, None)


class _FCGP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, weight, algebra, normalize, precision, gate):
        out, norms = _fcgp_impl(x, y, weight, algebra, normalize, precision, gate)
        ctx.save_for_backward(x, y, weight, norms, out if normalize else None)
        ctx.algebra, ctx.normalize, ctx.precision, ctx.gate = algebra, normalize, precision, gate
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, y, weight, norms, out = ctx.saved_tensors
        grads = _fcgp_backward_impl(grad_out, x, y, weight, norms, ctx.algebra, ctx.normalize, ctx.precision,
                                    ctx.gate, out)
        return (*grads, None, None, None, None)


# --- the public functions ---------------------------------------------------------------------


def gelu_sgp_norm(x, y, weight, algebra, normalize: bool = True, *, gate: bool = True):
    """MVGELU -> weighted geometric product -> grade RMSNorm, with autograd.

    x, y: (D, *batch, N); weight: (N, P); returns (D, *batch, N). ``algebra``: an
    :class:`~flashclifford.Algebra`, 2, 3 or a metric tuple. ``gate=False`` skips the MVGELU:
    the plain weighted geometric product (normalised if ``normalize``) on the same kernels.
    Works under ``torch.compile(fullgraph=True)``, autocast and CUDA graphs.
    """
    _require_tensors(x=x, y=y, weight=weight)
    algebra, normalize, gate = kernel_id(algebra), bool(normalize), bool(gate)
    if _plain(x, y, weight):
        x, y, weight = _autocast((x, y, weight))
        if not _needs_grad(x, y, weight):
            return _sgp_impl(x, y, weight, algebra, normalize, gate, keep_norms=False)[0]
        return _SGP.apply(x, y, weight, algebra, normalize, gate)
    return torch.ops.flashclifford.gelu_sgp_norm(x, y, weight, algebra, normalize, gate)[0]


@torch.compiler.assume_constant_result
def _default_precision() -> str:
    # a constant while tracing: a compiled graph keeps the precision it was compiled with
    return {"highest": "highest", "high": "tf32", "medium": "bf16"}[torch.get_float32_matmul_precision()]


def gelu_fcgp_norm(x, y, weight, algebra, normalize: bool = True, precision=None, *, gate: bool = True):
    """MVGELU -> fully connected geometric product -> grade RMSNorm, with autograd.

    x, y: (D, *batch, N_in); weight: (P, N_in, N_out); returns (D, *batch, N_out).
    precision for float32 inputs: "highest", "tf32" or "bf16"; None follows
    ``torch.get_float32_matmul_precision()`` ("highest" -> highest, "high" -> tf32,
    "medium" -> bf16). ``gate=False`` skips the MVGELU: the plain fully connected
    geometric product (normalised if ``normalize``) on the same kernels.
    """
    _require_tensors(x=x, y=y, weight=weight)
    if precision is None:
        precision = _default_precision()
    algebra, precision = kernel_id(algebra), precision_code(precision)
    normalize, gate = bool(normalize), bool(gate)
    if _plain(x, y, weight):
        x, y, weight = _autocast((x, y, weight))
        if not _needs_grad(x, y, weight):
            return _fcgp_impl(x, y, weight, algebra, normalize, precision, gate, keep_norms=False)[0]
        return _FCGP.apply(x, y, weight, algebra, normalize, precision, gate)
    return torch.ops.flashclifford.gelu_fcgp_norm(x, y, weight, algebra, normalize, precision, gate)[0]
