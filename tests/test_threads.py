"""Threads (TESTPLAN J1, J2, J3; issue 7): concurrent calls give bitwise the serial answers,
first calls from many threads in a fresh process are safe, and the GIL is released while a
kernel computes.

Shapes as SPEC section 2: x, y (D, B, N); sgp weight (N, P); fcgp weight (P, N, N_out).

Eight Python threads start together behind a barrier, each with its own inputs (and once
all on the same inputs), and call forward and backward of SGP and FCGP over NumPy (the
raw ops) and torch CPU tensors (the autograd ops); every result must equal, bit for bit,
what the same call gave serially before the threads started. The CPU kernels fix their
summation order independently of the thread count (csrc/cpu/common.h, FC_CHUNKS), so
concurrency, which changes how many OpenMP threads each call gets, must not change a bit.
The `gpu` variant does the same with CUDA tensors, each thread on its own stream.
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import needs_torch

import flashclifford as fc
from flashclifford.algebra import Algebra

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = 8
ROUNDS = 5
ALG = Algebra((1, -1, -1, -1))  # Cl(1,3): D = 16, P = 35, an indefinite norm
B, N, N_OUT = 24, 12, 10


def inputs(seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    a = lambda *s: rng.standard_normal(s).astype(dtype)  # noqa: E731
    return dict(x=a(ALG.D, B, N), y=a(ALG.D, B, N), w=a(N, ALG.P), W=a(ALG.P, N, N_OUT),
                g=a(ALG.D, B, N), gf=a(ALG.D, B, N_OUT))


def numpy_calls(d):
    """Every raw op once on the inputs d: a list of arrays."""
    ops = fc.ops
    return [
        ops.sgp_forward(d["x"], d["y"], d["w"], ALG),
        *ops.sgp_backward(d["g"], d["x"], d["y"], d["w"], ALG),
        ops.fcgp_forward(d["x"], d["y"], d["W"], ALG, normalize=False),
        *ops.fcgp_backward(d["gf"], d["x"], d["y"], d["W"], ALG),
    ]


def torch_calls(d, device="cpu"):
    """Forward and backward of both autograd ops on torch copies of d: a list of tensors."""
    import torch

    t = {k: torch.from_numpy(v).to(device) for k, v in d.items()}
    x, y, w, W = (t[k].clone().requires_grad_() for k in ("x", "y", "w", "W"))
    out = fc.gelu_sgp_norm(x, y, w, ALG)
    out.backward(t["g"])
    outf = fc.gelu_fcgp_norm(x, y, W, ALG, precision="highest")
    outf.backward(t["gf"])  # accumulates into x.grad, y.grad: also checked
    return [r.detach().cpu() for r in (out, outf, x.grad, y.grad, w.grad, W.grad)]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run_threads(work, n=THREADS):
    """Run work(i) in n threads started together; return {i: result}; re-raise the first error."""
    barrier = threading.Barrier(n)
    results, errors = {}, []

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 - reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def check_concurrent(calls, data_for):
    """calls(d) serially per thread's data, then 8 threads x ROUNDS concurrently: bitwise equal."""
    serial = {i: calls(data_for(i)) for i in range(THREADS)}

    def work(i):
        d = data_for(i)
        bad = []
        for r in range(ROUNDS):
            got = calls(d)
            pairs = enumerate(zip(got, serial[i], strict=True))
            bad += [(r, k) for k, (a, b) in pairs if not same_bits(a, b)]
        return bad

    mismatches = {i: bad for i, bad in run_threads(work).items() if bad}
    assert not mismatches, f"results differ from the serial ones (thread: [(round, output)]): {mismatches}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shared", [False, True], ids=["own_inputs", "shared_inputs"])
def test_numpy_threads_match_serial(shared, dtype):
    data = {i: inputs(0 if shared else i, dtype) for i in range(THREADS)}
    check_concurrent(numpy_calls, data.__getitem__)


@needs_torch
@pytest.mark.parametrize("shared", [False, True], ids=["own_inputs", "shared_inputs"])
def test_torch_threads_match_serial(shared):
    data = {i: inputs(0 if shared else 100 + i) for i in range(THREADS)}
    check_concurrent(torch_calls, data.__getitem__)


def test_outputs_given_by_each_thread():
    """out= buffers owned by each thread are written only by that thread's call."""
    data = {i: inputs(200 + i) for i in range(THREADS)}
    serial = {i: fc.ops.sgp_forward(d["x"], d["y"], d["w"], ALG) for i, d in data.items()}

    def work(i):
        d, out = data[i], np.full((ALG.D, B, N), np.nan)
        for _ in range(ROUNDS):
            res = fc.ops.sgp_forward(d["x"], d["y"], d["w"], ALG, out=out)
            assert res is out and same_bits(out, serial[i])
        return True

    assert all(run_threads(work).values())


