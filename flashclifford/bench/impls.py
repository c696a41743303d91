"""The implementations a cell is timed on, and their inputs.

A cell is (op, algebra, dtype, precision, normalize, B, N); its inputs are
  x, y      (D, B, N)      random normal, in the cell's dtype
  weight    (N, P) for sgp, std 1/sqrt(n+1) (flash-clifford's init);
            (P, N, N) for fcgp, std 1/sqrt(N) (keeps the unnormalised output O(1))
  grad_out  (D, B, N)      random normal (never zeros: they can run faster than real data)
and for op=layer the parameters of flashclifford.nn.Layer(N, algebra, normalize, use_fc).

Implementations (the `impl` column):
  flashclifford  the fused op: flashclifford.gelu_sgp_norm / gelu_fcgp_norm / nn.Layer
                 (torch), or flashclifford.ops on NumPy arrays (framework "numpy")
  compiled       torch.compile of the unfused torch baseline (reference.unfused_*_torch,
                 nn.BaselineLayer). --compile static (default): dynamic=False, a graph
                 specialised to each shape, its best case; --compile dynamic: one graph per
                 configuration with batch and feature sizes symbolic (compile_fn)
  eager          the same unfused baseline, eager
  einsum         the dense Cayley einsum (reference.sgp_torch / fcgp_torch; CGENN's form);
                 with framework "numpy" the NumPy float64 einsum of flashclifford.reference

With --compile-ours (op=layer), flashclifford is nn.Layer under torch.compile(fullgraph=True),
compiled the same way.

Each implementation exposes forward() (no autograd graph), forward_backward() (output and
all gradients, grad_out given), pre() (drop gradients, untimed), and grads().
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from .. import ops, reference
from ..algebra import Algebra

OURS = "flashclifford"
BASELINES = ("compiled", "eager", "einsum")

TORCH_DTYPES = ("float32", "bfloat16", "float16", "float64")
NUMPY_DTYPES = ("float32", "float64", "float16")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}

# float32 precision -> torch.set_float32_matmul_precision, applied to every implementation
# of a cell (ours gets the precision explicitly as well), so all compare at the same setting.
MATMUL_PRECISION = {"highest": "highest", "tf32": "high", "bf16": "medium", None: "highest"}

COMPILE_MODES = ("static", "dynamic")


def compile_fn(torch, fn, mode, fullgraph=False):
    """torch.compile of `fn` in a --compile mode.

    static: dynamic=False, so each new shape recompiles into a graph specialised to it.
    dynamic: the dims marked by mark_dynamic on the inputs (batch and features) are symbolic
    and one graph serves every shape; fullgraph, so a graph break raises instead of running
    part of the function eagerly (Sweep.run also makes a hit recompile limit raise).
    """
    if mode == "dynamic":
        return torch.compile(fn, fullgraph=True)
    return torch.compile(fn, dynamic=False, fullgraph=fullgraph)


def mark_dynamic(torch, *tensor_dims):
    """Mark (tensor, dims) symbolic for the next torch.compile trace. The component dim D and
    the path dim P are never marked. Sizes 0 and 1 are always specialised by dynamo and marking
    them raises, so they are left static (such a shape gets its own graph)."""
    for t, dims in tensor_dims:
        for d in dims:
            if t.shape[d] > 1:
                torch._dynamo.mark_dynamic(t, d)


class Spec:
    """One cell without its pass: what to build and how to label it."""

    __slots__ = ("op", "alg", "dtype", "precision", "normalize", "B", "N", "use_fc")

    def __init__(self, op, alg, dtype, precision, normalize, B, N, use_fc=False):
        self.op, self.alg, self.dtype, self.precision = op, Algebra.resolve(alg), dtype, precision
        self.normalize, self.B, self.N, self.use_fc = bool(normalize), int(B), int(N), bool(use_fc)

    def tiny(self):
        return Spec(self.op, self.alg, self.dtype, self.precision, self.normalize, 1, 1, self.use_fc)

    @property
    def fc(self):
        return self.op == "fcgp" or (self.op == "layer" and self.use_fc)

    @property
    def multivector_bytes(self):
        """Bytes of one (D, B, N) tensor: the unit of 'passes'."""
        return self.alg.D * self.B * self.N * DTYPE_BYTES[self.dtype]

    def label(self):
        prec = f" {self.precision}" if self.precision else ""
        op = "layer-fc" if self.op == "layer" and self.use_fc else self.op
        return f"{op} {self.alg.name} {self.dtype}{prec} B={self.B} N={self.N}"


def fc_pairs(alg: Algebra) -> set[tuple[int, int]]:
    """The distinct (output component j, path) pairs of FCGP: each is one matrix product of shape
    (B x N_in) @ (N_in x N_out) that FCGP is the sum of."""
    i, j, k = np.nonzero(alg.cayley)
    return set(zip(j.tolist(), alg.path_index[i, j, k].tolist(), strict=True))


def fc_products(alg: Algebra) -> int:
    """T': how many (output component, path) pairs (fc_pairs) there are (14 for Cl(2,0), 44 for Cl(3,0))."""
    return len(fc_pairs(alg))


