"""GPU reliability (issue #7; marked `gpu`, skipped without one): tensors past 2^31 and 2^32
elements (`large`), one row of 65536 features, out-of-memory recovery for FCGP, eight threads at
once, CUDA graph capture / poison / replay, the stream-ordering probe for FCGP, and a second GPU
(`multigpu`). TESTPLAN rows F1, B8, K1, J1/J3, H2, H1, G1, A4.

Shapes: x, y (D, *batch, N_in); SGP weight (N, P); FCGP weight (P, N_in, N_out);
out, grad_out (D, *batch, N_out).
"""

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import SIDE_STREAM, rel_err

torch = pytest.importorskip("torch")

from gpu_util import FCGP_MODES, capture_step, check, make, make_fcgp, np64, stream_handle  # noqa: E402

import flashclifford as fc  # noqa: E402
from flashclifford import reference  # noqa: E402

pytestmark = pytest.mark.gpu

GRADS = ("out", "grad_x", "grad_y", "grad_weight")


def free_bytes():
    """Free GPU memory once this process's cached blocks are returned."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info()[0]


def fill_device():
    """Take every block of 2 MiB or more that torch can still get, from its cache or the driver:
    mem_get_info alone misses blocks torch's allocator holds free, so a later torch allocation
    could still succeed. Returns the tensors (drop them to give the memory back)."""
    torch.cuda.synchronize()
    taken, size = [], 1 << 34
    while size >= 2 << 20:
        try:
            taken.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        except torch.cuda.OutOfMemoryError:
            size //= 2
    return taken


@pytest.mark.skipif(not SIDE_STREAM, reason="only with FLASHCLIFFORD_TEST_SIDE_STREAM=1")
def test_side_stream_mode_is_active():
    # conftest's fixture must really make a non-default stream current (gpu_check.sh `sidestream`)
    assert torch.cuda.current_stream() != torch.cuda.default_stream()


# --- F1: past 2^31 and 2^32 elements ------------------------------------------------------------

# Cl(3,0) bfloat16, B * N = 600M rows x features: D * B * N = 4.8e9 elements (9.6 GB a tensor),
# so components 3..7 of every row lie past element 2^31 and component 7 of the later rows past 2^32
LARGE_B, LARGE_N = 2_343_750, 256


def boundary_rows(D, B, N):
    """The first and last rows and the rows around the elements 2^31 and 2^32."""
    rows = {0, 1, B - 2, B - 1}
    for e in (2**31, 2**32):
        a, rem = divmod(e, B * N)
        if a < D:
            b = rem // N
            rows |= {b - 1, b, b + 1}
    return sorted(r for r in rows if 0 <= r < B)


def large_inputs(alg, n_big):
    g = torch.Generator(device="cuda").manual_seed(31)
    big = [torch.randn(alg.D, LARGE_B, LARGE_N, generator=g, device="cuda", dtype=torch.bfloat16)
           for _ in range(n_big)]
    w = torch.randn(LARGE_N, alg.P, generator=g, device="cuda", dtype=torch.bfloat16)
    return big, w


def assert_all_finite(t):
    for a in range(t.shape[0]):  # one component at a time: a 4.8e9-element bool would not fit
        assert torch.isfinite(t[a]).all(), f"non-finite value in component {a}"


@pytest.mark.large
def test_past_2_31_and_2_32_elements_forward():
    alg = fc.Algebra(3)
    need = 3 * alg.D * LARGE_B * LARGE_N * 2 + (2 << 30)
    if free_bytes() < need:
        pytest.skip(f"needs {need / 2**30:.0f} GiB free GPU memory")
    (x, y), w = large_inputs(alg, 2)
    out = torch.full_like(x, float("nan"))  # every element must be written
    fc.ops.sgp_forward(x, y, w, alg, True, out=out, stream=stream_handle())
    rows = boundary_rows(alg.D, LARGE_B, LARGE_N)
    r = torch.tensor(rows, device="cuda")
    want = reference.sgp_np(np64(x[:, r]), np64(y[:, r]), np64(w), alg, True)
    assert rel_err(np64(out[:, r]), want) <= 2e-2  # bfloat16 (SPEC)
    assert_all_finite(out)
    del x, y, out
    free_bytes()


@pytest.mark.large
def test_past_2_31_and_2_32_elements_backward():
    alg = fc.Algebra(3)
    tensor = alg.D * LARGE_B * LARGE_N * 2
    need = 5 * tensor + (6 << 30)  # x, y, grad_out, grad_x, grad_y; the float32 check's chunks
    if free_bytes() < need:
        pytest.skip(f"needs {need / 2**30:.0f} GiB free GPU memory")
    (x, y, g), w = large_inputs(alg, 3)
    gx, gy = torch.full_like(x, float("nan")), torch.full_like(y, float("nan"))
    s = stream_handle()
    _, _, gw = fc.ops.sgp_backward(g, x, y, w, alg, True, grad_x=gx, grad_y=gy, stream=s)
    gw = torch.from_dlpack(gw)
    rows = boundary_rows(alg.D, LARGE_B, LARGE_N)
    r = torch.tensor(rows, device="cuda")
    want = reference.sgp_backward_np(np64(g[:, r]), np64(x[:, r]), np64(y[:, r]), np64(w), alg, True)
    # per row, the gradients of x and y depend on that row alone: bfloat16 bound (SPEC)
    assert rel_err(np64(gx[:, r]), want[0]) <= 2e-2
    assert rel_err(np64(gy[:, r]), want[1]) <= 2e-2
    assert_all_finite(gx)
    assert_all_finite(gy)
    del gx, gy
    free_bytes()
    # grad_weight sums every row: the same op in float32 over 128K-row chunks (each exact to
    # ~1e-6), summed in float64; the bfloat16 result is that rounded once
    ref = torch.zeros(LARGE_N, alg.P, dtype=torch.float64, device="cuda")
    w32 = w.float()
    for b0 in range(0, LARGE_B, 1 << 17):
        part = [t[:, b0:b0 + (1 << 17)].float() for t in (g, x, y)]
        ref += torch.from_dlpack(fc.ops.sgp_backward(*part, w32, alg, True, stream=s)[2]).double()
        del part
    assert rel_err(np64(gw), np64(ref)) <= 2e-2
    del x, y, g
    free_bytes()


# --- B8: one row, 65536 features (the two-pass rows of SGP) -----------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("alg", [pytest.param(fc.Algebra(2), id="Cl(2,0)"),
                                 pytest.param(fc.Algebra(3), id="Cl(3,0)")])
def test_sgp_one_row_of_65536_features(alg, dtype):
    check(alg, (1, 65536), dtype, True, seed=17)


# --- K1: out of memory, FCGP --------------------------------------------------------------------


def test_fcgp_out_of_memory_raises_memory_error_and_recovers():
    """With the GPU filled: the raw op's output allocation and its workspace allocation raise
    MemoryError, the torch op raises torch's OutOfMemoryError, and a smaller call still works;
    once memory is back the full call works."""
    alg = fc.Algebra(3)
    # bfloat16 with normalize: out 128 MiB, workspace 258 MiB (o staged in float32, partials)
    x, y, w, _ = make_fcgp(alg, (4096,), 64, 2048, torch.bfloat16, 1)
    xs, ys = x[:, :64].contiguous(), y[:, :64].contiguous()
    s = stream_handle()
    small = torch.from_dlpack(fc.ops.fcgp_forward(xs, ys, w, alg, stream=s))  # loads the kernels first
    out = torch.empty(alg.D, 4096, 2048, dtype=torch.bfloat16, device="cuda")
    free = free_bytes()
    hog = torch.empty(int(free - 64 * 2**20), dtype=torch.uint8, device="cuda")
    try:
        with pytest.raises(MemoryError):
            fc.ops.fcgp_forward(x, y, w, alg, stream=s)  # the 128 MiB output
        with pytest.raises(MemoryError):
            fc.ops.fcgp_forward(x, y, w, alg, out=out, stream=s)  # the 258 MiB workspace
        # whatever the failed calls left in the driver's or torch's pools is taken too
        rest = fill_device()
        with pytest.raises(torch.cuda.OutOfMemoryError):
            fc.gelu_fcgp_norm(x, y, w, alg)
        del rest
        torch.cuda.empty_cache()  # back to the driver, where the raw ops allocate
        again = torch.from_dlpack(fc.ops.fcgp_forward(xs, ys, w, alg, stream=s))
        torch.cuda.synchronize()
        assert torch.equal(again, small)
        del again
    finally:
        del hog
        free_bytes()
    fc.ops.fcgp_forward(x, y, w, alg, out=out, stream=s)
    rows = torch.tensor([0, 63, 4095], device="cuda")
    want = reference.fcgp_np(np64(x[:, rows]), np64(y[:, rows]), np64(w), alg)
    assert rel_err(np64(out[:, rows]), want) <= 2e-2  # bfloat16 (SPEC)


# --- J1/J3: eight threads at once ---------------------------------------------------------------

# (op, algebra, FCGP mode or SGP dtype): every algebra, both ops, the main kernel families
THREAD_CASES = [
    ("sgp", (1, 1, 1), torch.float32),
    ("fcgp", (1, 1, 1), "tf32"),
    ("sgp", (1, -1, -1, -1), torch.bfloat16),
    ("fcgp", (1, -1, -1, -1), "float32"),
    ("sgp", (1, 1), torch.float16),
    ("fcgp", (0, 1, 1, 1), "bfloat16"),
    ("sgp", (1, 1, 1, 1), torch.float32),
    ("fcgp", (1, 1), "fp32-bf16"),
]


def thread_inputs(case, seed):
    op, metric, kind = case
    alg = fc.Algebra(metric)
    if op == "sgp":
        x, y, w = make(alg, (192, 96), kind, seed)
        return alg, x, y, w, torch.randn_like(x)
    return (alg, *make_fcgp(alg, (192,), 96, 64, FCGP_MODES[kind][0], seed))


def run_case(case, alg, x, y, w, g):
    """Torch op forward + autograd backward, then the raw ops on the current stream."""
    op, _, kind = case
    leaves = [t.detach().clone().requires_grad_() for t in (x, y, w)]
    s = stream_handle()
    if op == "sgp":
        out = fc.gelu_sgp_norm(*leaves, alg)
        raw = [fc.ops.sgp_forward(x, y, w, alg, stream=s), *fc.ops.sgp_backward(g, x, y, w, alg, stream=s)]
    else:
        precision = FCGP_MODES[kind][1]
        out = fc.gelu_fcgp_norm(*leaves, alg, precision=precision)
        raw = [fc.ops.fcgp_forward(x, y, w, alg, precision=precision, stream=s),
               *fc.ops.fcgp_backward(g, x, y, w, alg, precision=precision, stream=s)]
    grads = torch.autograd.grad(out, leaves, g)
    return [out.detach(), *grads, *(torch.from_dlpack(t) for t in raw)]


@pytest.mark.parametrize("own_stream", [False, True], ids=["shared-stream", "own-streams"])
def test_threads_match_serial_bitwise(own_stream):
    inputs = [thread_inputs(c, 100 + i) for i, c in enumerate(THREAD_CASES)]
    serial = [run_case(c, *inp) for c, inp in zip(THREAD_CASES, inputs, strict=True)]
    torch.cuda.synchronize()
    start = threading.Barrier(len(THREAD_CASES), timeout=120)

    def worker(i):
        stream = torch.cuda.Stream() if own_stream else None
        start.wait()  # every thread makes its calls at the same time
        with torch.cuda.stream(stream):  # None: the thread's current (default) stream
            results = [run_case(THREAD_CASES[i], *inputs[i]) for _ in range(4)]
        if stream is not None:
            stream.synchronize()
        return results

    with ThreadPoolExecutor(len(THREAD_CASES)) as pool:
        futures = [pool.submit(worker, i) for i in range(len(THREAD_CASES))]
        results = [f.result(timeout=600) for f in futures]
    torch.cuda.synchronize()
    for case, want, runs in zip(THREAD_CASES, serial, results, strict=True):
        for k, run in enumerate(runs):
            for j, (a, b) in enumerate(zip(run, want, strict=True)):
                assert torch.equal(a, b), f"{case} run {k} result {j}"


# --- H2: capture, poison, replay ------------------------------------------------------------------

GRAPH_CASES = [
    pytest.param("sgp", torch.float32, id="sgp-float32"),
    pytest.param("sgp", torch.bfloat16, id="sgp-bfloat16"),
    pytest.param("fcgp", "float32", id="fcgp-float32"),
    pytest.param("fcgp", "tf32", id="fcgp-tf32"),
    pytest.param("fcgp", "fp32-bf16", id="fcgp-fp32-bf16"),
    pytest.param("fcgp", "bfloat16", id="fcgp-bfloat16"),
]


@pytest.mark.parametrize("op,kind", GRAPH_CASES)
def test_capture_poison_replay_restores_outputs(op, kind):
    """A kernel that escaped the capturing stream would not be in the graph: the poison (NaN)
    written over the outputs after capture would survive the replay (Liger's probe)."""
    alg = fc.Algebra((1, -1, -1, -1))
    if op == "sgp":
        x, y, w = make(alg, (96, 80), kind, 21)
        g = torch.randn_like(x)

        def f(a, b, c):
            return fc.gelu_sgp_norm(a, b, c, alg)
    else:
        x, y, w, g = make_fcgp(alg, (96,), 80, 48, FCGP_MODES[kind][0], 21)
        precision = FCGP_MODES[kind][1]

        def f(a, b, c):
            return fc.gelu_fcgp_norm(a, b, c, alg, precision=precision)

    x, y, w = (t.requires_grad_() for t in (x, y, w))
    eager_leaves = [t.detach().clone().requires_grad_() for t in (x, y, w)]
    eager = f(*eager_leaves)
    eager.backward(g)
    want = [eager.detach(), *(t.grad for t in eager_leaves)]
    graph, got = capture_step(f, x, y, w, g)
    for replay in range(2):
        graph.replay()
        torch.cuda.synchronize()
        for name, a, b in zip(GRADS, got, want, strict=True):
            assert torch.equal(a, b), f"{name} after replay {replay}"
        for t in got:
            t.fill_(float("nan"))  # poison


# --- H1: stream ordering, FCGP --------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["same-stream", "waited-stream", "raw-same-stream", "raw-waited-stream"])
def test_fcgp_stream_ordering_probe(variant):
    """Stream s1 sleeps, then rewrites x; the op, on s1 after the copy or on s2 after s2 waits
    on s1, must see the new x (xformers' probe). A launch on another stream would read the
    old x: torch's streams do not synchronize with the legacy default stream."""
    alg = fc.Algebra(3)
    x, y, w, _ = make_fcgp(alg, (256,), 128, 128, torch.float32, 9)
    new_x = torch.randn_like(x)
    raw = variant.startswith("raw")

    def op(a):
        if raw:
            buf = fc.ops.fcgp_forward(a, y, w, alg, precision="tf32", stream=stream_handle())
            return torch.from_dlpack(buf)
        return fc.gelu_fcgp_norm(a, y, w, alg, precision="tf32")

    expect = op(new_x)
    torch.cuda.synchronize()
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(50_000_000)  # ~30 ms: the op is issued long before the copy runs
        x.copy_(new_x)
        if variant.endswith("same-stream"):
            out = op(x)
    if variant.endswith("waited-stream"):
        s2.wait_stream(s1)
        with torch.cuda.stream(s2):
            out = op(x)
    torch.cuda.synchronize()
    assert torch.equal(out, expect)


# --- G1 / A4: a second GPU ------------------------------------------------------------------------


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_fcgp_on_second_gpu_and_mixed_devices():
    alg = fc.Algebra(3)
    torch.cuda.set_device(0)
    x, y, w, g = (t.to("cuda:1") for t in make_fcgp(alg, (32,), 48, 40, torch.float32, 2))
    torch.cuda.synchronize(1)
    before = torch.cuda.memory_allocated(0)
    leaves = [t.clone().requires_grad_() for t in (x, y, w)]
    out = fc.gelu_fcgp_norm(*leaves, alg, precision="highest")
    out.backward(g)
    assert torch.cuda.current_device() == 0
    assert out.device == torch.device("cuda:1")
    assert all(t.grad.device == torch.device("cuda:1") for t in leaves)
    assert torch.cuda.memory_allocated(0) == before
    args = [np64(t) for t in (x, y, w)]
    want = [reference.fcgp_np(*args, alg), *reference.fcgp_backward_np(np64(g), *args, alg)]
    for name, a, b in zip(GRADS, [out, *(t.grad for t in leaves)], want, strict=True):
        assert rel_err(np64(a), b) <= 1e-5, name  # float32 "highest", Cl(3,0), 40 features
    s1 = torch.cuda.current_stream(1).cuda_stream
    buf = fc.ops.fcgp_forward(x, y, w, alg, precision="highest", stream=s1)
    assert buf.device == "cuda:1" and torch.cuda.current_device() == 0
    assert torch.equal(torch.from_dlpack(buf), out.detach())

    x0, w0, g0 = x.to("cuda:0"), w.to("cuda:0"), g.to("cuda:0")
    with pytest.raises(RuntimeError, match="y: expected device cuda:1"):
        fc.gelu_fcgp_norm(x, y.to("cuda:0"), w, alg)
    with pytest.raises(RuntimeError, match="weight: expected device cuda:1"):
        fc.gelu_fcgp_norm(x, y, w0, alg)
    with pytest.raises(RuntimeError, match="y: expected device cuda:0"):
        fc.ops.fcgp_forward(x0, y, w0, alg)
    with pytest.raises(RuntimeError, match="grad_out: expected device cuda:1"):
        fc.ops.fcgp_backward(g0, x, y, w, alg)
    assert torch.cuda.current_device() == 0
