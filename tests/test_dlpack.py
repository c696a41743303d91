"""The DLPack consumer: forged capsules through flashclifford.ops (TESTPLAN A3, A5, A6, D5),
and a forged C exchange API (the borrowed view and its producer-stream query).

Every case checks the producer's deleter ran exactly once, errors included, and that a
device pointer that is not a host pointer is rejected before it is read.
"""

import ctypes
import sys

import numpy as np
import pytest
from dlpack_forge import (
    KDL_CUDA,
    KDL_CUDA_HOST,
    KDL_CUDA_MANAGED,
    KDL_FLOAT,
    KDL_INT,
    KDL_ROCM,
    READ_ONLY,
    DLPackVersion,
    DLTensor,
    Forged,
    capsule_name,
    f32,
    mark_consumed,
)

import flashclifford as fc
from flashclifford import _C

ALG = 1  # Cl(3,0): D = 8, P = 20


def inputs(B=3, N=5):
    return f32(8, B, N), f32(8, B, N, rng=np.random.default_rng(1)), f32(N, 20, rng=np.random.default_rng(2))


def test_versioned_capsule_consumed_once_and_renamed():
    x, y, w = inputs()
    fx = Forged(x)
    out = fc.ops.sgp_forward(fx, y, w, 3)
    np.testing.assert_array_equal(out, fc.ops.sgp_forward(x, y, w, 3))
    assert fx.deleted == 1
    assert capsule_name(fx.capsules[-1]) == "used_dltensor_versioned"


def test_legacy_capsule_and_producer_without_max_version():
    x, y, w = inputs()
    fx = Forged(x, legacy=True, accepts_max_version=False)
    np.testing.assert_array_equal(fc.ops.sgp_forward(fx, y, w, 3), fc.ops.sgp_forward(x, y, w, 3))
    assert fx.deleted == 1
    assert capsule_name(fx.capsules[-1]) == "used_dltensor"


def test_null_strides_mean_row_major():
    x, y, w = inputs()
    fx = Forged(x, strides=None)
    np.testing.assert_array_equal(fc.ops.sgp_forward(fx, y, w, 3), fc.ops.sgp_forward(x, y, w, 3))
    assert fx.deleted == 1


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(shape=(8, 3, 4)), ValueError, r"y: expected shape \(8, 3, 5\)"),
        (dict(strides=(1, 40, 8)), ValueError, "C-contiguous"),
        (dict(dtype=(KDL_FLOAT, 32, 2)), TypeError, "float32 x2"),
        (dict(dtype=(KDL_INT, 32, 1)), TypeError, "got int32"),
        (dict(version=(2, 0)), TypeError, "major version 2"),
        (dict(data=0), ValueError, "NULL"),
        (dict(device=(KDL_CUDA_HOST, 0)), RuntimeError, "expected device cpu"),
        (dict(device=(KDL_ROCM, 0)), RuntimeError, "expected device cpu"),
        (dict(device=(KDL_CPU := 1, 0), claim_device=(KDL_CUDA, 0)), ValueError, "says cuda:0"),
    ],
)
def test_bad_tensor_released_once(kwargs, exc, match):
    x, y, w = inputs()
    fy = Forged(y, **kwargs)
    with pytest.raises(exc, match=match):
        fc.ops.sgp_forward(x, fy, w, 3)
    assert fy.deleted == 1
    # the process is still fine: a valid call right after
    fc.ops.sgp_forward(x, y, w, 3)


@pytest.mark.parametrize("device", [KDL_CUDA, KDL_CUDA_MANAGED, KDL_ROCM])
def test_device_pointer_never_dereferenced(device):
    """A forged non-CPU tensor with a bogus pointer as x: refused (CPU-only build, or no such
    GPU, or an unsupported device) before any read; a read would crash the process."""
    x, y, w = inputs()
    fx = Forged(x, device=(device, 0), data=0xDEAD0000)
    with pytest.raises(RuntimeError):
        fc.ops.sgp_forward(fx, y, w, 3)
    assert fx.deleted == 1


def test_read_only_output_rejected():
    x, y, w = inputs()
    out = np.empty_like(x)
    fo = Forged(out, flags=READ_ONLY)
    with pytest.raises(ValueError, match="out: is read-only"):
        fc.ops.sgp_forward(x, y, w, 3, out=fo)
    assert fo.deleted == 1


