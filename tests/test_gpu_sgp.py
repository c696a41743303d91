"""CUDA SGP on a GPU (marked `gpu`; skipped without one): the CPU test matrix on CUDA against
the float64 einsum, CUDA vs CPU backend, long rows (the two-pass path), determinism, side
streams and stream ordering, CUDA graphs, DLPack results, misaligned inputs (and the narrow
stage pieces they select), odd 2-byte rows (the long kernels with short row groups), the
2-byte backward's wide resident kernels, the single-stage mode, OOM, cuda:1."""

import os
import subprocess
import sys

import pytest
from conftest import ALGEBRAS, rel_err

torch = pytest.importorskip("torch")

from gpu_util import capture_step, check, make, np64, stream_handle  # noqa: E402

import flashclifford as fc  # noqa: E402
from flashclifford import reference  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_matrix(alg, dtype, normalize):
    check(alg, (3, 5, 37), dtype, normalize, seed=hash((alg.name, str(dtype))) % 997)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("alg", ALGEBRAS)
def test_matrix_two_byte_resident_rows(alg, dtype, normalize):
    # test_matrix's N = 37 is odd, which in 2-byte types leaves no stage piece (the long
    # kernels); an even N takes the resident ones
    check(alg, (3, 5, 38), dtype, normalize, seed=hash((alg.name, str(dtype), 38)) % 997)


@pytest.mark.parametrize("shape", [(1, 1), (1, 64), (7, 1), (33, 129), (2, 1000), (2, 5000), (1, 16384)])
@pytest.mark.parametrize("alg", [ALGEBRAS[1], ALGEBRAS[2]])
def test_shapes_including_long_rows(alg, shape):
    check(alg, shape, torch.float32, True)
    check(alg, shape, torch.float64, True)


@pytest.mark.parametrize("alg", ALGEBRAS)
def test_cuda_matches_cpu_backend(alg):
    x, y, w = make(alg, (17, 96), torch.float64, 3)
    g = torch.randn_like(x)
    got = (fc.ops.sgp_forward(x, y, w, alg), *fc.ops.sgp_backward(g, x, y, w, alg))
    cu = [torch.from_dlpack(t) for t in got]
    cpu = [fc.ops.sgp_forward(np64(x), np64(y), np64(w), alg),
           *fc.ops.sgp_backward(np64(g), np64(x), np64(y), np64(w), alg)]
    for a, b in zip(cu, cpu, strict=True):
        assert rel_err(np64(a), b) <= 1e-12


def test_deterministic_run_to_run():
    alg = fc.Algebra(3)
    x, y, w = (t.requires_grad_() for t in make(alg, (4096, 256), torch.float32, 5))
    g = torch.randn(alg.D, 4096, 256, device="cuda")
    results = []
    for _ in range(3):
        for t in (x, y, w):
            t.grad = None
        out = fc.gelu_sgp_norm(x, y, w, alg)
        out.backward(g)
        results.append([out.detach().clone(), x.grad.clone(), y.grad.clone(), w.grad.clone()])
    for r in results[1:]:
        for a, b in zip(r, results[0], strict=True):
            assert torch.equal(a, b)


def test_side_stream_and_ordering_probe():
    """Stream s1 sleeps then rewrites x; the op on s2 (after s2 waits on s1) must see it."""
    alg = fc.Algebra(3)
    x, y, w = make(alg, (256, 512), torch.float32, 9)
    new_x = torch.randn_like(x)
    expect = fc.gelu_sgp_norm(new_x, y, w, alg)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(50_000_000)
        x.copy_(new_x)
    s2.wait_stream(s1)
    with torch.cuda.stream(s2):
        out = fc.gelu_sgp_norm(x, y, w, alg)
    torch.cuda.synchronize()
    assert torch.equal(out, expect)


def test_raw_ops_on_a_stream_and_dlpack_result():
    alg = fc.Algebra(2)
    x, y, w = make(alg, (64, 128), torch.float32, 11)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        buf = fc.ops.sgp_forward(x, y, w, alg, stream=s.cuda_stream)
        out = torch.from_dlpack(buf)
    assert out.shape == x.shape and out.device == x.device
    torch.cuda.synchronize()
    assert torch.equal(out, fc.gelu_sgp_norm(x, y, w, alg))


def test_cuda_graph_capture_and_replay_forward_backward():
    alg = fc.Algebra(3)
    x, y, w = (t.requires_grad_() for t in make(alg, (128, 256), torch.float32, 13))
    g = torch.randn(alg.D, 128, 256, device="cuda")
    graph, (out, *_) = capture_step(lambda a, b, c: fc.gelu_sgp_norm(a, b, c, alg), x, y, w, g)
    with torch.no_grad():
        x.copy_(torch.randn_like(x))
    for t in (out, x.grad, y.grad, w.grad):
        t.fill_(float("nan"))  # poison: the replay must rewrite everything
    graph.replay()
    torch.cuda.synchronize()
    xe, ye, we = (t.detach().clone().requires_grad_() for t in (x, y, w))
    oe = fc.gelu_sgp_norm(xe, ye, we, alg)
    oe.backward(g)
    assert torch.equal(out, oe)
    for a, b in ((x.grad, xe.grad), (y.grad, ye.grad), (w.grad, we.grad)):
        assert torch.equal(a, b)