def _seed(spec: Spec) -> int:
    """A seed fixed by the cell (crc32, not hash(): str hashes change between processes)."""
    return zlib.crc32(spec.label().encode())


# --- torch ------------------------------------------------------------------------------------


class TorchImpl:
    """fn(*args) -> output, with `leaves` (name, tensor) whose gradients are wanted;
    `compiled`: fn runs through torch.compile."""

    def __init__(self, torch, name, fn, args, leaves, grad_out, compiled=False):
        self.torch, self.name, self.fn, self.args = torch, name, fn, args
        self.leaves, self.grad_out, self.compiled = leaves, grad_out, compiled

    def forward(self):
        with self.torch.no_grad():
            return self.fn(*self.args)

    def forward_grad(self):
        """Forward that records the autograd graph (for the memory measurement)."""
        return self.fn(*self.args)

    def forward_backward(self, grad_out=None):
        out = self.fn(*self.args)
        out.backward(self.grad_out if grad_out is None else grad_out)
        return out

    def pre(self):
        for _, t in self.leaves:
            t.grad = None

    def grads(self):
        return {name: t.grad for name, t in self.leaves}


class TorchCase:
    """The inputs of one cell on a torch device, and the implementations built on them."""

    def __init__(self, torch, spec: Spec, device, compile_mode="static", compile_ours=False):
        self.torch, self.spec, self.device = torch, spec, device
        self.compile_mode, self.compile_ours = compile_mode, compile_ours and spec.op == "layer"
        alg, B, N = spec.alg, spec.B, spec.N
        self.dtype = getattr(torch, spec.dtype)
        gen = torch.Generator(device=device)
        gen.manual_seed(_seed(spec))
        make_dtype = torch.float64 if spec.dtype == "float64" else torch.float32

        def rnd(*shape, std=1.0):
            t = torch.randn(shape, generator=gen, device=device, dtype=make_dtype)
            return (t * std).to(self.dtype)

        self.x = rnd(alg.D, B, N).requires_grad_()
        self.grad_out = rnd(alg.D, B, N)
        self.layer = None
        if spec.op == "layer":
            self.y = self.weight = None
            from .. import nn as fcnn

            torch.manual_seed(_seed(spec))
            self.layer = fcnn.Layer(
                N,
                alg.metric,
                normalize=spec.normalize,
                use_fc=spec.use_fc,
                precision=spec.precision,
                device=device,
                dtype=self.dtype,
            )
        else:
            self.y = rnd(alg.D, B, N).requires_grad_()
            if spec.op == "sgp":
                self.weight = rnd(N, alg.P, std=1.0 / math.sqrt(alg.n + 1)).requires_grad_()
            else:
                self.weight = rnd(alg.P, N, N, std=1.0 / math.sqrt(N)).requires_grad_()

    # -- implementations

    def ours(self, compiled_cache=None):
        torch, s = self.torch, self.spec
        import flashclifford as fc

        if s.op == "layer":
            if not self.compile_ours:
                return self._layer_impl(OURS, self.layer)
            # kernel_id's cache is a global the graph guards on: fill it before tracing
            ops.kernel_id(s.alg.metric)
            if self.compile_mode == "static":
                call = compile_fn(torch, self.layer, "static", fullgraph=True)
                return self._layer_impl(OURS, self.layer, call, compiled=True)
            metric, normalize, prec, use_fc = s.alg.metric, s.normalize, s.precision, s.use_fc

            def product(x, y, w):  # Layer._product with the weight as an argument
                if use_fc:
                    return fc.gelu_fcgp_norm(x, y, w, metric, normalize, prec)
                return fc.gelu_sgp_norm(x, y, w, metric, normalize)

            return self._layer_fn_impl(OURS, self.layer, product, compiled_cache)

        metric, normalize = s.alg.metric, s.normalize
        if s.op == "sgp":

            def fn(x, y, w):
                return fc.gelu_sgp_norm(x, y, w, metric, normalize)
        else:
            prec = s.precision

            def fn(x, y, w):
                return fc.gelu_fcgp_norm(x, y, w, metric, normalize, prec)

        return TorchImpl(torch, OURS, fn, (self.x, self.y, self.weight), self._leaves(), self.grad_out)

    def baseline(self, name, compiled_cache):
        torch, s = self.torch, self.spec
        reference._tables_torch(s.alg, self.dtype, torch.device(self.device))  # never first inside compile
        alg, normalize = s.alg, s.normalize
        if s.op == "layer":
            layer = self._baseline_layer(einsum=(name == "einsum"))
            if name != "compiled":
                return self._layer_impl(name, layer)
            if self.compile_mode == "static":  # a new compiled module per cell, as before
                return self._layer_impl(name, layer, torch.compile(layer, dynamic=False), compiled=True)
            ref_fn = reference.unfused_fcgp_torch if s.use_fc else reference.unfused_sgp_torch

            def product(x, y, w):  # BaselineLayer._product with the weight as an argument
                return ref_fn(x, y, w, alg, normalize)

            return self._layer_fn_impl(name, layer, product, compiled_cache)
        if name == "einsum":
            ref = reference.sgp_torch if s.op == "sgp" else reference.fcgp_torch
        else:
            ref = reference.unfused_sgp_torch if s.op == "sgp" else reference.unfused_fcgp_torch

        def fn(x, y, w):
            return ref(x, y, w, alg, normalize)

        if name == "compiled":
            # one compiled callable per configuration; static mode recompiles it per shape.
            # precision in the key: a graph must not outlive the matmul precision it was traced in
            key = (s.op, alg.metric, normalize, s.precision)
            if key not in compiled_cache:
                compiled_cache[key] = compile_fn(torch, fn, self.compile_mode)
            fn = compiled_cache[key]
            if self.compile_mode == "dynamic":
                w_dims = (0,) if s.op == "sgp" else (1, 2)  # (N, P) or (P, N_in, N_out)
                mark_dynamic(torch, (self.x, (1, 2)), (self.y, (1, 2)), (self.weight, w_dims))
        compiled = name == "compiled"
        args = (self.x, self.y, self.weight)
        return TorchImpl(torch, name, fn, args, self._leaves(), self.grad_out, compiled=compiled)

    def _leaves(self):
        return [("x", self.x), ("y", self.y), ("weight", self.weight)]

    def _layer_impl(self, name, module, call=None, compiled=False):
        leaves = [("x", self.x)] + [(n, p) for n, p in module.named_parameters()]
        fn = module if call is None else call  # bool(OptimizedModule) would call len() on the module
        return TorchImpl(self.torch, name, fn, (self.x,), leaves, self.grad_out, compiled=compiled)

    def _layer_fn_impl(self, name, layer, product, compiled_cache):
        """--compile dynamic for a layer: Layer.forward as a function of the parameters
        (nn.grade_linear, then `product`), compiled once per configuration and shared by all
        cells. A compiled module would be specialised to its own parameters, whose shapes
        change with N (and nn's input check compares N with a constant). `product` must depend
        on the key only."""
        from .. import nn as fcnn

        torch, s = self.torch, self.spec
        key = (name, "layer", s.alg.metric, s.normalize, s.use_fc, s.precision)
        if key not in compiled_cache:

            def forward(x, linear_weight, linear_bias, gp_weight, grades):
                return product(x, fcnn.grade_linear(x, linear_weight, linear_bias, grades), gp_weight)

            compiled_cache[key] = compile_fn(torch, forward, "dynamic")
        compiled = compiled_cache[key]
        gp_dims = (1, 2) if s.use_fc else (0,)  # (P, N, N) or (N, P)
        mark_dynamic(
            torch,
            (self.x, (1, 2)),
            (layer.linear_weight, (1, 2)),
            (layer.linear_bias, (0,)),
            (layer.gp_weight, gp_dims),
        )
        params = (layer.linear_weight, layer.linear_bias, layer.gp_weight, layer.grades)
        return self._layer_impl(name, layer, lambda x: compiled(x, *params), compiled=True)

    def layer_parts(self):
        """(linear, op): the two halves of nn.Layer.forward as separate no-grad calls on this
        cell's inputs, always eager: nn.grade_linear (the grade-wise linear map: index_select,
        pad, one baddbmm over the D components) and the layer's fused op (Layer._product:
        gelu_sgp_norm / gelu_fcgp_norm) on x and that map's output."""
        from .. import nn as fcnn

        torch, layer, x = self.torch, self.layer, self.x
        lin_args = (layer.linear_weight, layer.linear_bias, layer.grades)
        with torch.no_grad():
            y = fcnn.grade_linear(x, *lin_args)

        def linear():
            with torch.no_grad():
                return fcnn.grade_linear(x, *lin_args)

        def op():
            with torch.no_grad():
                return layer._product(x, y)

        return linear, op

    def _baseline_layer(self, einsum=False):
        from .. import nn as fcnn

        s = self.spec
        cls = _einsum_layer_class(fcnn) if einsum else fcnn.BaselineLayer
        layer = cls(
            s.N,
            s.alg.metric,
            normalize=s.normalize,
            use_fc=s.use_fc,
            precision=s.precision,
            device=self.device,
            dtype=self.dtype,
        )
        layer.load_state_dict(self.layer.state_dict())
        return layer

    # -- the float64 reference on a subset of rows

    def reference(self, rows, grad_rows):
        """float64 NumPy (out, grads) for the batch rows `rows`, with grad_out `grad_rows`
        ((D, R, N) float64) on those rows and zero elsewhere."""
        torch, s = self.torch, self.spec
        idx = torch.as_tensor(rows, device=self.device)

        def sub(t):
            return t.detach().index_select(1, idx).to(torch.float64).cpu().numpy()

        if s.op == "layer":
            from .. import nn as fcnn

            cls = _einsum_layer_class(fcnn)
            ref = cls(s.N, s.alg.metric, normalize=s.normalize, use_fc=s.use_fc, dtype=torch.float64)
            ref.load_state_dict({k: v.detach().cpu().double() for k, v in self.layer.state_dict().items()})
            xs = torch.from_numpy(sub(self.x)).requires_grad_()
            out = ref(xs)
            out.backward(torch.from_numpy(grad_rows))
            grads = {"x": xs.grad.numpy()}
            grads.update({n: p.grad.numpy() for n, p in ref.named_parameters()})
            return out.detach().numpy(), grads
        x, y = sub(self.x), sub(self.y)
        w = self.weight.detach().to(torch.float64).cpu().numpy()
        fwd, bwd = (
            (reference.sgp_np, reference.sgp_backward_np)
            if s.op == "sgp"
            else (reference.fcgp_np, reference.fcgp_backward_np)
        )
        out = fwd(x, y, w, s.alg, s.normalize)
        gx, gy, gw = bwd(grad_rows, x, y, w, s.alg, s.normalize)
        return out, {"x": gx, "y": gy, "weight": gw}

    def masked_grad_out(self, rows, grad_rows):
        """grad_out of the correctness run: `grad_rows` on `rows`, zero elsewhere."""
        torch = self.torch
        g = torch.zeros_like(self.grad_out)
        idx = torch.as_tensor(rows, device=self.device)
        g.index_copy_(1, idx, torch.from_numpy(grad_rows).to(device=self.device, dtype=g.dtype))
        return g

    def to_numpy(self, t, rows=None):
        t = t.detach()
        if rows is not None:
            t = t.index_select(1, self.torch.as_tensor(rows, device=t.device))
        return t.to(self.torch.float64).cpu().numpy()


