"""No growth in reference counts or memory over 10,000 calls of every public entry point,
valid and failing (TESTPLAN D1, D3)."""

import gc
import sys
import tracemalloc

import numpy as np
import pytest
from dlpack_forge import KDL_CUDA, Forged

import flashclifford as fc

CALLS = 10_000
rng = np.random.default_rng(3)
X = rng.standard_normal((8, 2, 4)).astype(np.float32)
Y = rng.standard_normal((8, 2, 4)).astype(np.float32)
W = rng.standard_normal((4, 20)).astype(np.float32)
WF = rng.standard_normal((20, 4, 3)).astype(np.float32)
G = rng.standard_normal((8, 2, 3)).astype(np.float32)
OUT = np.empty_like(X)


def _traced_growth(before, after):
    """Bytes of traced memory gained between two snapshots, tracemalloc's own excluded."""
    own = [tracemalloc.Filter(False, tracemalloc.__file__)]
    diff = after.filter_traces(own).compare_to(before.filter_traces(own), "filename")
    return sum(s.size_diff for s in diff)


class Producer:
    """A DLPack producer over a NumPy array through its capsule, optionally broken."""

    def __init__(self, array, mode="ok"):
        self.array, self.mode = array, mode

    def __dlpack_device__(self):
        return (2, 0) if self.mode == "claims_cuda" else (1, 0)

    def __dlpack__(self, *, stream=None, max_version=None, **kwargs):
        if self.mode == "raises":
            raise RuntimeError("producer failed")
        if self.mode == "garbage":
            return "capsule?"
        if self.mode == "legacy":
            if max_version is not None:  # a pre-1.0 producer: the consumer retries without it
                raise TypeError("unexpected keyword argument 'max_version'")
            return self.array.__dlpack__()
        return self.array.__dlpack__(max_version=max_version)


class Reforged(Forged):
    """A forged capsule per call that keeps only the latest (Forged keeps every one)."""

    def __dlpack__(self, **kwargs):
        cap = super().__dlpack__(**kwargs)
        self.capsules.clear()
        del self._keep[:-1]
        return cap


RO = OUT.copy()
RO.setflags(write=False)
GX, GY, GW = np.empty_like(X), np.empty_like(Y), np.empty_like(W)
NORMS = np.empty((2, 4), np.float32)  # (B, G) for Cl(3,0)
WF4 = rng.standard_normal((20, 4, 4)).astype(np.float32)  # FCGP with N_out = N_in, for out=OUT
LEGACY, RAISES, GARBAGE, CLAIMS = (Producer(Y, m) for m in ("legacy", "raises", "garbage", "claims_cuda"))
CUDA_X = Reforged(X, device=(KDL_CUDA, 0), data=0xDEAD0000)  # refused before any read
PRODUCERS = (LEGACY, RAISES, GARBAGE, CLAIMS, CUDA_X, RO, GX, GY, GW, NORMS, WF4)


def _raises(f):
    def call():
        try:
            f()
        except (ValueError, TypeError, RuntimeError):
            return
        raise AssertionError("expected an exception")

    return call