def test_read_only_input_accepted():
    x, y, w = inputs()
    fx = Forged(x, flags=READ_ONLY)
    np.testing.assert_array_equal(fc.ops.sgp_forward(fx, y, w, 3), fc.ops.sgp_forward(x, y, w, 3))
    assert fx.deleted == 1


def test_out_written_in_place():
    x, y, w = inputs()
    out = np.full_like(x, np.nan)
    fo = Forged(out)
    res = fc.ops.sgp_forward(x, y, w, 3, out=fo)
    assert res is fo
    np.testing.assert_array_equal(out, fc.ops.sgp_forward(x, y, w, 3))
    assert fo.deleted == 1


def test_zero_size_null_data_accepted():
    x = np.empty((8, 0, 5), np.float32)
    fx, fy = Forged(x, data=0), Forged(x.copy(), data=0)
    w = f32(5, 20)
    out = fc.ops.sgp_forward(fx, fy, w, 3)
    assert out.shape == (8, 0, 5)
    assert fx.deleted == 1 and fy.deleted == 1


class Raising:
    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        raise RuntimeError("producer exploded")


class NotACapsule:
    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return "capsule?"


class BadDevice:
    def __dlpack_device__(self):
        return "cpu"

    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be called")


class Consumed:
    """Hands out a capsule some consumer already took (renamed to used_dltensor_versioned)."""

    def __init__(self, x):
        self.inner = Forged(x)
        self.cap = self.inner.__dlpack__(max_version=(1, 3))
        mark_consumed(self.cap)

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.cap


@pytest.mark.parametrize(
    "bad, match",
    [
        (Raising(), "__dlpack__\\(\\) failed: producer exploded"),
        (NotACapsule(), "not an unused DLPack capsule"),
        (BadDevice(), "__dlpack_device__\\(\\) returned"),
        (object(), "expected an array with __dlpack__"),
        (None, "expected an array with __dlpack__"),
        ([[1.0]], "expected an array with __dlpack__"),
    ],
)
def test_not_an_array(bad, match):
    x, y, w = inputs()
    with pytest.raises(TypeError, match=match):
        fc.ops.sgp_forward(x, bad, w, 3)


def test_already_consumed_capsule_rejected():
    x, y, w = inputs()
    c = Consumed(x)
    with pytest.raises(TypeError, match="not an unused DLPack capsule"):
        fc.ops.sgp_forward(x, c, w, 3)
    assert c.inner.deleted == 0  # not ours to release


def test_raising_dlpack_chains_the_cause():
    x, y, w = inputs()
    with pytest.raises(TypeError) as info:
        fc.ops.sgp_forward(x, Raising(), w, 3)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_cuda_array_in_cpu_only_build_or_without_gpu():
    x, y, w = inputs()
    fx, fy, fw = (Forged(a, device=(KDL_CUDA, 0), data=0xDEAD0000) for a in (x, y, w))
    with pytest.raises(RuntimeError, match="without CUDA|no such GPU|not usable"):
        _C.sgp_forward(fx, fy, fw, ALG, True)
    assert (fx.deleted, fy.deleted, fw.deleted) == (1, 0, 0)  # stopped at x, before touching y


# --- the C exchange API (__dlpack_c_exchange_api__, DLPack 1.3), forged with ctypes ---------------
# Its borrowed view skips __dlpack__(stream=...): for a CUDA view the consumer must ask the
# producer's current_work_stream and wait for it; a producer that cannot say (no function, or a
# failing one) must be read through __dlpack__ instead, which orders the work itself.

FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", FROM_PY),
        ("current_work_stream", WORK_STREAM),
    ]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
API_NAME = b"dlpack_exchange_api"


def exchange_type(work_stream=0x5EED, stream_fn=True, stream_rc=0):
    """A producer type with a forged exchange API: views of its instances' Forged tensors.

    current_work_stream answers work_stream with return code stream_rc (or is NULL without
    stream_fn); every query is logged in the type's `queries` as (device_type, device_id).
    """

    class Exchanged:
        queries = []

        def __init__(self, forged):
            self.forged = forged
            self.dlpack_streams = []  # the stream= of each __dlpack__ call (the fallback)

        def __dlpack_device__(self):
            return self.forged.__dlpack_device__()

        def __dlpack__(self, *, stream=None, **kwargs):
            self.dlpack_streams.append(stream)
            return self.forged.__dlpack__(stream=stream, **kwargs)

    def from_py(obj, out):
        out[0] = obj.forged._tensor()  # the shape array stays alive in obj.forged
        return 0

    def current_work_stream(device_type, device_id, out):
        Exchanged.queries.append((device_type, device_id))
        out[0] = work_stream
        return stream_rc

    Exchanged._api = DLPackExchangeAPI(
        version=DLPackVersion(1, 3),
        dltensor_from_py_object_no_sync=FROM_PY(from_py),
        current_work_stream=WORK_STREAM(current_work_stream) if stream_fn else WORK_STREAM(),
    )
    Exchanged._keep = (from_py, current_work_stream)
    Exchanged.__dlpack_c_exchange_api__ = _capsule_new(ctypes.addressof(Exchanged._api), API_NAME, None)
    return Exchanged