_einsum_layers: dict = {}


def _einsum_layer_class(fcnn):
    """nn.BaselineLayer with the dense einsum product (reference.sgp_torch / fcgp_torch)."""
    if "cls" not in _einsum_layers:

        class EinsumLayer(fcnn.BaselineLayer):
            def _product(self, x, y):
                ref = reference.fcgp_torch if self.use_fc else reference.sgp_torch
                return ref(x, y, self.gp_weight, self.algebra, self.normalize)

        _einsum_layers["cls"] = EinsumLayer
    return _einsum_layers["cls"]


def bmm_yardstick(torch, spec: Spec, device):
    """(fn, description): torch.bmm doing FCGP's T' products in the cell's precision.

    (T', B, N_in) @ (T', N_in, N_out) into a preallocated output; float32 with precision
    "bf16" runs the bmm in bfloat16, "tf32" under float32 matmul precision "high".
    """
    t = fc_products(spec.alg)
    dt = getattr(torch, spec.dtype)
    if spec.dtype == "float32" and spec.precision == "bf16":
        dt = torch.bfloat16
    gen = torch.Generator(device=device)
    gen.manual_seed(1234)
    a = torch.randn((t, spec.B, spec.N), generator=gen, device=device).to(dt)
    b = torch.randn((t, spec.N, spec.N), generator=gen, device=device).to(dt)
    c = torch.empty((t, spec.B, spec.N), device=device, dtype=dt)
    return (lambda: torch.bmm(a, b, out=c)), f"torch.bmm {t} x ({spec.B}x{spec.N}) @ ({spec.N}x{spec.N}) {dt}"