def test_misaligned_views_take_the_scalar_path():
    alg = fc.Algebra(3)
    base = torch.randn(alg.D * 4 * 65 + 1, device="cuda")
    x = base[1:].view(alg.D, 4, 65)  # 4-byte offset: no 16-byte loads
    y = torch.randn_like(x)
    w = torch.randn(65, alg.P, device="cuda")
    ref = reference.sgp_np(np64(x), np64(y), np64(w), alg)
    assert rel_err(np64(fc.gelu_sgp_norm(x, y, w, alg)), ref) <= 1e-5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_two_byte_views_aligned_to_four_bytes_take_the_narrow_stage_pieces(dtype):
    # a 2-element offset: not 8- or 16-byte aligned, but 4-byte aligned with an even N, so
    # the resident kernels stage their rows in 4-byte cp.async pieces (sgp_launch stage_piece)
    alg = fc.Algebra(3)
    n = alg.D * 8 * 66

    def offset_view():
        t = torch.randn(n + 2, device="cuda").to(dtype)[2:].view(alg.D, 8, 66)
        assert t.data_ptr() % 8 == 4
        return t.requires_grad_()

    xs, ys = offset_view(), offset_view()
    w = torch.randn(66, alg.P, device="cuda").to(dtype).requires_grad_()
    out = fc.gelu_sgp_norm(xs, ys, w, alg)
    g = torch.randn_like(out)
    out.backward(g)
    args = [np64(t) for t in (xs, ys, w)]
    assert rel_err(np64(out), reference.sgp_np(*args, alg)) <= 2e-2
    for t, r in zip((xs, ys, w), reference.sgp_backward_np(np64(g), *args, alg), strict=True):
        assert rel_err(np64(t.grad), r) <= 2e-1


