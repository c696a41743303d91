"""Property-based fuzzing of flashclifford.ops (NumPy) and the torch ops (torch CPU) (issue 7).

Shapes as SPEC section 2: x, y (D, *batch, N_in); out (D, *batch, N_out); sgp weight (N, P);
fcgp weight (P, N_in, N_out).

Hypothesis draws the call: op and pass, normalize, gate, algebra (as an Algebra, a metric
tuple or an int, sometimes one without kernels), batch dims (0 to 3 of them, sizes 0 to 3),
features (0 to 5), out= (given, wrong, read-only, aliasing x), and for every array argument
possibly one fault: another dtype (int, bool, complex,
float16, big-endian, object), a layout (Fortran order, a strided or negatively strided or
broadcast view), another shape, an object that is not an array, a producer whose
__dlpack__ / __dlpack_device__ raises or returns garbage, or a hand-forged DLPack capsule
(another device, NULL data, bad version, vector dtype, too many dims). NaN / Inf may be
injected into the float inputs.

Every call must either return the float64 reference's answer or raise exactly the type the
checks of csrc/bind_ops.c and csrc/array.c raise for the first bad argument (SPEC section
5; `expected_error` models their order: x, y, weight, grad_out, out; per array: import,
dtype, device, shape, contiguity). With NaN / Inf the outputs follow IEEE arithmetic
(`forward_ieee`, the SPEC formulas summed term by term) and never reach another batch row:
rows whose inputs are finite equal the reference.

Examples are derandomized (fixed for CI) and no example database is written;
FLASHCLIFFORD_FUZZ_EXAMPLES=n explores n fresh examples per test instead.
"""

from __future__ import annotations

import ctypes
import inspect
import math
import os
import warnings
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import FP32_COND_FACTOR, HAVE_TORCH, REL_TOL, input_sensitivity, rel_err
from dlpack_forge import KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, KDL_ROCM, Forged, mark_consumed
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import flashclifford as fc
from flashclifford import reference
from flashclifford.algebra import KERNEL_METRICS, Algebra

ALGS = [Algebra(m) for m in KERNEL_METRICS]
# gate=False (the plain product) is fuzzed too where the API takes it
OPS_GATE = "gate" in inspect.signature(fc.ops.sgp_forward).parameters
# CI runs a fixed (derandomized) set of examples. FLASHCLIFFORD_FUZZ_EXAMPLES=n runs n examples
# per fuzz test with fresh randomness, to explore further by hand. No "explain" phase: it
# imports libcst and costs seconds per failure.
_EXPLORE = int(os.environ.get("FLASHCLIFFORD_FUZZ_EXAMPLES", "0"))


