"""Stream ordering of torch tensors handed to the raw ops (marked `gpu`; skipped without one).

PyTorch lends its tensors through the DLPack C exchange API, which does no stream handshake:
the op asks torch for its current work stream and makes the launch stream wait for it. Here the
arrays are written on a torch side stream after a long GPU sleep, and the op is called at once,
inside that stream's context (so torch's current stream is the producer's, as PyTorch requires
for any consumer). The op launches on the legacy default stream (stream=None), on an unrelated
stream, or on the producer's own stream; without the wait it would read the NaN the arrays held
before (or be overwritten by the late write of `out`). Results are compared bitwise with the
same call made after a full synchronize.

Shapes (SPEC section 2): x, y (D, B, N_in); SGP weight (N, P); FCGP weight (P, N_in, N_out).
"""

import pytest

torch = pytest.importorskip("torch")

import flashclifford as fc  # noqa: E402

pytestmark = pytest.mark.gpu

# ~0.1 s on a 1.5-2 GHz GPU: far longer than the host takes to reach the kernel launch
SLEEP_CYCLES = 200_000_000
ALG = fc.Algebra(3)


def _inputs(op):
    g = torch.Generator(device="cuda").manual_seed(7)
    n_in, n_out = (96, 96) if op == "sgp" else (32, 48)
    x = torch.randn(ALG.D, 64, n_in, generator=g, device="cuda")
    y = torch.randn(ALG.D, 64, n_in, generator=g, device="cuda")
    shape = (n_in, ALG.P) if op == "sgp" else (ALG.P, n_in, n_out)
    w = torch.randn(*shape, generator=g, device="cuda") / n_in**0.5
    return x, y, w


def _call(op, x, y, w, **kwargs):
    f = fc.ops.sgp_forward if op == "sgp" else fc.ops.fcgp_forward
    return f(x, y, w, ALG, True, **kwargs)


def _expected(op, x, y, w):
    torch.cuda.synchronize()
    out = torch.from_dlpack(_call(op, x, y, w)).clone()
    torch.cuda.synchronize()
    return out


def _launch_stream(launch, side, other):
    return {"legacy": None, "other": other.cuda_stream, "producer": side.cuda_stream}[launch]


def test_torch_lends_through_the_exchange_api():
    # not required for correctness (without it __dlpack__(stream=...) orders the work), but the
    # other tests here only exercise the producer-stream wait when torch has the fast path
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__")


@pytest.mark.parametrize("launch", ["legacy", "other", "producer"])
@pytest.mark.parametrize("op", ["sgp", "fcgp"])
def test_inputs_written_late_on_a_side_stream(op, launch):
    x, y, w = _inputs(op)
    expect = _expected(op, x, y, w)
    bufs = [torch.full_like(t, float("nan")) for t in (x, y, w)]
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        for b, t in zip(bufs, (x, y, w), strict=True):
            b.copy_(t)
        got = _call(op, *bufs, stream=_launch_stream(launch, side, other))
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(got), expect)


@pytest.mark.parametrize("launch", ["legacy", "other", "producer"])
@pytest.mark.parametrize("op", ["sgp", "fcgp"])
def test_out_written_late_on_a_side_stream(op, launch):
    """A write to `out` still pending on the producer's stream must land before ours, not after."""
    x, y, w = _inputs(op)
    expect = _expected(op, x, y, w)
    out = torch.empty_like(expect)
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        out.fill_(7.0)
        res = _call(op, x, y, w, out=out, stream=_launch_stream(launch, side, other))
    assert res is out
    torch.cuda.synchronize()
    assert torch.equal(out, expect)


def test_many_calls_from_a_side_stream_stay_ordered():
    """Chained calls on the legacy stream, each reading what torch wrote on the side stream just
    before: every one must see its own input (one event per call, reused streams)."""
    x, y, w = _inputs("sgp")
    scales = [0.5, 1.0, 2.0, 3.0]
    expect = [_expected("sgp", x * s, y, w) for s in scales]
    buf = torch.full_like(x, float("nan"))
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    got, keep = [], []
    with torch.cuda.stream(side):
        for s in scales:
            torch.cuda._sleep(SLEEP_CYCLES // 4)
            xs = buf.copy_(x).mul_(s).clone()  # a fresh tensor per call: buf is rewritten next
            keep.append(xs)  # torch must not reuse its memory before our kernel ran
            got.append(_call("sgp", xs, y, w))
    torch.cuda.synchronize()
    for g, e in zip(got, expect, strict=True):
        assert torch.equal(torch.from_dlpack(g), e)