@pytest.mark.parametrize("shape", [(10000, 37), (300, 511), (5, 2047)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_odd_rows_in_two_byte_types_take_the_long_kernels(dtype, shape):
    # an odd N leaves 2-byte rows no 4-byte stage piece: the long-row kernels, with a row
    # group sized to the row and several row groups a block (forward kLong, backward
    # kLongShared); 10000 short rows make each block loop over many row groups
    check(fc.Algebra(3), shape, dtype, True, seed=shape[1])


@pytest.mark.parametrize(
    "metric, shape, tx",
    [(3, (600, 256), 128), (3, (300, 510), 256), (3, (40, 1024), 512), (3, (6, 2048), 512),
     (2, (600, 512), 128), (2, (300, 1024), 512)],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_wide_two_byte_backward(dtype, metric, shape, tx):
    # The 2-byte backward's resident rows come twice as wide, 2 features a thread at Cl(3,0)
    # and 4 at Cl(2,0) (x, y and grad_out read again from the stage after the row reduction;
    # Cl(3,0) weights staged in the data type), where a prefetch stage fits and the narrow
    # width keeps no more warps resident: a Cl(3,0) row of 256 on 128 threads, of 510 on 256, of 1024 on 512
    # (with the 227 KB of shared memory a block of sm_90); Cl(2,0) N = 512 on 128 threads, and
    # N = 1024 at the narrow width (512 threads, 16 warps; the wide rows would leave 8).
    # Cl(3,0) N = 2048 takes the long kernels at 1 a thread. B is large enough that the wide
    # rows fill an H100 (with fewer rows the narrow width keeps more warps busy, and wins).
    B, N = shape
    alg = fc.Algebra(metric)
    got_tx, _, _, mode, _, _ = fc._C._sgp_config(True, alg.id, str(dtype).split(".")[1], B, N)
    smem = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", 0)
    assert got_tx == tx
    if N == 2048:
        assert mode != 0
    elif N != 1024 or metric == 2 or smem >= 227 * 1024:
        assert mode == 0
    check(alg, shape, dtype, True, seed=N)


def test_single_stage_mode_matches_the_reference():
    """FLASHCLIFFORD_SGP_PIPE=0 (read once per process): one input stage, no prefetch ahead, the
    path resident rows also take when two stages do not fit in shared memory."""
    code = (
        "import torch, numpy as np, flashclifford as fc\n"
        "from flashclifford import reference\n"
        "alg = fc.Algebra(3); g0 = torch.Generator(device='cuda').manual_seed(0)\n"
        "x, y = (torch.randn(alg.D, 300, 250, device='cuda', generator=g0, dtype=torch.float64)"
        ".requires_grad_() for _ in range(2))\n"
        "w = torch.randn(250, alg.P, device='cuda', generator=g0, dtype=torch.float64).requires_grad_()\n"
        "out = fc.gelu_sgp_norm(x, y, w, alg); g = torch.randn_like(out); out.backward(g)\n"
        "a = [t.detach().cpu().numpy() for t in (x, y, w)]\n"
        "err = lambda u, r: float(np.linalg.norm(u - r) / np.linalg.norm(r))\n"
        "e = [err(out.detach().cpu().numpy(), reference.sgp_np(*a, alg))]\n"
        "e += [err(t.grad.cpu().numpy(), r) for t, r in zip((x, y, w), "
        "reference.sgp_backward_np(g.cpu().numpy(), *a, alg))]\n"
        "assert max(e) <= 1e-12, e\n"
    )
    env = dict(os.environ, FLASHCLIFFORD_SGP_PIPE="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize(
    "alg_id, dtype, B, N",
    [(1, torch.float32, 20011, 96), (0, torch.bfloat16, 30011, 128), (2, torch.float16, 9001, 64),
     (1, torch.float64, 6007, 40), (1, torch.bfloat16, 20011, 128)],
    ids=str,
)
def test_every_resident_launch_shape_gives_the_same_rows(alg_id, dtype, B, N):
    """Rows a block (named barriers per row group) and input stages (the ring of 1-4 stages)
    change how rows are scheduled, never a row's arithmetic: out, grad x, grad y bitwise equal
    to the default shape's under every resident shape that fits (forced with the tuning
    override); grad weight (partials summed per block) close. Enough rows that the ring wraps.
    The width of the 2-byte backward (features a thread) is chosen before the override, so
    it stays; a pass whose forced shape is not resident is compared within the dtype's bound."""
    alg = ALGEBRAS[alg_id].values[0]
    x, y, w = make(alg, (B, N), dtype, 11)
    g = torch.randn_like(x)
    dt = str(dtype).split(".")[1]

    def run():  # the raw ops size the backward's workspace for the forced shape
        s = stream_handle()
        out = fc.ops.sgp_forward(x, y, w, alg, stream=s)
        return [torch.from_dlpack(t) for t in (out, *fc.ops.sgp_backward(g, x, y, w, alg, stream=s))]

    ref = run()
    shapes = set()
    try:
        for ty in range(1, 9):
            for stages in range(1, 5):
                fc._C._sgp_shape_override(ty, stages)
                cfgs = [fc._C._sgp_config(b, alg.id, dt, B, N) for b in (False, True)]
                forced = [c[3] == 0 and (c[1], c[2]) == (ty, stages) for c in cfgs]
                if not any(forced):
                    continue
                shapes.add((ty, stages))
                got = run()
                tol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 2e-2)
                for k in range(3):
                    if forced[k > 0]:
                        assert torch.equal(got[k], ref[k]), (ty, stages, k)
                    else:
                        assert rel_err(np64(got[k]), np64(ref[k])) <= tol, (ty, stages, k)
                assert rel_err(np64(got[3]), np64(ref[3])) <= tol, (ty, stages)
    finally:
        fc._C._sgp_shape_override(0, 0)
    assert len(shapes) >= 4, shapes
    check(alg, (B // 50, N), dtype, True, seed=3)


def test_out_of_memory_raises_memory_error_and_recovers():
    """The raw op allocates its output with cudaMalloc: with the GPU filled, MemoryError;
    once memory is back, the next call works."""
    alg = fc.Algebra(3)
    x, y, w = make(alg, (4096, 2048), torch.float32, 1)  # output: 256 MiB
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(int(free - 64 * 2**20), dtype=torch.uint8, device="cuda")
    with pytest.raises(MemoryError):
        fc.ops.sgp_forward(x, y, w, alg)
    del hog
    torch.cuda.empty_cache()
    out = torch.from_dlpack(fc.ops.sgp_forward(x, y, w, alg))
    assert out.isfinite().all()


def test_empty_batch_on_cuda():
    alg = fc.Algebra(3)
    x = torch.empty(alg.D, 0, 16, device="cuda", requires_grad=True)
    w = torch.randn(16, alg.P, device="cuda", requires_grad=True)
    out = fc.gelu_sgp_norm(x, x, w, alg)
    out.sum().backward()
    assert out.shape == x.shape and torch.equal(w.grad, torch.zeros_like(w))


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu_and_mixed_devices():
    alg = fc.Algebra(3)
    torch.cuda.set_device(0)
    x, y, w = (t.to("cuda:1") for t in make(alg, (32, 64), torch.float32, 2))
    before = torch.cuda.memory_allocated(0)
    out = fc.gelu_sgp_norm(x, y, w, alg)
    assert out.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    assert torch.cuda.memory_allocated(0) == before
    ref = reference.sgp_np(np64(x), np64(y), np64(w), alg)
    assert rel_err(np64(out), ref) <= 1e-5
    with pytest.raises(RuntimeError, match="expected device cuda:1"):
        fc.gelu_sgp_norm(x, y.to("cuda:0"), w, alg)