def test_exchange_api_cpu_view_needs_no_stream():
    x, y, w = inputs()
    T = exchange_type()
    ex, ey, ew = T(Forged(x)), T(Forged(y)), T(Forged(w))
    before = [sys.getrefcount(o) for o in (ex, ey, ew)]
    for _ in range(3):
        np.testing.assert_array_equal(fc.ops.sgp_forward(ex, ey, ew, 3), fc.ops.sgp_forward(x, y, w, 3))
    assert T.queries == []  # CPU: no stream to ask for
    assert (ex.dlpack_streams, ex.forged.deleted) == ([], 0)  # the borrowed view, no capsule
    assert [sys.getrefcount(o) for o in (ex, ey, ew)] == before  # the borrows were given back


@pytest.mark.parametrize("device", [KDL_CUDA, KDL_CUDA_MANAGED])
def test_exchange_api_cuda_view_asks_for_the_work_stream(device):
    """A CUDA view is taken from the exchange API with the producer's stream; it is refused
    here (no GPU or no CUDA build) after the query and before any wait or launch."""
    x, y, w = inputs()
    T = exchange_type()
    ex = T(Forged(x, device=(device, 0), data=0xDEAD0000))
    before = sys.getrefcount(ex)
    with pytest.raises(RuntimeError):
        _C.sgp_forward(ex, y, w, ALG, True)
    assert T.queries == [(device, 0)]
    assert ex.dlpack_streams == [] and ex.forged.deleted == 0
    assert sys.getrefcount(ex) == before


def test_exchange_api_cuda_view_on_wrong_device_released():
    """y a CUDA view, x on the CPU: the device check refuses y; its borrow is returned."""
    x, y, w = inputs()
    T = exchange_type()
    ey = T(Forged(y, device=(KDL_CUDA, 0), data=0xDEAD0000))
    before = sys.getrefcount(ey)
    with pytest.raises(RuntimeError, match="y: expected device cpu"):
        _C.sgp_forward(x, ey, w, ALG, True)
    assert T.queries == [(KDL_CUDA, 0)]
    assert sys.getrefcount(ey) == before


@pytest.mark.parametrize("why", ["no current_work_stream", "current_work_stream fails"])
@pytest.mark.parametrize("stream, expect", [(None, 1), (0, 1), (0x1234, 0x1234)])
def test_exchange_api_without_work_stream_falls_back_to_dlpack(why, stream, expect):
    """Without the producer's stream the view would race: __dlpack__ gets our launch stream
    (1 = the legacy default in the protocol's naming) and orders the producer's work itself."""
    x, y, w = inputs()
    T = exchange_type(stream_fn=why == "current_work_stream fails", stream_rc=-1)
    ex = T(Forged(x, device=(KDL_CUDA, 0), data=0xDEAD0000))
    with pytest.raises(RuntimeError):
        _C.sgp_forward(ex, y, w, ALG, True, stream=stream)
    assert ex.dlpack_streams == [expect]
    assert ex.forged.deleted == 1  # the capsule path's deleter ran
    # the process is still fine, and no exception was left behind by the failed query
    np.testing.assert_array_equal(fc.ops.sgp_forward(x, y, w, 3), fc.ops.sgp_forward(x, y, w, 3))


def test_exchange_api_without_work_stream_cpu_view_kept():
    """A CPU view needs no stream: the fast path stays even when current_work_stream is missing."""
    x, y, w = inputs()
    T = exchange_type(stream_fn=False)
    ex = T(Forged(x))
    np.testing.assert_array_equal(fc.ops.sgp_forward(ex, y, w, 3), fc.ops.sgp_forward(x, y, w, 3))
    assert ex.dlpack_streams == [] and ex.forged.deleted == 0
