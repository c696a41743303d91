"""The sweep: for every cell and pass, check each implementation against the float64
reference, time it, measure its memory and host overhead, and derive the roofline columns.

A cell is (op, algebra, dtype, precision, normalize, B, N); passes are "forward" (no
autograd graph, as in inference) and "forward+backward" (output and every gradient,
grad_out random). One output row per cell x pass x implementation (the `impl` column).

Columns that need a definition (see also timing.py for how times are taken):
  time_us, time_p20_us, time_p80_us  median and 20th/80th percentile of the repetitions
  host_us        host cost of one call (timing.py); host_ok False: the call synchronised
  wall_us        CUDA: wall time per call of back-to-back calls (timing.wall_per_call_cuda)
  peak_mib       CUDA: max_memory_allocated during the pass minus the memory allocated before
                 it (inputs, weights and grad_out already there): forward rows run without
                 autograd; forward+backward rows cover both phases, backward really run.
  peak_fwd_mib, peak_bwd_mib  forward+backward rows: the same delta (still above the inputs)
                 during the graph-recording forward and during the backward alone
  mem_passes     peak_mib / bytes of one (D, B, N) tensor in the cell's dtype
  gbps           SGP: bytes / time, bytes = passes x D x B x N x element size with 3 passes
                 forward (x, y, out) and 8 forward+backward (x, y, out; x, y, grad_out,
                 grad_x, grad_y): the fewest bytes the fused op must move
  frac_copy_bw   gbps over the copy bandwidth measured at the start of the same run
  bmm_us         FCGP: torch.bmm doing the same T' products (impls.bmm_yardstick) in the same
                 precision, same run; bmm_ratio = time / bmm_us (forward) or / (3 bmm_us)
                 (forward+backward); tflops counts 2 T' B N_in N_out per product (x3 fwd+bwd)
  parts_us       layer forward rows: the time of the layer's two halves timed alone, the same way
                 (same timing, same L2 policy): nn.grade_linear (the grade-wise linear map, one
                 baddbmm) plus the fused op (gelu_sgp_norm / gelu_fcgp_norm) on x and its output.
                 Each half starts from a flushed L2 on CUDA, so the sum is the cost of the
                 parts run as separate calls; vs_parts = time / parts_us (the issue's bar:
                 the compiled layer forward <= 1.10 x its parts)
  speedup        this row's time over flashclifford's time in the same cell and pass
                 (how many times faster the fused op is than this implementation)
  mem_ratio      this row's peak_mib over flashclifford's
  err_max_abs, err_rel  against the float64 NumPy reference on a spread subset of batch rows
                 (first and last included): max |a - ref| and ||a - ref|| / ||ref||, the worst
                 over the output and (forward+backward) every gradient; the gradient run uses a
                 grad_out that is zero outside those rows, so the weight gradient is exact too.
  err_tol, err_ok       SPEC section 2 tolerance for the dtype / precision, and rel <= tol
JSON rows only: "parts" (linear_us, op_us: the two halves of parts_us) and, for torch.compile'd
implementations, "new_graphs" (dynamo graphs captured while measuring this row; with
--compile dynamic only the first cell of a configuration, per dtype and grad mode, captures one).
Failed implementations keep their row: status "OOM" (out of memory; the sweep goes on),
"error: ..." or "skipped: ...", with empty numbers.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np

from . import env, impls, timing
from .impls import OURS, Spec

FWD, FWD_BWD = "forward", "forward+backward"
PASSES = (FWD, FWD_BWD)
SGP_PASS_COUNT = {FWD: 3, FWD_BWD: 8}
BMM_COUNT = {FWD: 1, FWD_BWD: 3}

# SPEC section 2: ||out - ref|| / ||ref|| bounds per dtype (and FCGP float32 precision)
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "tf32": 2e-3, "bf16": 2e-2, "float16": 5e-3, "bfloat16": 2e-2}

# rows of the float64 reference: its largest intermediate is about P x D x R x N values
CHECK_BUDGET = 1 << 22

# fmt: off
COLUMNS = [
    "op", "algebra", "dtype", "precision", "normalize", "pass", "batch", "features", "impl", "status",
    "time_us", "time_p20_us", "time_p80_us", "reps", "first_call_ms", "host_us", "host_ok", "wall_us",
    "peak_mib", "peak_fwd_mib", "peak_bwd_mib", "mem_passes",
    "gbps", "frac_copy_bw", "bmm_us", "bmm_ratio", "tflops", "parts_us", "vs_parts",
    "speedup", "mem_ratio",
    "err_max_abs", "err_rel", "err_tol", "err_ok",
    "device", "device_name", "framework", "cache", "commit", "flashclifford", "torch", "timestamp",
]
# fmt: on

# the columns that identify a row (compare.py matches old and new rows on them)
KEY = ("op", "algebra", "dtype", "precision", "normalize", "pass", "batch", "features", "impl")


@dataclass
class Settings:
    op: str = "sgp"
    algebras: list = field(default_factory=lambda: [(1, 1, 1)])
    dtypes: list = field(default_factory=lambda: ["float32"])
    precisions: list = field(default_factory=lambda: ["highest"])
    batches: list = field(default_factory=lambda: [1024, 2048, 4096, 8192])
    features: list = field(default_factory=lambda: [128, 256, 512, 1024])
    passes: list = field(default_factory=lambda: list(PASSES))
    normalize: bool = True
    use_fc: bool = False
    device: str = "cpu"
    framework: str = "torch"
    baselines: list = field(default_factory=lambda: list(impls.BASELINES))
    reps: int = 100
    warmup: int = 10
    max_seconds: float = 5.0
    cache: str = "flush"
    check: bool = True
    host: bool = True
    host_baselines: bool = True
    copy_gib: float | None = None
    progress: bool = True
    # the compiled baseline: "static" (torch.compile(dynamic=False), a graph per shape) or
    # "dynamic" (one graph per configuration, batch and feature sizes symbolic); impls.compile_fn
    compile: str = "static"
    compile_ours: bool = False  # op=layer: our Layer under torch.compile(fullgraph=True) too

    def to_json(self):
        d = asdict(self)
        d["algebras"] = [impls.Algebra.resolve(a).name for a in self.algebras]
        return d


class Progress:
    """tqdm when installed, else a plain counter on stderr."""

    def __init__(self, total, enabled=True):
        self.total, self.n, self.enabled, self.bar = total, 0, enabled, None
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, file=sys.stderr, unit="meas", dynamic_ncols=True)
            except ImportError:
                pass
        self.tty = sys.stderr.isatty()

    def step(self, label):
        self.n += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
        elif self.tty:
            sys.stderr.write(f"\r[{self.n}/{self.total}] {label:<70.70}")
            sys.stderr.flush()
        else:
            sys.stderr.write(f"[{self.n}/{self.total}] {label}\n")

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.tty:
            sys.stderr.write("\n")


def cells(s: Settings):
    """The Specs of the sweep, in order: algebra, dtype, precision, B, N."""
    out = []
    for alg in s.algebras:
        for dtype in s.dtypes:
            fc_like = s.op == "fcgp" or s.op == "layer"
            precs = s.precisions if (dtype == "float32" and fc_like) else [None]
            for prec in precs:
                for B in s.batches:
                    for N in s.features:
                        out.append(Spec(s.op, alg, dtype, prec, s.normalize, B, N, s.use_fc))
    return out


def tolerance(spec: Spec):
    if spec.dtype == "float32" and spec.precision in ("tf32", "bf16"):
        return TOLERANCE[spec.precision]
    return TOLERANCE[spec.dtype]


def check_rows(spec: Spec):
    """Batch rows checked against the float64 reference: spread over B, first and last included."""
    R = min(spec.B, max(4, CHECK_BUDGET // (spec.alg.P * spec.alg.D * spec.N)))
    return np.unique(np.linspace(0, spec.B - 1, R).round().astype(np.int64))


def _rel(a, ref):
    if not np.all(np.isfinite(a)):
        return math.inf, math.inf
    diff = a - ref
    den = np.linalg.norm(ref)
    rel = float(np.linalg.norm(diff) / den) if den > 0 else float(np.linalg.norm(diff))
    return float(np.max(np.abs(diff))) if diff.size else 0.0, rel


@contextmanager
def _matmul_precision(torch, spec: Spec):
    if torch is None:
        yield
        return
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(impls.MATMUL_PRECISION[spec.precision])
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def _compiling(s: Settings):
    return "compiled" in s.baselines or (s.compile_ours and s.op == "layer")


@contextmanager
def _dynamo_settings(torch, s: Settings):
    """torch.compile settings for the sweep, restored after it.

    Raised recompile limits: static mode compiles a graph per shape, dtype and grad mode, all
    on a few code objects. A hit limit raises (fail_on_recompile_limit_hit) instead of running
    the function eagerly from then on, which would time eager under the name "compiled"; errors
    are never suppressed. Dynamic mode: parameters (nn.Layer's weights, passed to the compiled
    function) may have symbolic shapes, and sizes that happen to be equal in the first cell
    (B = N) are not merged into one symbol (duck shaping), which would recompile for B != N.
    """
    if torch is None or not _compiling(s):
        yield
        return
    import torch._dynamo.config as dynamo_config

    # *_cache_size_limit: the names of the same limits in older torch
    limits = ("recompile_limit", "accumulated_recompile_limit")
    limits += ("cache_size_limit", "accumulated_cache_size_limit")
    changes = dict.fromkeys(limits, 4096)
    changes.update(fail_on_recompile_limit_hit=True, suppress_errors=False)
    if s.compile == "dynamic":
        changes["force_parameter_static_shapes"] = False
    known = dynamo_config.get_config_copy()
    with ExitStack() as stack:
        stack.enter_context(dynamo_config.patch(**{k: v for k, v in changes.items() if k in known}))
        if s.compile == "dynamic":
            try:
                import torch.fx.experimental._config as fx_config

                stack.enter_context(fx_config.patch(use_duck_shape=False))
            except (ImportError, AttributeError, KeyError):  # older torch: at worst one more graph
                pass
        yield


def _dynamo_graphs():
    """Graphs dynamo has captured in this process (None when the counter is not available)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:
        return None


