"""No growth in reference counts or memory over 10,000 calls of every public entry point,
valid and failing (TESTPLAN D1, D3)."""

import gc
import sys
import tracemalloc

import numpy as np
import pytest

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
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_no_refcount_or_memory_growth(name):
    f = ENTRY_POINTS[name]
    tracemalloc.start()
    for _ in range(CALLS):  # warm up, traced: caches, free lists and tracemalloc's tables grow once
        f()
    gc.collect()
    refs = [sys.getrefcount(a) for a in (X, Y, W, WF, G, OUT)]
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
    assert [sys.getrefcount(a) for a in (X, Y, W, WF, G, OUT)] == refs
    if total is not None:
        assert sys.gettotalrefcount() - total < 100


def test_torch_op_no_growth():
    torch = pytest.importorskip("torch")
    x, y, w = (torch.from_numpy(a.copy()).requires_grad_() for a in (X, Y, W))
    tracemalloc.start()
    for _ in range(2000):
        fc.gelu_sgp_norm(x, y, w, 3).sum().backward()
    gc.collect()
    refs = [sys.getrefcount(t) for t in (x, y, w)]
    before = tracemalloc.take_snapshot()
    for _ in range(2000):
        fc.gelu_sgp_norm(x, y, w, 3).sum().backward()
    gc.collect()
    growth = _traced_growth(before, tracemalloc.take_snapshot())
    tracemalloc.stop()
    assert growth < 64 * 1024
    assert [sys.getrefcount(t) for t in (x, y, w)] == refs
