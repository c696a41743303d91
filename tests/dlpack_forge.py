"""Forge DLPack producers with ctypes, to test the consumer side of flashclifford._C.

A `Forged` object returns from __dlpack__ a capsule we built by hand: any device type,
dtype, flags, version, strides (or NULL), data pointer (or NULL). Its deleter counts calls,
so a test can check that every path, errors included, releases exactly once, and that a
bogus device pointer is never dereferenced (it is only ever handed over, never read).
"""

import ctypes

import numpy as np

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_ROCM, KDL_CUDA_MANAGED = 1, 2, 3, 10, 13
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 0, 1, 2, 4
READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


class DLManagedTensor(ctypes.Structure):
    pass


DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DELETER_L = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER_V),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER_L)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# capsule names must outlive the capsules: keep them as module constants
NAME_V, NAME_L = b"dltensor_versioned", b"dltensor"


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destructor_v(cap):
    # the producer's rule: release only a capsule nobody consumed
    if _api.PyCapsule_IsValid(cap, NAME_V):
        mt = ctypes.cast(_api.PyCapsule_GetPointer(cap, NAME_V), ctypes.POINTER(DLManagedTensorVersioned))
        mt.contents.deleter(mt)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destructor_l(cap):
    if _api.PyCapsule_IsValid(cap, NAME_L):
        mt = ctypes.cast(_api.PyCapsule_GetPointer(cap, NAME_L), ctypes.POINTER(DLManagedTensor))
        mt.contents.deleter(mt)


USED_V = b"used_dltensor_versioned"


def mark_consumed(cap):
    """Rename a capsule as a consumer does once it has taken the tensor."""
    _api.PyCapsule_SetName(cap, USED_V)


def capsule_name(cap) -> str:
    return _api.PyCapsule_GetName(cap).decode()


class Forged:
    """A DLPack producer over `array` (NumPy, kept alive) with every field overridable.

    deleted counts deleter calls; capsules keeps what __dlpack__ returned.
    """

    def __init__(self, array=None, *, device=(KDL_CPU, 0), data=None, shape=None, strides="auto",
                 dtype=None, flags=0, version=(1, 3), legacy=False, claim_device=None,
                 accepts_max_version=True):
        self.array = array
        self.device = device
        self.claim_device = claim_device or device
        self.flags, self.version, self.legacy = flags, version, legacy
        self.accepts_max_version = accepts_max_version
        self.deleted = 0
        self.capsules = []
        self._keep = []
        if array is not None:
            shape = array.shape if shape is None else shape
            if strides == "auto":
                strides = tuple(s // array.itemsize for s in array.strides)
            data = array.ctypes.data if data is None else data
            if dtype is None:
                kind = {"f": KDL_FLOAT, "i": KDL_INT, "u": KDL_UINT}[array.dtype.kind]
                dtype = (kind, array.itemsize * 8, 1)
        self.shape, self.strides, self.data, self.dtype = tuple(shape), strides, data, dtype

    def __dlpack_device__(self):
        return self.claim_device

    def _tensor(self):
        self._shape = (ctypes.c_int64 * max(1, len(self.shape)))(*self.shape)
        self._strides = None
        if self.strides not in (None, "auto"):
            self._strides = (ctypes.c_int64 * max(1, len(self.strides)))(*self.strides)
        return DLTensor(
            data=self.data, device=DLDevice(*self.device), ndim=len(self.shape),
            dtype=DLDataType(*self.dtype), shape=self._shape, strides=self._strides, byte_offset=0,
        )

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if max_version is not None and not self.accepts_max_version:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        if self.legacy or max_version is None:
            self._deleter = DELETER_L(self._on_delete)
            self._mt = DLManagedTensor(dl_tensor=self._tensor(), manager_ctx=None, deleter=self._deleter)
            cap = _api.PyCapsule_New(ctypes.addressof(self._mt), NAME_L,
                                     ctypes.cast(_destructor_l, ctypes.c_void_p))
        else:
            self._deleter = DELETER_V(self._on_delete)
            self._mt = DLManagedTensorVersioned(
                version=DLPackVersion(*self.version), manager_ctx=None, deleter=self._deleter,
                flags=self.flags, dl_tensor=self._tensor(),
            )
            cap = _api.PyCapsule_New(ctypes.addressof(self._mt), NAME_V,
                                     ctypes.cast(_destructor_v, ctypes.c_void_p))
        self.capsules.append(cap)
        self._keep.append((self._mt, self._deleter, self._shape, self._strides))  # alive as long as we are
        return cap

    def _on_delete(self, _ptr):
        self.deleted += 1


def f32(*shape, rng=None):
    rng = rng or np.random.default_rng(0)
    return rng.standard_normal(shape).astype(np.float32)