ENTRY_POINTS = {
    "sgp_forward": lambda: fc.ops.sgp_forward(X, Y, W, 3),
    "sgp_forward_out": lambda: fc.ops.sgp_forward(X, Y, W, 3, out=OUT),
    "sgp_backward": lambda: fc.ops.sgp_backward(X, X, Y, W, 3),
    "fcgp_forward": lambda: fc.ops.fcgp_forward(X, Y, WF, 3),
    "fcgp_backward": lambda: fc.ops.fcgp_backward(G, X, Y, WF, 3),
    "error_shape": _raises(lambda: fc.ops.sgp_forward(X, Y, W[:, :10], 3)),
    "error_dtype": _raises(lambda: fc.ops.sgp_forward(X, Y.astype(np.float64), W, 3)),
    "error_type": _raises(lambda: fc.ops.sgp_forward(X, [1.0], W, 3)),
    "error_overlap": _raises(lambda: fc.ops.sgp_forward(X, Y, W, 3, out=X)),
    "error_algebra": _raises(lambda: fc.ops.sgp_forward(X, Y, W, (1, 1, 1, 1, 1))),
    "algebra_table": lambda: fc._C.algebra_table(2),
    "build_info": lambda: fc.build_info(),
    # outputs and norms given by the caller, forward and backward
    "sgp_forward_norms": lambda: fc._C.sgp_forward(X, Y, W, 1, True, out=OUT, norms=NORMS),
    "sgp_backward_outputs": lambda: fc._C.sgp_backward(X, X, Y, W, 1, True, norms=NORMS, grad_x=GX, grad_y=GY,
                                                       grad_weight=GW),
    "fcgp_forward_out": lambda: fc.ops.fcgp_forward(X, Y, WF4, 3, out=OUT),
    # the capsule paths: legacy producer (retry without max_version), forged versioned capsule
    "legacy_capsule": lambda: fc.ops.sgp_forward(X, LEGACY, W, 3),
    "find_algebra": lambda: fc._C.find_algebra((0, 1, 1, 1)),
    "workspace_size": lambda: fc._C.workspace_size("fcgp", True, 3, "float32", 64, 8, 8),
    "workspace_size_device": lambda: fc._C.workspace_size("fcgp", False, 1, "float32", 64, 8, 8, 1, True, 0),
    "fcgp_sm90_switch": lambda: fc._C._fcgp_sm90(fc._C._fcgp_sm90()),  # leaves it as it was
    "fcgp_sm90_bwd_switch": lambda: fc._C._fcgp_sm90_bwd(fc._C._fcgp_sm90_bwd()),
    "fcgp_sm90_go_fused": lambda: fc._C._fcgp_sm90_bwd_go_fused(fc._C._fcgp_sm90_bwd_go_fused()),
    "error_go_fused_mode": _raises(lambda: fc._C._fcgp_sm90_bwd_go_fused(3)),  # choice_call's range
    "error_fwd_cluster_shape": _raises(lambda: fc._C._fcgp_sm90_fwd_cluster(4)),
    "error_fwd_groups": _raises(lambda: fc._C._fcgp_sm90_fwd_groups(3)),
    "error_gw_pseq_mode": _raises(lambda: fc._C._fcgp_sm90_gw_pseq(4)),
    "error_ws_device": _raises(lambda: fc._C.workspace_size("fcgp", 0, 1, "float32", 8, 8, 8, device=-1)),
    "error_dlpack_raises": _raises(lambda: fc.ops.sgp_forward(X, RAISES, W, 3)),  # chained exception
    "error_dlpack_garbage": _raises(lambda: fc.ops.sgp_forward(X, GARBAGE, W, 3)),
    "error_device_claim": _raises(lambda: fc.ops.sgp_forward(X, CLAIMS, W, 3)),  # capsule taken, then refused
    "error_cuda_array": _raises(lambda: fc.ops.sgp_forward(CUDA_X, Y, W, 3)),
    "error_readonly_out": _raises(lambda: fc.ops.sgp_forward(X, Y, W, 3, out=RO)),
    "error_grad_shape": _raises(lambda: fc.ops.sgp_backward(X, X, Y, W, 3, grad_weight=GW[:, :3])),
    "error_after_outputs": _raises(lambda: fc._C.sgp_forward(X, Y, W, 1, True, out=OUT, norms=NORMS[:, :2])),
    "error_binding_args": _raises(lambda: fc._C.sgp_forward(X, Y, W, 1, True, bogus=1)),
    "error_binding_ids": _raises(lambda: fc._C.fcgp_forward(X, Y, WF, 9, True, 0)),
    "error_precision": _raises(lambda: fc.ops.fcgp_forward(X, Y, WF, 3, precision="fp8")),
    "error_table_id": _raises(lambda: fc._C.algebra_table(2**40)),
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_no_refcount_or_memory_growth(name):
    f = ENTRY_POINTS[name]
    tracemalloc.start()
    for _ in range(CALLS):  # warm up, traced: caches, free lists and tracemalloc's tables grow once
        f()
    gc.collect()
    refs = [sys.getrefcount(a) for a in (X, Y, W, WF, G, OUT, *PRODUCERS)]
    total = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    # A leak grows in every window; the interpreter's own buffers (a ~1 MB block seen under
    # load) come and go between windows. So: two consecutive windows, the smaller growth.
    growths = []
    for _ in range(2):
        before = tracemalloc.take_snapshot()
        for _ in range(CALLS):
            f()
        gc.collect()
        growths.append(_traced_growth(before, tracemalloc.take_snapshot()))
    tracemalloc.stop()
    assert min(growths) < 64 * 1024, f"traced memory grew by {growths} bytes in two windows of {CALLS} calls"
    assert [sys.getrefcount(a) for a in (X, Y, W, WF, G, OUT, *PRODUCERS)] == refs
    if total is not None:
        assert sys.gettotalrefcount() - total < 100


@pytest.mark.parametrize("op", ["sgp", "raw_exchange"])
def test_torch_op_no_growth(op):
    """The autograd op, forward and backward; and torch tensors through the raw op (the
    DLPack C exchange API path: a borrowed view instead of a capsule)."""
    torch = pytest.importorskip("torch")
    x, y, w = (torch.from_numpy(a.copy()).requires_grad_() for a in (X, Y, W))
    xd, yd, wd = (t.detach() for t in (x, y, w))
    call = {
        "sgp": lambda: fc.gelu_sgp_norm(x, y, w, 3).sum().backward(),
        "raw_exchange": lambda: fc.ops.sgp_forward(xd, yd, wd, 3),
    }[op]
    tensors = (x, y, w, xd, yd, wd)
    tracemalloc.start()
    for _ in range(2000):
        call()
    gc.collect()
    refs = [sys.getrefcount(t) for t in tensors]
    before = tracemalloc.take_snapshot()
    for _ in range(2000):
        call()
    gc.collect()
    growth = _traced_growth(before, tracemalloc.take_snapshot())
    tracemalloc.stop()
    assert growth < 64 * 1024
    assert [sys.getrefcount(t) for t in tensors] == refs