class Sweep:
    def __init__(self, settings: Settings, torch, meta: dict, log=None):
        self.s, self.torch, self.meta = settings, torch, meta
        self.cuda = settings.device == "cuda"
        self.log = log or (lambda msg: print(msg, file=sys.stderr))
        self.compiled_cache: dict = {}
        self.host_cache: dict = {}
        self.flush = None
        self.copy_bw = None
        self.rows: list = []

    # -- helpers

    def _is_oom(self, e):
        if isinstance(e, MemoryError):
            return True
        t = self.torch
        return t is not None and isinstance(e, getattr(t, "OutOfMemoryError", ()))

    def _free(self, force=False):
        # CUDA: return cached blocks so the next cell (and its OOM verdict) starts clean.
        # CPU: reference counting already freed the tensors; gc.collect costs ~0.1 s with torch loaded.
        if self.cuda or force:
            gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _status(self, e):
        if self._is_oom(e):
            return "OOM"
        msg = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
        return "error: " + msg[:200]

    def _case(self, spec):
        s = self.s
        if s.framework == "numpy":
            return impls.NumpyCase(spec)
        return impls.TorchCase(self.torch, spec, s.device, s.compile, s.compile_ours)

    def _impl(self, case, name):
        if name == OURS:
            return case.ours(self.compiled_cache)
        return case.baseline(name, self.compiled_cache)

    def _time(self, fn, pre):
        s = self.s
        return timing.measure(
            fn,
            pre,
            torch=self.torch,
            cuda=self.cuda,
            warmup=s.warmup,
            reps=s.reps,
            max_seconds=s.max_seconds,
            flush=self.flush,
        )

    # -- the run

    def run(self):
        s, torch = self.s, self.torch
        if self.cuda and s.cache in ("flush", "flush-dirty"):
            self.flush = timing.Flusher(torch, torch.cuda.current_device(), dirty=s.cache == "flush-dirty")
        self.log("measuring copy bandwidth ...")
        self.copy_bw = timing.copy_bandwidth(torch, self.cuda, s.copy_gib)
        self.meta["copy_bandwidth"] = self.copy_bw
        names = [OURS] + [b for b in s.baselines if b in impls.BASELINES]
        specs = cells(s)
        progress = Progress(len(specs) * len(s.passes) * len(names), s.progress)
        started = time.perf_counter()
        graphs0 = _dynamo_graphs() if _compiling(s) else None
        try:
            with _dynamo_settings(torch, s):
                for spec in specs:
                    with _matmul_precision(torch, spec):
                        self._cell(spec, names, progress)
        finally:
            progress.close()
        if graphs0 is not None:
            self.meta["dynamo_graphs"] = _dynamo_graphs() - graphs0
        self.meta["copy_bandwidth_end"] = timing.copy_bandwidth(torch, self.cuda, s.copy_gib)
        self.meta["wall_seconds"] = round(time.perf_counter() - started, 2)
        self.meta["load_average_end"] = env.load_average()
        if self.cuda:
            self.meta["gpu_state_end"] = env.gpu_state(torch.cuda.current_device())
        return self.rows

    def _cell(self, spec: Spec, names, progress):
        s = self.s
        cell_rows = {p: [] for p in s.passes}
        try:
            case = self._case(spec)
        except Exception as e:  # the inputs themselves do not fit, or the op cannot run here
            status = self._status(e)
            self.log(f"{spec.label()}: {status}")
            for p in s.passes:
                for name in names:
                    progress.step(f"{spec.label()} {p} {name}")
                    self.rows.append(self._row(spec, p, name, status))
            self._free()
            return
        ref = self._reference(case, spec) if s.check else None
        # the cell's yardstick: FCGP's torch.bmm seconds, the layer's (linear, op) seconds
        yard = None
        if spec.op == "fcgp":
            yard = self._bmm(spec)
        elif spec.op == "layer" and FWD in s.passes:
            yard = self._parts(case, spec)
        for name in names:
            try:
                impl = self._impl(case, name)
            except Exception as e:
                impl, status = None, self._status(e)
                self.log(f"{spec.label()} {name}: {status}")
            for p in s.passes:
                progress.step(f"{spec.label()} {p} {name}")
                if impl is None:
                    row = self._row(spec, p, name, status)
                else:
                    row = self._measure(case, impl, spec, p, ref, yard)
                cell_rows[p].append(row)
                self.rows.append(row)
            del impl
            self._free()
        for p in s.passes:
            self._relative(cell_rows[p])
        del case, ref
        self._free()

    def _reference(self, case, spec):
        """(rows, grad_out for the check run, float64 reference out and grads) or an error string."""
        try:
            rows = check_rows(spec)
            rng = np.random.default_rng(7)
            g = rng.standard_normal((spec.alg.D, len(rows), spec.N))
            gmask = case.masked_grad_out(rows, g)
            g = case.to_numpy(gmask, rows)  # rounded to the cell's dtype, as the impls see it
            out, grads = case.reference(rows, g)
            return rows, gmask, out, grads
        except Exception as e:
            self.log(f"{spec.label()}: reference failed: {self._status(e)}")
            return None

    def _bmm(self, spec):
        try:
            if self.s.framework == "numpy":
                fn, desc = impls.bmm_yardstick_numpy(spec)
            else:
                fn, desc = impls.bmm_yardstick(self.torch, spec, self.s.device)
            t = self._time(fn, None)
            del fn
            self._free()
            return t.p50
        except Exception as e:
            self.log(f"{spec.label()}: bmm yardstick: {self._status(e)}")
            self._free()
            return None

    def _parts(self, case, spec):
        """(seconds of nn.grade_linear, seconds of the fused op), each timed alone, or None."""
        try:
            linear, op = case.layer_parts()
            t_linear = self._time(linear, None).p50
            t_op = self._time(op, None).p50
            del linear, op
            self._free()
            return t_linear, t_op
        except Exception as e:
            self.log(f"{spec.label()}: layer parts: {self._status(e)}")
            self._free()
            return None

    def _row(self, spec, p, name, status):
        row = dict.fromkeys(COLUMNS)
        row.update(
            op=spec.op if not (spec.op == "layer" and spec.use_fc) else "layer-fc",
            algebra=spec.alg.name,
            dtype=spec.dtype,
            precision=spec.precision or "",
            normalize=spec.normalize,
            batch=spec.B,
            features=spec.N,
            impl=name,
            status=status,
            device=self.s.device,
            framework=self.s.framework,
            cache=self.s.cache if self.cuda else "",
            device_name=self.meta.get("gpu") or self.meta.get("cpu"),
            commit=self.meta.get("commit"),
            flashclifford=self.meta.get("flashclifford"),
            torch=self.meta.get("torch"),
            timestamp=self.meta.get("timestamp"),
        )
        row["pass"] = p
        return row

    def _measure(self, case, impl, spec, p, ref, yard):
        row = self._row(spec, p, impl.name, "ok")
        fn = impl.forward if p == FWD else impl.forward_backward
        first = None
        compiled = getattr(impl, "compiled", False)
        graphs0 = _dynamo_graphs() if compiled else None
        try:
            # the NumPy einsum baseline is the reference itself: nothing to check
            if ref is not None and not (self.s.framework == "numpy" and impl.name == "einsum"):
                errors, first = self._errors(case, impl, spec, p, ref)
                row.update(errors)
            s = self.s
            t = timing.measure(
                fn,
                impl.pre,
                torch=self.torch,
                cuda=self.cuda,
                warmup=s.warmup,
                reps=s.reps,
                max_seconds=s.max_seconds,
                flush=self.flush,
                first=first,
            )
            row["times_us"] = [round(v * 1e6, 3) for v in t.times]
            row.update(
                time_us=t.p50 * 1e6,
                time_p20_us=t.p20 * 1e6,
                time_p80_us=t.p80 * 1e6,
                reps=t.reps,
                first_call_ms=t.first * 1e3,
            )
            if self.cuda:
                row.update(self._memory(impl, p, spec))
            if self.s.host and (self.s.host_baselines or impl.name == OURS):
                row.update(self._host(case, impl, spec, p, fn, t.p50))
            if graphs0 is not None:
                row["new_graphs"] = _dynamo_graphs() - graphs0
                if _dynamo_graphs() == 0:  # TORCH_COMPILE_DISABLE and the like: this timed eager
                    raise RuntimeError("torch.compile captured no graph (compilation disabled?)")
        except Exception as e:
            row["status"] = self._status(e)
            self.log(f"{spec.label()} {p} {impl.name}: {row['status']}")
            impl.pre()
            self._free(force=True)
            return row
        impl.pre()
        self._roofline(row, spec, p, yard)
        return row

    def _errors(self, case, impl, spec, p, ref):
        """(error columns, seconds of the checked call: the first call of the impl)."""
        rows, gmask, ref_out, ref_grads = ref
        impl.pre()
        self._sync()
        t0 = time.perf_counter()
        out = impl.forward() if p == FWD else impl.forward_backward(gmask)
        self._sync()
        seconds = time.perf_counter() - t0
        if p == FWD:
            got = {"out": case.to_numpy(out, rows)}
            want = {"out": ref_out}
        else:
            got = {"out": case.to_numpy(out, rows)}
            want = {"out": ref_out}
            for name, g in impl.grads().items():
                if g is None or name not in ref_grads:
                    continue
                got["grad_" + name] = case.to_numpy(g, rows if name in ("x", "y") else None)
                want["grad_" + name] = ref_grads[name]
        del out
        impl.pre()
        per = {k: _rel(got[k], want[k]) for k in want}
        worst_abs = max(v[0] for v in per.values())
        worst_rel = max(v[1] for v in per.values())
        tol = tolerance(spec)
        return {
            "err_max_abs": worst_abs,
            "err_rel": worst_rel,
            "err_tol": tol,
            "err_ok": bool(worst_rel <= tol),
            "errors": {k: {"max_abs": a, "rel": r} for k, (a, r) in per.items()},
        }, seconds

    def _memory(self, impl, p, spec):
        torch = self.torch
        impl.pre()
        gc.collect()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        mib = 2.0**20
        if p == FWD:
            out = impl.forward()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            del out
            res = {"peak_mib": peak / mib}
        else:
            out = impl.forward_grad()
            torch.cuda.synchronize()
            fwd = torch.cuda.max_memory_allocated() - base
            torch.cuda.reset_peak_memory_stats()
            out.backward(impl.grad_out)
            torch.cuda.synchronize()
            bwd = torch.cuda.max_memory_allocated() - base
            del out
            peak = max(fwd, bwd)
            res = {"peak_mib": peak / mib, "peak_fwd_mib": fwd / mib, "peak_bwd_mib": bwd / mib}
        impl.pre()
        res["mem_passes"] = peak / spec.multivector_bytes
        return res

    def _host(self, case, impl, spec, p, fn, seconds):
        if self.cuda:
            # few calls: they must fit the launch queue behind the sleep kernel (about 1000 launches)
            calls = 10 if impl.name == OURS else 4
            host, ok = timing.host_overhead_cuda(fn, impl.pre, self.torch, calls=calls)
            n = max(1, min(20, int(0.1 / max(seconds, 1e-6))))
            wall = timing.wall_per_call_cuda(fn, impl.pre, self.torch, calls=n)
            return {"host_us": host * 1e6, "host_ok": ok, "wall_us": wall * 1e6}
        if getattr(impl, "compiled", False):
            return {}  # a new shape would recompile; the CPU method needs the tiny shape
        key = (spec.tiny().label(), spec.normalize, p, impl.name)
        if key not in self.host_cache:
            tiny_case = self._case(spec.tiny())
            tiny = self._impl(tiny_case, impl.name)
            tfn = tiny.forward if p == FWD else tiny.forward_backward
            t = timing.measure(
                tfn, tiny.pre, cuda=False, warmup=3, reps=200, max_seconds=min(0.2, self.s.max_seconds)
            )
            self.host_cache[key] = t.p50
        return {"host_us": self.host_cache[key] * 1e6, "host_ok": True}

    def _roofline(self, row, spec, p, yard):
        t = row["time_us"] * 1e-6
        if spec.op == "sgp":
            nbytes = SGP_PASS_COUNT[p] * spec.multivector_bytes
            row["gbps"] = nbytes / t / 1e9
            row["frac_copy_bw"] = nbytes / t / self.copy_bw["bytes_per_s"]
        elif spec.op == "fcgp":
            flops = 2.0 * impls.fc_products(spec.alg) * spec.B * spec.N * spec.N * BMM_COUNT[p]
            row["tflops"] = flops / t / 1e12
            if yard:
                row["bmm_us"] = yard * 1e6
                row["bmm_ratio"] = t / (yard * BMM_COUNT[p])
        elif spec.op == "layer" and p == FWD and yard:
            row["parts_us"] = sum(yard) * 1e6
            row["vs_parts"] = t / sum(yard)
            row["parts"] = {"linear_us": yard[0] * 1e6, "op_us": yard[1] * 1e6}

    @staticmethod
    def _relative(rows):
        ours = next((r for r in rows if r["impl"] == OURS and r["status"] == "ok"), None)
        if ours is None:
            return
        for r in rows:
            if r["status"] != "ok":
                continue
            if ours["time_us"]:
                r["speedup"] = r["time_us"] / ours["time_us"]
            if ours.get("peak_mib") and r.get("peak_mib") is not None:
                r["mem_ratio"] = r["peak_mib"] / ours["peak_mib"]