# --- NumPy (no torch) -------------------------------------------------------------------------


class NumpyImpl:
    def __init__(self, name, fwd, bwd, case):
        self.name, self._fwd, self._bwd, self.case = name, fwd, bwd, case
        self._grads = {}

    def forward(self):
        return self._fwd()

    def forward_backward(self, grad_out=None):
        out = self._fwd()
        g = self.case.grad_out if grad_out is None else grad_out
        gx, gy, gw = self._bwd(g)
        self._grads = {"x": gx, "y": gy, "weight": gw}
        return out

    def pre(self):
        self._grads = {}

    def grads(self):
        return self._grads


class NumpyCase:
    """The framework-free path: flashclifford.ops on NumPy arrays, CPU only."""

    torch = None

    def __init__(self, spec: Spec):
        if spec.op == "layer":
            raise RuntimeError("op=layer needs torch (flashclifford.nn)")
        if spec.dtype not in NUMPY_DTYPES:
            raise TypeError(f"dtype {spec.dtype} has no NumPy type; use float32, float64 or float16")
        self.spec = spec
        alg, B, N = spec.alg, spec.B, spec.N
        rng = np.random.default_rng(_seed(spec))
        dt = np.dtype(spec.dtype)
        self.x = rng.standard_normal((alg.D, B, N)).astype(dt)
        self.y = rng.standard_normal((alg.D, B, N)).astype(dt)
        self.grad_out = rng.standard_normal((alg.D, B, N)).astype(dt)
        if spec.op == "sgp":
            self.weight = (rng.standard_normal((N, alg.P)) / math.sqrt(alg.n + 1)).astype(dt)
        else:
            self.weight = (rng.standard_normal((alg.P, N, N)) / math.sqrt(N)).astype(dt)

    def ours(self, compiled_cache=None):
        s, x, y, w = self.spec, self.x, self.y, self.weight
        metric, normalize = s.alg.metric, s.normalize
        if s.op == "sgp":

            def fwd():
                return ops.sgp_forward(x, y, w, metric, normalize)

            def bwd(g):
                return ops.sgp_backward(g, x, y, w, metric, normalize)
        else:
            prec = s.precision

            def fwd():
                return ops.fcgp_forward(x, y, w, metric, normalize, prec)

            def bwd(g):
                return ops.fcgp_backward(g, x, y, w, metric, normalize, prec)

        return NumpyImpl(OURS, fwd, bwd, self)

    def baseline(self, name, compiled_cache=None):
        if name != "einsum":
            raise RuntimeError(f"baseline {name!r} needs torch")
        s, x, y, w = self.spec, self.x, self.y, self.weight
        fwd_np, bwd_np = (
            (reference.sgp_np, reference.sgp_backward_np)
            if s.op == "sgp"
            else (reference.fcgp_np, reference.fcgp_backward_np)
        )
        return NumpyImpl(
            "einsum",
            lambda: fwd_np(x, y, w, s.alg, s.normalize),
            lambda g: bwd_np(g, x, y, w, s.alg, s.normalize),
            self,
        )

    def reference(self, rows, grad_rows):
        s = self.spec
        x, y = self.x[:, rows].astype(np.float64), self.y[:, rows].astype(np.float64)
        w = self.weight.astype(np.float64)
        fwd, bwd = (
            (reference.sgp_np, reference.sgp_backward_np)
            if s.op == "sgp"
            else (reference.fcgp_np, reference.fcgp_backward_np)
        )
        out = fwd(x, y, w, s.alg, s.normalize)
        gx, gy, gw = bwd(grad_rows, x, y, w, s.alg, s.normalize)
        return out, {"x": gx, "y": gy, "weight": gw}

    def masked_grad_out(self, rows, grad_rows):
        g = np.zeros_like(self.grad_out)
        g[:, rows] = grad_rows
        return g

    def to_numpy(self, a, rows=None):
        a = np.asarray(a)
        return (a[:, rows] if rows is not None else a).astype(np.float64)


def bmm_yardstick_numpy(spec: Spec):
    t = fc_products(spec.alg)
    rng = np.random.default_rng(1234)
    dt = np.dtype(spec.dtype)
    a = rng.standard_normal((t, spec.B, spec.N)).astype(dt)
    b = rng.standard_normal((t, spec.N, spec.N)).astype(dt)
    c = np.empty((t, spec.B, spec.N), dtype=dt)
    return (
        lambda: np.matmul(a, b, out=c)
    ), f"numpy.matmul {t} x ({spec.B}x{spec.N}) @ ({spec.N}x{spec.N}) {dt}"