def fuzz_settings(examples):
    return settings(max_examples=_EXPLORE or examples, deadline=None, derandomize=not _EXPLORE, database=None,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Per dtype: relative error bound for forward / gradients. float64 and float32 as
# conftest.REL_TOL (float32 raised by its conditioning, see `check_close`). float16 and
# bfloat16 (torch ops only: computed in float32, output rounded) are SPEC's forward bounds,
# gradients 10x (tests/test_torch_ops.py uses the same).
HALF_TOL = {"float16": (5e-3, 5e-2), "bfloat16": (2e-2, 2e-1)}


# ---------------------------------------------------------------------------------------
# what the library should do


@dataclass
class Arg:
    """One array argument as the library will see it."""

    obj: object
    import_error: type | None = None  # raised while importing it (not an array, bad capsule)
    dtype: str = "float64"  # "float32", "float64", "float16", "bfloat16" or "other"
    shape: tuple = ()
    contiguous: bool = True
    device: str = "cpu"
    readonly: bool = False
    values: np.ndarray | None = None  # float64 values, for the reference
    forged: Forged | None = None

    def base_array(self):
        """The NumPy array behind the argument (for overlap), or an empty one."""
        a = self.forged.array if self.forged is not None else self.obj
        return a if isinstance(a, np.ndarray) else np.empty(0)


def lib_contiguous(a: np.ndarray) -> bool:
    """C-contiguity as csrc/array.c's fill_view judges it: strides of size-1 dims and of
    arrays with at most one element do not matter."""
    if a.size <= 1:
        return True
    expected = 1
    for d in reversed(range(a.ndim)):
        if a.shape[d] != 1 and a.strides[d] != expected * a.itemsize:
            return False
        expected *= a.shape[d]
    return True


def expected_error(alg, op, backward, args: dict, n_out):
    """The exception type the call must raise, or None. args: name -> Arg, in call order."""
    x = args["x"]
    if x.import_error:
        return x.import_error
    if x.dtype == "other":
        return TypeError
    if len(x.shape) < 2 or x.shape[0] != alg.D:
        return ValueError
    if not x.contiguous:
        return ValueError
    if x.device != "cpu":
        return RuntimeError  # CPU-only build, no such GPU, or an unsupported device
    if x.dtype not in ("float32", "float64"):
        return TypeError  # float16 / bfloat16: not on the CPU backend
    batch, n_in = x.shape[1:-1], x.shape[-1]
    if n_out is None:
        n_out = n_in
    want = {
        "y": x.shape,
        "weight": (n_in, alg.P) if op == "sgp" else None,
        "grad_out": (alg.D, *batch, n_out),
        "out": (alg.D, *batch, n_out),
    }
    for name in ("y", "weight", "grad_out", "out"):
        a = args.get(name)
        if a is None:
            continue
        if a.import_error:
            return a.import_error
        if a.dtype != x.dtype:
            return TypeError
        if a.device != "cpu":
            return RuntimeError
        if name == "weight" and op == "fcgp":
            if len(a.shape) != 3 or a.shape[:2] != (alg.P, n_in):
                return ValueError
            n_out = a.shape[2]
            want["grad_out"] = want["out"] = (alg.D, *batch, n_out)
        elif a.shape != want[name]:
            return ValueError
        if not a.contiguous:
            return ValueError
        if name == "out":
            if a.readonly:
                return ValueError
            if any(np.shares_memory(a.base_array(), args[n].base_array()) for n in ("x", "y", "weight")):
                return ValueError
    return None


# ---------------------------------------------------------------------------------------
# IEEE semantics of the forward, for NaN / Inf inputs


def forward_ieee(alg, op, x, y, w, normalize, gate=True):
    """SPEC section 2's forward in float64, summed term by term over the nonzero Cayley
    entries only (a dense einsum would add 0 * Inf = NaN for every absent term), and the
    grade norm over the blades of each grade with their signs (s_A = 0 included, as SPEC
    writes it). Order of sums does not change which elements are NaN / Inf / finite.
    x, y: (D, B, N); w: (N, P) or (P, N, M). Returns (D, B, M)."""
    with np.errstate(all="ignore"):
        xg, yg = (reference.mvgelu_np(x), reference.mvgelu_np(y)) if gate else (x, y)
        D, B = x.shape[:2]
        M = w.shape[2] if op == "fcgp" else x.shape[2]
        o = np.zeros((D, B, M))
        for i, j, k in np.argwhere(alg.cayley != 0):
            c, p = alg.cayley[i, j, k], alg.path_index[i, j, k]
            if op == "sgp":
                o[j] += c * w[:, p] * xg[i] * yg[k]
            else:
                o[j] += c * np.einsum("bn,nm->bm", xg[i] * yg[k], w[p])
        if not normalize or M == 0:
            return o
        out = np.empty_like(o)
        for g in range(alg.G):
            blades = np.flatnonzero(alg.grades == g)
            t = sum(alg.grade_signs[a] * o[a] * o[a] for a in blades)  # (B, M)
            r = np.sqrt(np.abs(t).sum(axis=-1) / M + reference.NORM_EPS)  # (B,)
            out[blades] = o[blades] * (1.0 / r)[None, :, None]
        return out


def value_class(a):
    """0 finite, 1 NaN, 2 +Inf, 3 -Inf, elementwise."""
    a = np.asarray(a, np.float64)
    return np.select([np.isnan(a), a == np.inf, a == -np.inf], [1, 2, 3], 0)


# ---------------------------------------------------------------------------------------
# comparing with the reference


def check_close(got, want_fn, args, dtype, what, grad=False, index=None):
    """rel_err(got, want_fn(*args)) within the dtype's bound; float32 / float64 bounds are
    raised to FP32_COND_FACTOR times the reference's own sensitivity to input rounding when
    the inputs are ill conditioned (an indefinite grade norm that nearly cancels), as
    conftest.assert_rel does for float32."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the mean over zero output features (N_out = 0)
        want = want_fn(*args)
    if index is not None:
        want = want[index]
    err = rel_err(got, want)
    if dtype in HALF_TOL:
        tol = HALF_TOL[dtype][1 if grad else 0]
    else:
        tol = REL_TOL[np.dtype(dtype)]
    if err > tol and np.isfinite(err):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            sens = input_sensitivity(want_fn, *args)
        sens = sens[index] if index is not None else sens[0]
        # input_sensitivity measures relative 2^-24 noise; float64 rounding is 2^-53
        scale = 1.0 if dtype != "float64" else 2.0**-29
        tol = max(tol, FP32_COND_FACTOR * sens * scale)
    assert err <= tol, f"{what}: relative error {err:.3e} > {tol:.3e} ({dtype})"


def rows(a):
    """(D, *batch, N) -> (D, B, N); also for B = 0 or N = 0, where -1 is ambiguous."""
    return a.reshape(a.shape[0], math.prod(a.shape[1:-1]), a.shape[-1])


def row_mask(*arrays):
    """(B,) True for batch rows where every array (D, B, N) is finite."""
    ok = None
    for a in arrays:
        m = np.all(np.isfinite(a), axis=(0, 2))
        ok = m if ok is None else ok & m
    return ok


def check_forward(alg, op, normalize, x, y, w, out, dtype, gate=True):
    """out against the reference: clean rows to tolerance, non-finite rows by IEEE class."""
    D, n_out = alg.D, out.shape[-1]
    batch = x.shape[1:-1]
    x3, y3, o3 = rows(x), rows(y), rows(np.asarray(out, np.float64))
    assert out.shape == (D, *batch, n_out)
    ref_fn = reference.sgp_np if op == "sgp" else reference.fcgp_np
    if np.all(np.isfinite(w)):
        clean = row_mask(x3, y3)
        check_close(o3[:, clean], lambda a, b, c: ref_fn(a, b, c, alg, normalize, gate=gate),
                    (x3[:, clean], y3[:, clean], w), dtype, f"{op} forward (finite rows)")
    if not (np.all(np.isfinite(x3)) and np.all(np.isfinite(y3)) and np.all(np.isfinite(w))):
        ieee = forward_ieee(alg, op, x3, y3, w, normalize, gate)
        mismatch = value_class(o3) != value_class(ieee)
        assert not mismatch.any(), (
            f"{op} forward: NaN/Inf pattern differs from IEEE at {np.argwhere(mismatch)[:5].tolist()}: "
            f"got {o3[mismatch][:5]}, IEEE {ieee[mismatch][:5]}"
        )
        if dtype == "float64":
            fin = np.isfinite(ieee)
            np.testing.assert_allclose(o3[fin], ieee[fin], rtol=1e-9, atol=1e-9 * (1 + np.abs(ieee[fin]).max(
                initial=0)))


def check_backward(alg, op, normalize, gout, x, y, w, grads, dtype, gate=True):
    """grad_x, grad_y on finite rows always; grad_weight (a sum over rows) when all is finite."""
    gx, gy, gw = (np.asarray(g, np.float64) for g in grads)
    assert gx.shape == x.shape and gy.shape == y.shape and gw.shape == w.shape
    x3, y3, g3 = rows(x), rows(y), rows(gout)
    if not np.all(np.isfinite(w)):
        return
    clean = row_mask(x3, y3, g3)
    all_clean = bool(clean.all())
    ref_fn = reference.sgp_backward_np if op == "sgp" else reference.fcgp_backward_np

    def ref(g, a, b, c):
        return ref_fn(g, a, b, c, alg, normalize, gate=gate)

    sub = (g3[:, clean], x3[:, clean], y3[:, clean], w)
    for idx, (name, got) in enumerate((("grad_x", gx), ("grad_y", gy))):
        got3 = rows(got)[:, clean]
        check_close(got3, ref, sub, dtype, f"{op} {name} (finite rows)", grad=True, index=idx)
    if all_clean:
        check_close(gw, ref, sub, dtype, f"{op} grad_weight", grad=True, index=2)


# ---------------------------------------------------------------------------------------
# producers that are not arrays, or are broken


class RaisingDLPack:
    def __init__(self, exc):
        self.exc = exc

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        raise self.exc("producer failed")


class GarbageDLPack:
    def __init__(self, value):
        self.value = value

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.value


class GarbageDevice:
    def __init__(self, value):
        self.value = value

    def __dlpack_device__(self):
        if isinstance(self.value, type):
            raise self.value("no device")
        return self.value

    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be called after a bad __dlpack_device__")


class NoDevice:
    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be called without __dlpack_device__")


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_OTHER_NAME = b"not_a_dltensor"
_dummy = ctypes.c_int64(0)


def foreign_capsule():
    """A capsule that is not a DLPack tensor (no destructor: it owns nothing)."""
    return _capsule_new(ctypes.addressof(_dummy), _OTHER_NAME, None)


def consumed_capsule():
    """A DLPack capsule some other consumer already took."""
    f = Forged(np.zeros((2, 2)))
    cap = f.__dlpack__(max_version=(1, 3))
    mark_consumed(cap)
    return cap


NOT_ARRAYS = [
    lambda: None,
    lambda: 3.0,
    lambda: "x",
    lambda: b"x",
    lambda: [[1.0, 2.0]],
    lambda: object(),
    lambda: np.float64(1.0),  # NumPy scalars have no __dlpack__
    lambda: RaisingDLPack(RuntimeError),
    lambda: RaisingDLPack(TypeError),
    lambda: RaisingDLPack(BufferError),
    lambda: RaisingDLPack(ValueError),
    lambda: GarbageDLPack("capsule?"),
    lambda: GarbageDLPack(42),
    lambda: GarbageDLPack(None),
    lambda: GarbageDLPack(foreign_capsule()),
    lambda: GarbageDLPack(consumed_capsule()),
    lambda: GarbageDevice("cpu"),
    lambda: GarbageDevice((1,)),
    lambda: GarbageDevice((1, 0, 0)),
    lambda: GarbageDevice((2**40, 0)),
    lambda: GarbageDevice(("a", 0)),
    lambda: GarbageDevice(None),
    lambda: GarbageDevice(RuntimeError),
    lambda: NoDevice(),
]


# ---------------------------------------------------------------------------------------
# building the arguments

NP_FLOATS = {"float32": np.float32, "float64": np.float64, "float16": np.float16}
NP_OTHER = ["int32", "int64", "uint8", "bool", "complex64", "complex128"]
NP_IMPORT_FAIL = [">f8", ">f4", "object", "datetime64[s]"]  # NumPy's __dlpack__ refuses these


def make_values(rng, shape, nonfinite, specials=(np.nan, np.inf, -np.inf)):
    v = np.asarray(rng.standard_normal(shape))
    if nonfinite and v.size:
        count = int(rng.integers(1, 4))
        flat = v.reshape(-1)
        idx = rng.integers(0, v.size, size=count)
        flat[idx] = rng.choice(specials, size=count)
    return v


def layout(draw, arr, kind):
    """A view of arr's values with the same shape in another memory layout."""
    if arr.ndim == 0 or kind == "c":
        return arr
    axis = draw(st.integers(0, arr.ndim - 1))
    if kind == "F":
        return np.asfortranarray(arr)
    if kind == "step":
        big = np.zeros(arr.shape[:axis] + (2 * arr.shape[axis],) + arr.shape[axis + 1:], arr.dtype)
        idx = (slice(None),) * axis + (slice(None, None, 2),)
        big[idx] = arr
        return big[idx]
    if kind == "neg":
        return np.flip(np.flip(arr, axis).copy(), axis)
    if kind == "bcast":  # stride 0: every entry along axis is the first one; read-only
        if arr.shape[axis] == 0:
            return arr
        return np.broadcast_to(arr.take([0], axis=axis), arr.shape)
    raise AssertionError(kind)


def numpy_arg(draw, rng, shape, dtype, nonfinite, fault, specials=(np.nan, np.inf, -np.inf)):
    """An Arg for a NumPy array of this shape and dtype, with at most one fault applied."""
    if fault == "not_array":
        return Arg(obj=draw(st.sampled_from(NOT_ARRAYS))(), import_error=TypeError)
    if fault == "forged":
        return forged_arg(draw, rng, shape, dtype)
    if fault == "shape":
        shape = draw(st.sampled_from(_shape_variants(shape)))
    values = make_values(rng, shape, nonfinite, specials)
    if fault == "dtype":
        dt = draw(st.sampled_from(list(NP_FLOATS) + NP_OTHER + NP_IMPORT_FAIL))
        if dt in NP_IMPORT_FAIL:
            arr = values.astype(dt) if dt != "datetime64[s]" else np.zeros(shape, dt)
            return Arg(obj=arr, import_error=TypeError)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            arr = values.astype(dt)
        name = dt if dt in NP_FLOATS else "other"
    else:
        arr = values.astype(NP_FLOATS[dtype])
        name = dtype
    kind = draw(st.sampled_from(["F", "step", "neg", "bcast"])) if fault == "layout" else "c"
    arr = layout(draw, arr, kind)
    if fault == "readonly":
        arr = arr.copy()
        arr.setflags(write=False)
    vals = arr.astype(np.float64) if name in NP_FLOATS else None
    return Arg(obj=arr, dtype=name, shape=arr.shape, contiguous=lib_contiguous(arr),
               readonly=not arr.flags.writeable, values=vals)


def _shape_variants(shape):
    s = list(shape)
    out = [tuple(s[:-1]), tuple(s + [1]), tuple(s[:-1] + [s[-1] + 1]) if s else (1,)]
    if s:
        out.append(tuple([s[0] + 1] + s[1:]))
    return [o for o in out if o != tuple(shape)] or [(7,)]


def forged_arg(draw, rng, shape, dtype):
    """A hand-built DLPack capsule over a valid array, with one field made wrong (or not)."""
    arr = np.ascontiguousarray(rng.standard_normal(shape).astype(NP_FLOATS.get(dtype, np.float64)))
    name = dtype if dtype in NP_FLOATS else "float64"
    kind = draw(st.sampled_from(["ok", "legacy", "cuda", "rocm", "claim", "null", "version", "lanes", "bf16",
                                 "ndim", "negshape"]))
    base = dict(shape=arr.shape, dtype=name, values=arr.astype(np.float64))
    if kind == "ok":
        f = Forged(arr)
        return Arg(obj=f, forged=f, **base)
    if kind == "legacy":
        f = Forged(arr, legacy=True, accepts_max_version=False)
        return Arg(obj=f, forged=f, **base)
    if kind in ("cuda", "rocm"):  # never dereferenced: refused before any read
        dev = KDL_CUDA if kind == "cuda" else KDL_ROCM
        f = Forged(arr, device=(dev, 0), data=0xDEAD0000)
        return Arg(obj=f, forged=f, device=kind, **base)
    if kind == "claim":
        f = Forged(arr, claim_device=(KDL_CUDA, 0))
        return Arg(obj=f, forged=f, import_error=ValueError, **base)
    if kind == "null":
        f = Forged(arr, data=0)
        return Arg(obj=f, forged=f, import_error=ValueError if arr.size else None, **base)
    if kind == "version":
        f = Forged(arr, version=(2, 0))
        return Arg(obj=f, forged=f, import_error=TypeError, **base)
    if kind == "lanes":
        f = Forged(arr, dtype=(KDL_FLOAT, arr.itemsize * 8, 2))
        return Arg(obj=f, forged=f, **{**base, "dtype": "other"})
    if kind == "bf16":  # a bfloat16 tensor (we only lie about the dtype; never read on the CPU)
        f = Forged(arr, dtype=(KDL_BFLOAT, 16, 1))
        return Arg(obj=f, forged=f, **{**base, "dtype": "bfloat16"})
    if kind == "ndim":
        f = Forged(arr, shape=(1,) * 17, strides=None)
        return Arg(obj=f, forged=f, import_error=ValueError, **base)
    f = Forged(arr, shape=(arr.shape[0], -1) if arr.ndim else (-1,), strides=None)
    return Arg(obj=f, forged=f, import_error=ValueError, **base)


ALGEBRA_BAD = [(1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1), 7, 0, -1, True, "Cl(3,0)", (2, 1), None, 3.0, (1, -1)]


def algebra_arg(draw, alg):
    """The algebra as the caller may give it; (value, valid)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from(ALGEBRA_BAD)), False
    forms = [alg, alg.metric, list(alg.metric)]
    if set(alg.metric) == {1}:
        forms.append(alg.n)
    return draw(st.sampled_from(forms)), True


# Sizes: zero now and then, not as often as Hypothesis's own integers would pick it.
SIZES = st.sampled_from([1, 2, 3, 1, 2, 0])
FEATURES = st.sampled_from([1, 2, 3, 4, 5, 0])

# which inputs get NaN / Inf: mostly rows of x / y (checked row by row); a non-finite
# weight reaches every row
POISON = [("x",), ("y",), ("x", "y"), ("x",), ("y",), ("weight",), ("x", "y", "weight")]

def outcome(expected, poisoned):
    """The statistics label of an example (pytest --hypothesis-show-statistics)."""
    label = f"expect {expected.__name__ if expected else 'success'}"
    return label + (f" (NaN/Inf in {'weight' if 'weight' in poisoned else 'rows'})" if poisoned else "")


FAULTS = ["none"] * 20 + ["dtype", "layout", "shape", "not_array", "forged", "readonly"]


# ---------------------------------------------------------------------------------------
# the NumPy-level ops


@fuzz_settings(400)
@given(st.data())
def test_fuzz_ops_numpy(data):
    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    alg = draw(st.sampled_from(ALGS), label="algebra")
    op = draw(st.sampled_from(["sgp", "fcgp"]), label="op")
    backward = draw(st.booleans(), label="backward")
    normalize = draw(st.booleans(), label="normalize")
    gate = draw(st.booleans(), label="gate") if OPS_GATE else True
    dtype = draw(st.sampled_from(["float32", "float64"]), label="dtype")
    batch = tuple(draw(st.lists(SIZES, max_size=3), label="batch"))
    n_in = draw(FEATURES, label="N_in")
    n_out = draw(FEATURES, label="N_out") if op == "fcgp" else n_in
    nonfinite = draw(st.sampled_from([False, False, True]), label="nonfinite")
    # which inputs get NaN / Inf (a NaN weight poisons every row; rows are checked without)
    poisoned = set(draw(st.sampled_from(POISON + [("grad_out",), ("x", "grad_out")]), label="non-finite in")
                   if nonfinite else ())
    algebra, algebra_ok = algebra_arg(draw, alg)
    # x's component count: mostly the algebra's, sometimes another algebra's
    D = alg.D if draw(st.integers(0, 9)) else draw(st.sampled_from([4, 8, 16, 2]))

    shapes = {"x": (D, *batch, n_in), "y": (D, *batch, n_in),
              "weight": (n_in, alg.P) if op == "sgp" else (alg.P, n_in, n_out)}
    names = ["grad_out", "x", "y", "weight"] if backward else ["x", "y", "weight"]
    if backward:
        shapes["grad_out"] = (D, *batch, n_out)
    args = {}
    for name in names:
        fault = draw(st.sampled_from(FAULTS), label=f"{name} fault")
        # FCGP's kernel sums a weight row's terms before multiplying by the weight, so with
        # an infinite weight NaN and Inf may trade places; NaN weights only there.
        specials = (np.nan,) if (op, name) == ("fcgp", "weight") else (np.nan, np.inf, -np.inf)
        args[name] = numpy_arg(draw, rng, shapes[name], dtype, name in poisoned, fault, specials)
    out_kind = "none" if backward else draw(st.sampled_from(["none"] * 4 + ["ok", "fault", "x", "readonly"]))
    if out_kind != "none":
        oshape = (D, *batch, n_out)
        if out_kind == "x":
            args["out"] = args["x"]
        else:
            fault = {"ok": "none", "readonly": "readonly"}.get(out_kind) or draw(st.sampled_from(FAULTS[20:]))
            args["out"] = numpy_arg(draw, rng, oshape, dtype, False, fault)

    expected = ValueError if not algebra_ok else expected_error(
        alg, op, backward, {k: args[k] for k in ("x", "y", "weight", "grad_out", "out") if k in args},
        None if op == "sgp" else n_out)

    kw = {"out": args["out"].obj} if "out" in args else {}
    if OPS_GATE:
        kw["gate"] = gate
    if op == "fcgp":
        prec = draw(st.sampled_from([None, "highest", "tf32", "bf16", None, "fp8"]), label="precision")
        kw["precision"] = prec
        if prec == "fp8":  # checked in Python, before any array is looked at
            expected = ValueError
    fn = {("sgp", False): fc.ops.sgp_forward, ("sgp", True): fc.ops.sgp_backward,
          ("fcgp", False): fc.ops.fcgp_forward, ("fcgp", True): fc.ops.fcgp_backward}[(op, backward)]
    call_args = [args[n].obj for n in names]

    event(outcome(expected, poisoned))
    if expected is not None:
        with pytest.raises(Exception) as info:
            fn(*call_args, algebra, normalize, **kw)
        assert type(info.value) is expected, f"expected {expected.__name__}, got {info.value!r}"
    else:
        result = fn(*call_args, algebra, normalize, **kw)
        x, y, w = args["x"].values, args["y"].values, args["weight"].values
        if backward:
            assert isinstance(result, tuple) and len(result) == 3
            assert all(isinstance(r, np.ndarray) and r.dtype == np.dtype(dtype) for r in result)
            check_backward(alg, op, normalize, args["grad_out"].values, x, y, w, result, dtype, gate)
        else:
            if "out" in args:
                assert result is args["out"].obj
                result = args["out"].base_array()
            assert isinstance(result, np.ndarray) and result.dtype == np.dtype(dtype)
            check_forward(alg, op, normalize, x, y, w, result, dtype, gate)
    for a in args.values():
        if a.forged is not None:  # every capsule taken was released exactly once
            assert a.forged.deleted == len(a.forged.capsules)


# ---------------------------------------------------------------------------------------
# the torch ops


TORCH_FLOATS = ["float32", "float64", "float16", "bfloat16"]
TORCH_OTHER = ["int32", "int64", "uint8", "bool", "complex64"]


def torch_arg(draw, torch, rng, shape, dtype, nonfinite, fault, specials):
    """(tensor, Arg as the C code sees it after the op's .contiguous())."""
    if fault == "shape":
        shape = draw(st.sampled_from(_shape_variants(shape)))
    values = make_values(rng, shape, nonfinite, specials)
    dt = dtype
    if fault == "dtype":
        dt = draw(st.sampled_from(TORCH_FLOATS + TORCH_OTHER))
    t = torch.from_numpy(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = t.to(getattr(torch, dt))
    if fault == "layout" and t.dim() > 0:
        kind = draw(st.sampled_from(["transpose", "step", "expand"]))
        axis = draw(st.integers(0, t.dim() - 1))
        if kind == "transpose":
            t = t.transpose(0, -1).contiguous().transpose(0, -1)
        elif kind == "step":
            big = torch.zeros(*shape[:axis], 2 * shape[axis], *shape[axis + 1:], dtype=t.dtype)
            idx = (slice(None),) * axis + (slice(None, None, 2),)
            big[idx] = t
            t = big[idx]
        elif shape[axis] > 0:
            t = t.narrow(axis, 0, 1).expand(*shape)
    name = dt if dt in TORCH_FLOATS else "other"
    vals = t.double().numpy() if name != "other" else None
    return t, Arg(obj=t, dtype=name, shape=tuple(t.shape), contiguous=True, values=vals)


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
@fuzz_settings(200)
@given(st.data())
def test_fuzz_torch_ops(data):
    import torch

    draw = data.draw
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    alg = draw(st.sampled_from(ALGS), label="algebra")
    op = draw(st.sampled_from(["sgp", "fcgp"]), label="op")
    normalize = draw(st.booleans(), label="normalize")
    torch_gate = "gate" in inspect.signature(fc.gelu_sgp_norm).parameters
    gate = draw(st.booleans(), label="gate") if torch_gate else True
    gate_kw = {"gate": gate} if torch_gate else {}
    dtype = draw(st.sampled_from(TORCH_FLOATS), label="dtype")
    batch = tuple(draw(st.lists(SIZES, max_size=3), label="batch"))
    n_in = draw(FEATURES, label="N_in")
    n_out = draw(FEATURES, label="N_out") if op == "fcgp" else n_in
    nonfinite = draw(st.sampled_from([False, False, True]), label="nonfinite")
    poisoned = set(draw(st.sampled_from(POISON), label="non-finite in") if nonfinite else ())
    backward = draw(st.booleans(), label="backward")
    algebra, algebra_ok = algebra_arg(draw, alg)
    D = alg.D if draw(st.integers(0, 9)) else draw(st.sampled_from([4, 8, 16]))
    shapes = {"x": (D, *batch, n_in), "y": (D, *batch, n_in),
              "weight": (n_in, alg.P) if op == "sgp" else (alg.P, n_in, n_out)}
    faults = ["none"] * 8 + ["dtype", "layout", "shape"]
    tensors, args = {}, {}
    for name in ("x", "y", "weight"):
        fault = draw(st.sampled_from(faults), label=f"{name} fault")
        specials = (np.nan,) if (op, name) == ("fcgp", "weight") else (np.nan, np.inf, -np.inf)  # as above
        tensors[name], args[name] = torch_arg(draw, torch, rng, shapes[name], dtype, name in poisoned, fault,
                                              specials)
    if draw(st.booleans(), label="weight is a Parameter"):  # not a plain Tensor: the registered op path
        w = tensors["weight"]
        tensors["weight"] = torch.nn.Parameter(w, requires_grad=w.is_floating_point())

    # the CPU ops compute float16 / bfloat16 in float32 when x, y and weight share that dtype
    out_dtype = args["x"].dtype
    if {args[n].dtype for n in ("x", "y", "weight")} == {out_dtype} and out_dtype in ("float16", "bfloat16"):
        for a in args.values():
            a.dtype = "float32"
    expected = ValueError if not algebra_ok else expected_error(alg, op, False, args,
                                                                None if op == "sgp" else n_out)
    f = fc.gelu_sgp_norm if op == "sgp" else fc.gelu_fcgp_norm
    x, y, w = tensors["x"], tensors["y"], tensors["weight"]
    grads = backward and expected is None and all(t.is_floating_point() for t in (x, y, w))
    if grads:
        x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
        w = w if isinstance(w, torch.nn.Parameter) else w.detach().requires_grad_()
    event(outcome(expected, poisoned))
    if expected is not None:
        with pytest.raises(Exception) as info:
            f(x, y, w, algebra, normalize, **gate_kw)
        assert type(info.value) is expected, f"expected {expected.__name__}, got {info.value!r}"
        return
    out = f(x, y, w, algebra, normalize, **gate_kw)
    assert out.dtype == getattr(torch, out_dtype) and out.device.type == "cpu"
    xv, yv, wv = args["x"].values, args["y"].values, args["weight"].values
    check_forward(alg, op, normalize, xv, yv, wv, out.detach().double().numpy(), out_dtype, gate)
    if grads:
        g = torch.from_numpy(rng.standard_normal(tuple(out.shape))).to(out.dtype)
        out.backward(g)
        got = [t.grad.double().numpy() for t in (x, y, w)]
        assert all(t.grad.dtype == out.dtype for t in (x, y, w))
        check_backward(alg, op, normalize, g.double().numpy(), xv, yv, wv, got, out_dtype, gate)


# ---------------------------------------------------------------------------------------
# NaN / Inf, deterministically: every algebra, op, normalize, dtype


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("normalize", [True, False], ids=["norm", "nonorm"])
@pytest.mark.parametrize("op", ["sgp", "fcgp"])
@pytest.mark.parametrize("alg", ALGS, ids=lambda a: a.name)
def test_nonfinite_rows_stay_in_their_rows(alg, op, normalize, dtype):
    """Row 1 gets NaN in x, row 2 +Inf in y's scalar (the gate), row 3 -Inf in a vector
    component of x; rows 0 and 4 stay finite and must equal the reference, the others
    follow IEEE (forward_ieee). Backward: finite rows of grad_x / grad_y equal the reference."""
    rng = np.random.default_rng(zlib_seed(alg.name, op, normalize, dtype))
    B, N, M = 5, 3, 2
    np_dt = NP_FLOATS[dtype]
    x = rng.standard_normal((alg.D, B, N)).astype(np_dt)
    y = rng.standard_normal((alg.D, B, N)).astype(np_dt)
    w = rng.standard_normal((N, alg.P) if op == "sgp" else (alg.P, N, M)).astype(np_dt)
    x[3, 1, 0] = np.nan
    y[0, 2, 2] = np.inf
    x[1, 3, 1] = -np.inf
    f, fb = (fc.ops.sgp_forward, fc.ops.sgp_backward) if op == "sgp" else (fc.ops.fcgp_forward,
                                                                           fc.ops.fcgp_backward)
    xv, yv, wv = (a.astype(np.float64) for a in (x, y, w))
    out = f(x, y, w, alg, normalize)
    assert not np.all(np.isfinite(out[:, 1:4])), "the non-finite rows came out finite"
    assert np.all(np.isfinite(out[:, [0, 4]]))
    check_forward(alg, op, normalize, xv, yv, wv, out, dtype)
    g = rng.standard_normal(out.shape).astype(np_dt)
    grads = fb(g, x, y, w, alg, normalize)
    assert all(np.all(np.isfinite(gr[:, [0, 4]])) for gr in grads[:2])
    check_backward(alg, op, normalize, g.astype(np.float64), xv, yv, wv, grads, dtype)


def zlib_seed(*parts):
    return zlib.crc32(repr(parts).encode())


# ---------------------------------------------------------------------------------------
# what the fuzzers found outside SPEC section 5's three types, pinned


def test_stream_out_of_range_is_a_value_error():
    x = np.zeros((8, 1, 2))
    with pytest.raises(ValueError):
        fc.ops.sgp_forward(x, x, np.zeros((2, 20)), 3, stream=2**70)


def test_raw_algebra_out_of_range_is_a_value_error():
    x = np.zeros((8, 1, 2))
    with pytest.raises(ValueError):
        fc._C.sgp_forward(x, x, np.zeros((2, 20)), 2**40, True)


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_torch_op_non_tensor_is_a_type_error():
    import torch

    with pytest.raises(TypeError, match="x: expected a torch.Tensor, got numpy.ndarray"):
        fc.gelu_sgp_norm(np.zeros((8, 1, 2)), torch.zeros(8, 1, 2), torch.zeros(2, 20), 3)
    with pytest.raises(TypeError, match="weight: expected a torch.Tensor"):
        fc.gelu_fcgp_norm(torch.zeros(8, 1, 2), torch.zeros(8, 1, 2), [[0.0]], 3)


def test_raw_table_functions_reject_out_of_range_ints():
    """Ids and metric entries beyond C int are refused, not truncated to a valid one
    (they were: algebra_table(2**32 + 1) returned Cl(3,0)'s table)."""
    for bad in (2**32 + 1, -(2**32) + 1, 2**64, -(2**70)):
        with pytest.raises(ValueError, match="algebra: expected an algebra id from 0 to 4"):
            fc._C.algebra_table(bad)
        assert fc._C.find_algebra((bad, 1, 1)) == -1
        assert fc._C.find_algebra((1, 1, bad)) == -1
    assert fc._C.find_algebra((1, 1, 1)) == 1
    assert fc._C.find_algebra((0, 1, 1, 1)) == 3
    with pytest.raises(TypeError):
        fc._C.find_algebra((1, "1", 1))