COLD_START = r"""
import sys, threading
import numpy as np
import flashclifford as fc

THREADS = 32
rng = np.random.default_rng(0)
algs = [(1, 1), (1, 1, 1), (1, -1, -1, -1), (0, 1, 1, 1), (1, 1, 1, 1)]
barrier = threading.Barrier(THREADS)
results, errors = [None] * THREADS, []

def data(i):
    alg = fc.Algebra(algs[i % 5])
    r = np.random.default_rng(i)
    x, y = r.standard_normal((2, alg.D, 3, 4))
    return alg, x, y, r.standard_normal((4, alg.P))

def first_call(i):
    alg, x, y, w = data(i)
    try:
        barrier.wait()
        results[i] = fc.ops.sgp_forward(x, y, w, alg.metric)  # the first call of this process
    except BaseException as e:
        errors.append(repr(e))

threads = [threading.Thread(target=first_call, args=(i,)) for i in range(THREADS)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
for i in range(THREADS):
    alg, x, y, w = data(i)
    assert np.array_equal(results[i], fc.ops.sgp_forward(x, y, w, alg.metric)), i
# exit with outputs alive and a capsule nobody consumed: shutdown must not crash
keep = (results, np.zeros(3).__dlpack__())
print("ok")
"""


def test_cold_first_calls_from_32_threads():
    """TESTPLAN J3: in a fresh process the first-ever calls (algebra tables derived on both
    sides, module state, OpenMP start-up) come from 32 threads at once; every result equals
    a later serial call, and the process exits cleanly with outputs still alive."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + sys.path))
    proc = subprocess.run([sys.executable, "-c", COLD_START], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------
# the GIL


def _long_call():
    """A raw op and inputs sized so one call takes >= ~0.15 s here (doubling B until it does)."""
    rng = np.random.default_rng(0)
    alg, n = Algebra((1, 1, 1, 1)), 64
    W = rng.standard_normal((alg.P, n, n))
    b = 64
    while True:
        x, y = rng.standard_normal((2, alg.D, b, n))
        call = lambda x=x, y=y: fc.ops.fcgp_forward(x, y, W, alg)  # noqa: E731
        t = time.perf_counter()
        call()
        if time.perf_counter() - t >= 0.15 or b >= 1 << 16:
            return call
        b *= 2


def python_loop_stall(call):
    """Run call() in a thread while a pure-Python loop here stamps the time every 1000
    iterations. Returns (call duration, largest gap between stamps during the call, stamps)."""
    window = {}
    started = threading.Event()

    def worker():
        started.set()
        t0 = time.perf_counter()
        call()
        window["t"] = (t0, time.perf_counter())

    th = threading.Thread(target=worker)
    stamps = []
    th.start()
    started.wait()
    i = 0
    while th.is_alive():
        i += 1
        if i % 1000 == 0:
            stamps.append(time.perf_counter())
    th.join()
    t0, t1 = window["t"]
    inside = [t0] + [s for s in stamps if t0 <= s <= t1] + [t1]
    return t1 - t0, max(b - a for a, b in zip(inside, inside[1:], strict=False)), len(inside) - 2


def test_gil_released_during_compute():
    """While a long op runs in another thread, a pure-Python loop here keeps running.

    Were the GIL held through the call, the loop would stop for the whole call (one gap as
    long as the call); released, the gaps stay at scheduler scale (ms) even with OpenMP busy
    on every core."""
    duration, gap, stamps = python_loop_stall(_long_call())
    assert stamps > 10, f"the Python loop made no progress during a {duration:.3f} s call"
    assert gap < 0.5 * duration, f"the Python loop stalled {gap:.3f} s of a {duration:.3f} s call: GIL held?"


def test_gil_probe_sees_a_held_gil():
    """The probe's control: the regex engine keeps the GIL while it backtracks, and the
    probe must see the stall (else the test above proves nothing)."""
    import re

    pattern, n = re.compile(r"(a|aa)+b"), 20
    while True:  # exponential backtracking: grow the subject until a match takes >= 0.15 s
        t = time.perf_counter()
        pattern.match("a" * n)
        if time.perf_counter() - t >= 0.15:
            break
        n += 1
    duration, gap, _ = python_loop_stall(lambda: pattern.match("a" * n))
    assert gap >= 0.5 * duration, f"probe missed a held GIL: largest gap {gap:.3f} s of {duration:.3f} s"


# ---------------------------------------------------------------------------------------
# CUDA (run by tests/gpu_check.sh on the GPU machine)


@needs_torch
@pytest.mark.gpu
@pytest.mark.parametrize("streams", [False, True], ids=["default_stream", "stream_per_thread"])
def test_cuda_threads_match_serial(streams):
    import torch

    data = {i: inputs(300 + i) for i in range(THREADS)}
    serial = {i: torch_calls(data[i], "cuda") for i in range(THREADS)}
    torch.cuda.synchronize()

    def work(i):
        stream = torch.cuda.Stream() if streams else torch.cuda.current_stream()
        bad = []
        with torch.cuda.stream(stream):
            for r in range(ROUNDS):
                got = torch_calls(data[i], "cuda")  # .cpu() synchronises the stream
                pairs = enumerate(zip(got, serial[i], strict=True))
                bad += [(r, k) for k, (a, b) in pairs if not torch.equal(a, b)]
        return bad

    mismatches = {i: bad for i, bad in run_threads(work).items() if bad}
    assert not mismatches, f"CUDA results differ from the serial ones: {mismatches}"
