"""The Hopper (sm_90a) FCGP forward (csrc/cuda/fcgp_sm90a.cu: wgmma with TMA tiles), on by
default on a compute-capability 9.0 GPU and switched with flashclifford._C._fcgp_sm90 (marked
`gpu`; skipped unless the build has its code and the GPU is compute capability 9.0). With the
switch on, the forward of every eligible call runs on it, and so does the forward that the
backward recomputes: Cl(2,0) and Cl(3,0), tf32, fp32 with bf16 products, bfloat16, normalize on
and off, the gate on and off. Checked against the float64 einsum with the mode's bound
(gpu_util FCGP_MODES, SPEC tolerances), the gradients too, run-to-run bits, and that the path
really ran (its workspace holds W^T). The matrix also runs with the switch off, so that the
mma.sync forward these calls take on other GPUs stays covered on an H100. The Hopper backward
kernels (input and weight gradients; their own switch, _C._fcgp_sm90_bwd, on by default) are
checked the same way, every gradient against the float64 einsum, and bitwise from run to run,
and the backward matrix also with that switch off.

Shapes: x, y (D, *batch, N_in); weight (P, N_in, N_out). N_in is a multiple of 8 (the copy
engine reads rows of a multiple of 16 bytes; other N_in keep the mma.sync forward, checked
too); B and N_out have tails.
"""

import os

import pytest
from conftest import input_sensitivity, seed_for

torch = pytest.importorskip("torch")

from gpu_util import (  # noqa: E402
    FCGP_MODES,
    assert_fcgp,
    assert_mode,
    check_fcgp,
    make_fcgp,
    np64,
    stream_handle,
)

import flashclifford as fc  # noqa: E402
from flashclifford import reference  # noqa: E402

pytestmark = pytest.mark.gpu

ALGS = [pytest.param(fc.Algebra(2), id="Cl(2,0)"), pytest.param(fc.Algebra(3), id="Cl(3,0)")]
MODES = ["tf32", "fp32-bf16", "bfloat16"]
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
PRECISION_CODES = {"highest": 0, "tf32": 1, "bf16": 2}
SHAPES = [
    pytest.param((200,), 64, 104, id="B200-64-104"),  # row and column tails
    pytest.param((3, 23), 120, 70, id="B3x23-120-70"),  # two batch dims, K not whole steps in tf32
    pytest.param((1,), 8, 1, id="B1-8-1"),  # one step, one output feature
    pytest.param((130,), 512, 200, id="B130-512-200"),  # 64 K steps: every stage refilled
]


def _switched(switch, on):
    """Set one of the process-wide switches or settings (_C._fcgp_sm90, _fcgp_sm90_bwd, ...) for a test."""
    if not fc._C.build_info()["fcgp_sm90a"] or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs a build with the sm_90a FCGP kernels and a compute-capability 9.0 GPU")
    before = switch()
    switch(on)
    try:
        yield
    finally:
        switch(before)


@pytest.fixture
def sm90_on():
    yield from _switched(fc._C._fcgp_sm90, True)


@pytest.fixture(params=[True, False], ids=["sm90", "mma.sync"])
def sm90_either(request):
    yield from _switched(fc._C._fcgp_sm90, request.param)


def workspace(alg, mode, n_in, backward=False, normalize=True):
    dtype, precision = FCGP_MODES[mode][:2]
    # workspace_size plans for normalize on (the larger need): the backward then recomputes the forward
    return fc._C.workspace_size("fcgp", backward, alg.id, DTYPE_NAMES[dtype], 256, n_in, 64,
                                PRECISION_CODES[precision], True, torch.cuda.current_device())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_the_path_is_planned(sm90_on, alg, mode):
    def on_off(n_in, backward=False):
        on = workspace(alg, mode, n_in, backward)
        fc._C._fcgp_sm90(False)
        off = workspace(alg, mode, n_in, backward)
        fc._C._fcgp_sm90(True)
        return on, off

    wt = alg.P * 64 * 64 * (4 if mode == "tf32" else 2)
    # its workspace holds W^T (P, N_out, N_in) in the operand type; off, it does not; the
    # backward's too (it recomputes the forward's output)
    for backward in (False, True):
        on, off = on_off(64, backward)
        assert on >= off + wt, backward
    # rows of x the copy engine cannot read (not a multiple of 16 bytes) keep the mma.sync forward
    on, off = on_off(61 if mode == "tf32" else 60)
    assert on == off


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", SHAPES)
@pytest.mark.parametrize("alg", ALGS)
def test_matrix(sm90_either, alg, batch, n_in, n_out, mode, normalize):
    seed = seed_for(f"sm90/{alg.name}/{batch}/{mode}") % 997
    check_fcgp(alg, batch, n_in, n_out, mode, normalize, seed=seed)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_gate_off(sm90_on, alg, mode, normalize):
    dtype, precision = FCGP_MODES[mode][:2]
    x, y, w, _ = make_fcgp(alg, (70,), 64, 72, dtype, seed_for(f"sm90-gate/{alg.name}/{mode}") % 997)
    out = fc.gelu_fcgp_norm(x, y, w, alg, normalize, precision=precision, gate=False)
    want = reference.fcgp_np(np64(x), np64(y), np64(w), alg, normalize, gate=False)
    assert_mode(np64(out), want, mode, "out", lambda u: 0.0)  # the mode's fixed bound, no widening


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_deterministic_run_to_run(sm90_on, alg, mode):
    dtype, precision = FCGP_MODES[mode][:2]
    x, y, w, _ = make_fcgp(alg, (300,), 128, 136, dtype, 5)
    a = fc.gelu_fcgp_norm(x, y, w, alg, True, precision=precision)
    b = fc.gelu_fcgp_norm(x, y, w, alg, True, precision=precision)
    assert torch.equal(a, b)


# The grade norm in the forward's epilogue (_C._fcgp_sm90_fwd_norm, on by default): each tile counts
# itself into its 64-row block, waits (bounded: _C._fcgp_sm90_fwd_norm_wait) for the rest, then scales
# its own output; a tile whose wait runs out leaves o for the block's last tile to scale. With the wait
# at 0 every tile but the last gives up, so that fix-up runs for nearly every tile. Off, the kernel
# writes o and its partials and fcgp.cu's finalize pass scales. All three must agree bit for bit, out
# and norms, on N_out with a tail and not a multiple of 4 (the fix-up's scalar loop), an odd
# column-block count (under the 2 x 1 cluster of Cl(3,0) tf32 a tile past N_out that writes nothing
# and is not counted), an odd row-block count (under 1 x 2 a row tile past B), one feature, and a
# batch of more row blocks than the GPU holds at once.
FUSED_SHAPES = [(200, 64, 104), (69, 120, 70), (130, 512, 200), (300, 128, 136), (1, 8, 1), (8200, 64, 192)]


def _forward_with(fused, wait_us, alg, x, y, w, precision):
    before, before_wait = fc._C._fcgp_sm90_fwd_norm(fused), fc._C._fcgp_sm90_fwd_norm_wait()
    try:
        if wait_us is not None:
            fc._C._fcgp_sm90_fwd_norm_wait(wait_us)
        b, n_out = x.shape[1], w.shape[-1]
        out = torch.full((alg.D, b, n_out), float("nan"), dtype=x.dtype, device="cuda")
        norms = torch.full((b, alg.G), float("nan"), device="cuda")
        fc._C.fcgp_forward(x, y, w, alg.id, True, PRECISION_CODES[precision], out=out, norms=norms)
        return out, norms
    finally:
        fc._C._fcgp_sm90_fwd_norm(before)
        fc._C._fcgp_sm90_fwd_norm_wait(before_wait)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_norm_in_the_epilogue_is_the_finalize_pass(sm90_on, alg, mode):
    dtype, precision = FCGP_MODES[mode][:2]
    for b, n_in, n_out in FUSED_SHAPES:
        x, y, w, _ = make_fcgp(alg, (b,), n_in, n_out, dtype, seed_for(f"sm90-norm/{alg.name}/{b}") % 997)
        want = _forward_with(False, None, alg, x, y, w, precision)
        for wait_us in (None, 0):
            got = _forward_with(True, wait_us, alg, x, y, w, precision)
            for k, name in enumerate(("out", "norms")):
                assert torch.equal(got[k], want[k]), (b, n_in, n_out, wait_us, name)
        args = [np64(t) for t in (x, y, w)]

        def sens(u, args=args):
            return input_sensitivity(lambda *a: reference.fcgp_np(*a, alg, True), *args, samples=10, u=u)

        assert_mode(np64(want[0]), reference.fcgp_np(*args, alg, True), mode, "out", sens)


# A NaN or an infinity in the inputs reaches the epilogue's partials and norms: the forward ends, agrees
# with the finalize pass (NaN where the pass has NaN), and the rows without them stay finite. (A
# hand-off that reads the partials against an unset word, as session 49's dropped poll.patch did, must
# never see a NaN sum as unset.)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_norm_in_the_epilogue_with_nan_and_inf(sm90_on, alg, mode):
    dtype, precision = FCGP_MODES[mode][:2]
    x, y, w, _ = make_fcgp(alg, (300,), 128, 136, dtype, seed_for(f"sm90-norm-nan/{alg.name}") % 997)
    bad = (5, 77, 200)
    x[0, bad[0], 3] = float("nan")
    x[1, bad[1], 0] = float("inf")
    y[alg.D - 1, bad[2], 10] = -float("inf")
    want = _forward_with(False, None, alg, x, y, w, precision)
    for wait_us in (None, 0):
        got = _forward_with(True, wait_us, alg, x, y, w, precision)
        for k, name in enumerate(("out", "norms")):
            torch.testing.assert_close(got[k], want[k], rtol=0, atol=0, equal_nan=True, msg=f"{name} {wait_us}")
    good = torch.ones(x.shape[1], dtype=torch.bool, device="cuda")
    good[list(bad)] = False
    assert torch.isnan(want[0][:, bad[0]]).all()
    assert torch.isfinite(want[0][:, good]).all() and torch.isfinite(want[1][good]).all()


# How the forward brings W^T (_C._fcgp_sm90_fwd_wbulk: in stage order by bulk copies, the default, or
# as boxes of W^T) and its cluster shape (_C._fcgp_sm90_fwd_cluster: 1 x 1, the default with the bulk
# copies; 2 x 1 sharing x, y; 1 x 2 sharing W^T) move the same bytes into the same shared-memory image,
# and the bf16 default in one CTA reads W as stored, MN-major, at Cl(2,0) where N_out is a multiple of 8
# (200, 136 and 104 below; at Cl(3,0) too under FLASHCLIFFORD_FCGP_FWD_WMN=1), the same products in the
# same K order; so every
# combination must give the default's output and norms bit for bit: with and without the
# norm, on shapes with column and row tails, an odd column-block count (a tile past N_out under 2 x 1,
# which reads the last column block's W^T), an odd row-block count (a row tile past B under 1 x 2), one
# feature, and K not a whole step; and W at an address off the 16-byte pieces fwd_prep loads it in.
LAYOUT_SHAPES = [(69, 120, 70), (130, 512, 200), (1, 8, 1), (300, 128, 136), (200, 64, 104)]


def _forward_layout(wbulk, cluster, alg, x, y, w, precision, normalize, groups=1):
    # groups: the component groups (1 unless a test asks: the layouts and clusters are one group's)
    before = fc._C._fcgp_sm90_fwd_wbulk(), fc._C._fcgp_sm90_fwd_cluster(), fc._C._fcgp_sm90_fwd_groups()
    try:
        fc._C._fcgp_sm90_fwd_wbulk(wbulk)
        fc._C._fcgp_sm90_fwd_cluster(cluster)
        fc._C._fcgp_sm90_fwd_groups(groups)
        b, n_out = x.shape[1], w.shape[-1]
        out = torch.full((alg.D, b, n_out), float("nan"), dtype=x.dtype, device="cuda")
        norms = torch.full((b, alg.G), float("nan"), device="cuda") if normalize else None
        fc._C.fcgp_forward(x, y, w, alg.id, normalize, PRECISION_CODES[precision], out=out, norms=norms)
        return out, norms
    finally:
        fc._C._fcgp_sm90_fwd_wbulk(before[0])
        fc._C._fcgp_sm90_fwd_cluster(before[1])
        fc._C._fcgp_sm90_fwd_groups(before[2])


@pytest.mark.parametrize("normalize", [True, False], ids=["norm", "plain"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_weight_layouts_and_clusters_agree(sm90_on, alg, mode, normalize):
    dtype, precision = FCGP_MODES[mode][:2]
    for b, n_in, n_out in LAYOUT_SHAPES:
        x, y, w, _ = make_fcgp(alg, (b,), n_in, n_out, dtype, seed_for(f"sm90-layout/{alg.name}/{b}") % 997)
        want = _forward_layout(True, 1, alg, x, y, w, precision, normalize)
        assert not torch.isnan(want[0]).any()
        for wbulk in (True, False):
            for cluster in (1, 2, 3):
                got = _forward_layout(wbulk, cluster, alg, x, y, w, precision, normalize)
                assert torch.equal(got[0], want[0]), (b, n_in, n_out, wbulk, cluster, "out")
                if normalize:
                    assert torch.equal(got[1], want[1]), (b, n_in, n_out, wbulk, cluster, "norms")
        # W one element past a 16-byte boundary: fwd_prep reads it element by element instead of in
        # 16-byte pieces (as it also does when N_out's rows are not whole pieces), and bf16 takes W^T
        # in stage order instead of W as stored, to the same bits
        flat = torch.empty(w.numel() + 1, dtype=w.dtype, device=w.device)
        w_odd = flat[1:].view_as(w)
        w_odd.copy_(w)
        got = _forward_layout(True, 1, alg, x, y, w_odd, precision, normalize)
        assert torch.equal(got[0], want[0]), (b, n_in, n_out, "unaligned W", "out")
        args = [np64(t) for t in (x, y, w)]

        def sens(u, args=args):
            return input_sensitivity(lambda *a: reference.fcgp_np(*a, alg, normalize), *args, samples=10, u=u)

        assert_mode(np64(want[0]), reference.fcgp_np(*args, alg, normalize), mode, "out", sens)


# The forward in two component groups (_C._fcgp_sm90_fwd_groups, Cl(3,0) only; the rule's choice
# there): a CTA computes half the output components over 128 columns, W^T's paths in slot order.
# Each output takes the same products in the same K order as in one group, so without the norm the
# result is one group's bit for bit; with it the grade sums run over 128-column partials instead of
# 64-column ones, so the norm differs in its last bits: there the float64 reference judges, and one
# group's result is within rounding. The shapes: LAYOUT_SHAPES' tails (N_out 1, 70, 104, 136, 200: a
# last 128-column block part empty, a row tile past B), and a zero wait, so that tiles give up and
# the last one scales the rest.
def _kernel_names(fn):
    """The names of the CUDA kernels fn launches, by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events()}


def _fwd_kernel_names(fn):
    """The forward GEMM kernels fn launches, by torch.profiler's names."""
    return {n for n in _kernel_names(fn) if "fwd_tma_kernel" in n}


def _last_template_args(names):
    """The kernels' last template arguments (a forward's component groups, go_rows' columns a load)."""
    return {n.split("(")[0].rstrip(">").split(",")[-1].strip() for n in names}


@pytest.mark.parametrize("normalize", [True, False], ids=["norm", "plain"])
@pytest.mark.parametrize("mode", MODES)
def test_component_groups_agree(sm90_on, mode, normalize):
    alg = fc.Algebra(3)
    dtype, precision = FCGP_MODES[mode][:2]
    before = fc._C._fcgp_sm90_fwd_norm_wait()
    try:
        for b, n_in, n_out in LAYOUT_SHAPES:
            x, y, w, _ = make_fcgp(alg, (b,), n_in, n_out, dtype, seed_for(f"sm90-groups/{b}") % 997)
            want = _forward_layout(True, 1, alg, x, y, w, precision, normalize, groups=1)
            args = [np64(t) for t in (x, y, w)]

            def sens(u, args=args):
                return input_sensitivity(lambda *a: reference.fcgp_np(*a, alg, normalize), *args, samples=10, u=u)

            # 0: the rule, one group only under W as stored everywhere (read at start-up)
            rule = "1" if os.environ.get("FLASHCLIFFORD_FCGP_FWD_WMN") == "1" else "2"
            for groups, runs in ((1, "1"), (2, "2"), (0, rule)):
                names = _fwd_kernel_names(
                    lambda g=groups: _forward_layout(True, 1, alg, x, y, w, precision, normalize, groups=g))
                assert names and _last_template_args(names) == {runs}, (groups, names)
            for wait_us in (100, 0) if normalize else (100,):
                fc._C._fcgp_sm90_fwd_norm_wait(wait_us)
                got = _forward_layout(True, 1, alg, x, y, w, precision, normalize, groups=2)
                assert not torch.isnan(got[0]).any()
                if not normalize:
                    assert torch.equal(got[0], want[0]), (b, n_in, n_out, "out")
                    continue
                assert_mode(np64(got[0]), reference.fcgp_np(*args, alg, normalize), mode, "out", sens)
                torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)
                tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
                torch.testing.assert_close(got[0].float(), want[0].float(), rtol=tol, atol=tol)
            # the same inputs twice: the same bits
            again = _forward_layout(True, 1, alg, x, y, w, precision, normalize, groups=2)
            assert torch.equal(again[0], got[0])
    finally:
        fc._C._fcgp_sm90_fwd_norm_wait(before)


@pytest.mark.parametrize("mode", MODES)
def test_unaligned_rows_fall_back(sm90_on, mode):
    # N_in = 36: tf32 rows of 144 bytes (copy engine), bf16 rows of 72 (mma.sync); both correct
    check_fcgp(fc.Algebra(3), (65,), 36, 40, mode, True, seed=11)


# The Hopper backward kernels (fcgp_wgmma_gz.cuh, fcgp_wgmma_gw.cuh), switched on with
# _C._fcgp_sm90_bwd: N_in and N_out not multiples of their tiles (gz: 16 or 32 columns of N_in,
# over a pair of CTAs for Cl(3,0) tf32; gW: 48 of N_out, in two path groups at D = 8), a batch
# that ends inside a step and one whose weight-gradient tiles are cut into segments of the batch on
# several blocks, rows of N_in or N_out of any length (the backward reads only its own transposed
# copies: go^T, xg^T, yg^T need no alignment of the inputs' rows), and more gW tiles than an H100
# has SMs (fcgp_gw_sched.h: Cl(3,0)'s 176 tiles of 512 x 528 take a round of whole tiles, then the
# other 44 in three segments each; Cl(2,0)'s 88 two rounds of segments)
BWD_SHAPES = [
    pytest.param((200,), 64, 104, id="B200-64-104"),
    pytest.param((3, 23), 120, 72, id="B3x23-120-72"),  # batch 69: a step's tail
    pytest.param((1,), 8, 8, id="B1-8-8"),
    pytest.param((1000,), 72, 56, id="B1000-72-56"),  # gW tiles in 8 segments of the batch
    pytest.param((37,), 45, 32, id="B37-45-32"),  # N_in 45: the mma.sync forward, the Hopper backward
    pytest.param((66,), 40, 45, id="B66-40-45"),  # N_out 45: rows of go not 16 bytes
    pytest.param((1,), 8, 1, id="B1-8-1"),  # one normalized feature
    pytest.param((2, 128), 64, 40, id="B2x128-64-40"),  # whole bf16 steps: xg^T, yg^T in grad_x, grad_y
    pytest.param((200,), 512, 528, id="B200-512-528"),  # gW: whole-tile rounds, then segments
]


@pytest.fixture
def bwd_on(sm90_on):
    yield from _switched(fc._C._fcgp_sm90_bwd, True)


# off: the mma.sync backward these calls take on other GPUs, still covered on an H100
@pytest.fixture(params=[True, False], ids=["sm90-bwd", "mma.sync-bwd"])
def bwd_either(sm90_on, request):
    yield from _switched(fc._C._fcgp_sm90_bwd, request.param)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", BWD_SHAPES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward(bwd_either, alg, batch, n_in, n_out, mode, normalize):
    seed = seed_for(f"sm90-bwd/{alg.name}/{batch}/{n_in}/{mode}") % 997
    check_fcgp(alg, batch, n_in, n_out, mode, normalize, seed=seed)


# From 2048 rows the Hopper backward runs in two batch chunks: go^T and gW's transposed operands
# span half the batch, the second chunk's gW adds the first one's sum (kept in grad_weight when it
# is fp32, in an fp32 stash for bfloat16), and the input
# gradients of a chunk overwrite gW's operands of that chunk only (in grad_x, grad_y when its rows
# are whole blocks of 16: B 2048; in the workspace otherwise: B 2085, whose chunks are 1056 and
# 1029 rows)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", [
    pytest.param((2048,), 64, 40, id="B2048-64-40"),
    pytest.param((5, 417), 72, 24, id="B5x417-72-24"),
])
@pytest.mark.parametrize("alg", ALGS)
def test_backward_chunked(bwd_on, alg, batch, n_in, n_out, mode, normalize):
    seed = seed_for(f"sm90-chunks/{alg.name}/{batch}/{mode}/{normalize}") % 997
    check_fcgp(alg, batch, n_in, n_out, mode, normalize, seed=seed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward_planned_and_deterministic(bwd_on, alg, mode):
    dtype, precision = FCGP_MODES[mode][:2]
    size = 2 if dtype == torch.bfloat16 or mode == "fp32-bf16" else 4
    B, n_in, n_out = 3008, 64, 80

    def ws(b=B):
        return fc._C.workspace_size("fcgp", True, alg.id, DTYPE_NAMES[dtype], b, n_in, n_out,
                                    PRECISION_CODES[precision], True, torch.cuda.current_device())

    # its workspace holds go^T of half the batch (two chunks from 2048 rows on, each padded to
    # whole blocks of 16 rows), gz's W copy (P, N_in, N_out), gW's segment sums, and xg^T, yg^T of a
    # chunk unless grad_x and grad_y can hold them: when every chunk's rows are whole blocks
    # (B = 3008: chunks of 1504), or always with fp32 data and bf16 products (the gradients twice
    # as wide); not at B = 3007 in tf32 or bfloat16
    on = ws()
    fc._C._fcgp_sm90_bwd(False)
    off = ws()
    fc._C._fcgp_sm90_bwd(True)
    assert on != off and on >= alg.D * n_out * (B // 2) * size + alg.P * n_in * n_out * size
    transposes = 2 * alg.D * n_in * (B // 2) * size
    gap = ws(B - 1) - on  # less by the other buffers' one row (the norm statistics: bytes)
    assert gap >= transposes - 4096 if mode != "fp32-bf16" else abs(gap) < transposes // 2
    # gW tiles in segments of the batch summed in order, no atomics: bitwise the same from run to run
    _assert_backward_repeats(alg, *make_fcgp(alg, (B,), n_in, n_out, dtype, 7), precision)


def _grads(alg, x, y, w, gout, precision):
    """The torch op's three gradients at (x, y, w, gout), normalized."""
    leaves = [t.clone().requires_grad_(True) for t in (x, y, w)]
    fc.gelu_fcgp_norm(*leaves, alg, True, precision=precision).backward(gout)
    return [t.grad for t in leaves]


def _assert_backward_repeats(alg, x, y, w, gout, precision):
    """The torch op's three gradients at (x, y, w, gout) twice: bitwise the same."""
    first, second = (_grads(alg, x, y, w, gout, precision) for _ in range(2))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


def _off_by_4(t):
    """An empty tensor of t's shape and dtype 4 bytes past a 16-byte boundary."""
    flat = torch.empty(t.numel() * t.element_size() + 16, dtype=torch.uint8, device="cuda")
    return flat[4:4 + t.numel() * t.element_size()].view(t.dtype).view(t.shape)


def _normalized_forward(alg, batch, n_in, n_out, mode, tag):
    """Fresh FCGP inputs (seeded by tag) and their normalized forward on the Hopper path:
    (x, y, w, g, precision, its code, out, norms, stream)."""
    dtype, precision = FCGP_MODES[mode][:2]
    prec = PRECISION_CODES[precision]
    x, y, w, g = make_fcgp(alg, (batch,), n_in, n_out, dtype, seed_for(tag) % 997)
    s = stream_handle()
    out, norms = torch.empty_like(g), torch.empty(batch, alg.G, device="cuda")
    fc._C.fcgp_forward(x, y, w, alg.id, True, prec, out=out, norms=norms, stream=s)
    return x, y, w, g, precision, prec, out, norms, s


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward_grads_as_scratch(bwd_on, alg, mode):
    # gW's transposed operands lie in grad_x, grad_y when both are 16-byte aligned (the sizes
    # workspace_size gives assume so); given gradients 4 bytes off that: correct all the same
    # (the launcher sizes a larger workspace itself), and a workspace of workspace_size's bytes
    # is refused with an error naming it, not overrun
    B, n_in, n_out = 256, 64, 40
    x, y, w, g, _, prec, out, norms, s = _normalized_forward(alg, B, n_in, n_out, mode,
                                                             f"scratch/{alg.name}/{mode}")
    size = fc._C.workspace_size("fcgp", True, alg.id, DTYPE_NAMES[x.dtype], B, n_in, n_out, prec, True,
                                torch.cuda.current_device(), True)
    args = (g, x, y, w, alg.id, True, prec)

    aligned = fc._C.fcgp_backward(*args, norms=norms, out=out, workspace=torch.empty(size, dtype=torch.uint8,
                                  device="cuda"), stream=s)
    gx, gy = _off_by_4(x), _off_by_4(y)
    gw = torch.empty_like(w)
    fc._C.fcgp_backward(*args, norms=norms, out=out, grad_x=gx, grad_y=gy, grad_weight=gw, stream=s)
    for grads in (aligned, (gx, gy, gw)):
        assert_fcgp([None, *(torch.from_dlpack(t) for t in grads)], x, y, w, g, alg, True, mode)
    with pytest.raises(ValueError, match="workspace"):
        fc._C.fcgp_backward(*args, norms=norms, out=out, grad_x=_off_by_4(x), grad_y=_off_by_4(y),
                            grad_weight=torch.empty_like(w),
                            workspace=torch.empty(size, dtype=torch.uint8, device="cuda"), stream=s)


# In two passes (_C._fcgp_sm90_bwd_go_fused(2)), the norm's row statistics
# (norm_stats) and go^T's transpose run slice by slice, each slice's transpose right after its
# statistics (_C._fcgp_sm90_bwd_go_rows: 0, the default, a whole chunk at once; n rows). The same
# kernels do the same arithmetic for each row, so the gradients must be
# bitwise those of one slice a chunk for slices of 32 rows (the fewest), 96 (a short last slice;
# at B 2085 two chunks, the second of 1029 rows padded to 1040) and 1056 (B 2085's first chunk
# whole, the second too), from the saved output (the torch op) and from the recomputed o (the C
# call without out); and against the float64 einsum.
GO_SLICE_SHAPES = [
    pytest.param(200, 64, 104, id="B200-64-104"),
    pytest.param(66, 40, 45, id="B66-40-45"),
    pytest.param(2085, 64, 40, id="B2085-64-40"),
]


@pytest.fixture
def go_rows_kept(bwd_on):
    yield from _switched(fc._C._fcgp_sm90_bwd_go_rows, 0)


@pytest.fixture
def go_fused_kept(go_rows_kept):
    yield from _switched(fc._C._fcgp_sm90_bwd_go_fused, 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", GO_SLICE_SHAPES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward_go_slices(go_fused_kept, alg, batch, n_in, n_out, mode):
    assert fc._C._fcgp_sm90_bwd_go_fused(2) == 2  # the two passes
    x, y, w, g, precision, prec, out, norms, s = _normalized_forward(
        alg, batch, n_in, n_out, mode, f"sm90-go-slices/{alg.name}/{batch}/{mode}")
    grads = {}
    for rows in (0, 32, 96, 1056):
        assert fc._C._fcgp_sm90_bwd_go_rows(rows) == rows
        from_o = fc._C.fcgp_backward(g, x, y, w, alg.id, True, prec, norms=norms, stream=s)
        grads[rows] = (_grads(alg, x, y, w, g, precision), [torch.from_dlpack(t) for t in from_o])
    for rows in (32, 96, 1056):
        for got, want in zip(grads[rows], grads[0], strict=True):
            assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), rows
    for found in grads[0]:
        assert_fcgp([None, *found], x, y, w, g, alg, True, mode)


# The one-pass statistics and go^T (go_rows; _C._fcgp_sm90_bwd_go_fused 1, where the default rule
# takes it for float32 data and for Cl(3,0)): a cluster of CTAs holds a block of 16 rows in shared
# memory, sums the rows' grade dots across the cluster, then forms go^T from what it holds (N_out
# up to 512; past that the two passes run). Both are run here in every cell. The dots are
# summed in another order than norm_stats sums them, so the gradients are checked against the
# float64 einsum under each, and bitwise the same from run to run; from the saved output (the torch
# op) and from the recomputed o (the C call without out); over the shapes above, with row and
# column tails, two chunks (B 2085, whose second chunk is not whole 16-row blocks), N_out 45 (CTAs
# of the cluster with no columns), and N_out 544 (past the one pass's reach).
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", GO_SLICE_SHAPES + [pytest.param(48, 32, 544, id="B48-32-544")])
@pytest.mark.parametrize("alg", ALGS)
def test_backward_go_fused(go_fused_kept, alg, batch, n_in, n_out, mode):
    x, y, w, g, precision, prec, out, norms, s = _normalized_forward(
        alg, batch, n_in, n_out, mode, f"sm90-go-fused/{alg.name}/{batch}/{mode}")

    def run(how):
        assert fc._C._fcgp_sm90_bwd_go_fused(how) == how
        from_o = fc._C.fcgp_backward(g, x, y, w, alg.id, True, prec, norms=norms, stream=s)
        return _grads(alg, x, y, w, g, precision), [torch.from_dlpack(t) for t in from_o]

    fused, again, two_pass = run(1), run(1), run(2)
    for got, want in zip(fused, again, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    for found in (*fused, *two_pass):
        assert_fcgp([None, *found], x, y, w, g, alg, True, mode)


# go_rows two adjacent columns a load (_C._fcgp_sm90_bwd_go_pairs, on by default: go_rows' CW 2) at
# D 8 (Cl(3,0); D 4 keeps CW 1, which measured faster there), where a CTA of its cluster takes two
# 32-column tiles (N_out 257 to 512), N_out is even and grad_out and the output are aligned to two
# elements; one column (CW 1) otherwise or when off. Only the loads differ and the dots are summed
# in CW 1's order, so the gradients must be bitwise the same under both, from the saved output (the
# torch op) and from the recomputed o (the C call without out), and within the float64 einsum's
# tolerance; the profiler's kernel names show which form ran (its last template argument). Shapes:
# N_out 300 (a CTA's second tile part empty, the cluster's last CTAs without columns) with row
# tails, two chunks at B 2085 (the second not whole 16-row blocks), N_out 512 (every CTA two whole
# tiles); N_out 301 (odd: CW 1 under both); at Cl(2,0) CW 1 under both.
@pytest.fixture
def go_pairs_kept(go_fused_kept):
    yield from _switched(fc._C._fcgp_sm90_bwd_go_pairs, True)


def _go_rows_forms(names):
    """go_rows' CW (its last template argument) of the kernels named."""
    return _last_template_args(n for n in names if "go_rows<" in n)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", [
    pytest.param(70, 40, 300, id="B70-40-300"),
    pytest.param(2085, 32, 512, id="B2085-32-512"),
    pytest.param(37, 24, 301, id="B37-24-301"),
])
@pytest.mark.parametrize("alg", ALGS)
def test_backward_go_pairs(go_pairs_kept, alg, batch, n_in, n_out, mode):
    x, y, w, g, precision, prec, out, norms, s = _normalized_forward(
        alg, batch, n_in, n_out, mode, f"sm90-go-pairs/{alg.name}/{batch}/{n_out}/{mode}")
    assert fc._C._fcgp_sm90_bwd_go_fused(1) == 1  # the one pass, go_rows

    def run(pairs):
        assert fc._C._fcgp_sm90_bwd_go_pairs(pairs) == pairs
        found = {}

        def both():
            from_o = fc._C.fcgp_backward(g, x, y, w, alg.id, True, prec, norms=norms, stream=s)
            found["grads"] = _grads(alg, x, y, w, g, precision), [torch.from_dlpack(t) for t in from_o]

        return found, _go_rows_forms(_kernel_names(both))

    (paired, forms_on), (single, forms_off) = run(True), run(False)
    assert forms_off == {"1"}
    assert forms_on == ({"2"} if alg.D == 8 and n_out % 2 == 0 else {"1"})
    for got, want in zip(paired["grads"], single["grads"], strict=True):
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    for found in paired["grads"]:
        assert_fcgp([None, *found], x, y, w, g, alg, True, mode)


# The backward's kernels as one programmatic chain (_C._fcgp_sm90_bwd_pdl, on by default; pdl.cuh):
# xg^T's transpose and the norm's statistics of a chunk may run beside the chunk before's gz, every
# other kernel waits for the one before it. The same kernels do the same arithmetic either way, so
# the gradients must be bitwise those of plain stream order: over two batch chunks (B 2085: xg^T,
# yg^T in grad_x, grad_y's rows of each chunk; with gradients 4 bytes off a 16-byte boundary, in
# the workspace instead), from the saved output and from the recomputed o, with the one-pass
# go_rows and with the two passes (whole chunks, and slices of 96 rows: statistics and transpose
# interleaved); and against the float64 einsum.
@pytest.fixture
def pdl_kept(go_fused_kept):
    yield from _switched(fc._C._fcgp_sm90_bwd_pdl, True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", GO_SLICE_SHAPES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward_pdl_chain(pdl_kept, alg, batch, n_in, n_out, mode):
    x, y, w, g, precision, prec, out, norms, s = _normalized_forward(
        alg, batch, n_in, n_out, mode, f"sm90-pdl/{alg.name}/{batch}/{mode}")

    def run(pdl, how, rows):
        assert fc._C._fcgp_sm90_bwd_pdl(pdl) == pdl and fc._C._fcgp_sm90_bwd_go_rows(rows) == rows
        assert fc._C._fcgp_sm90_bwd_go_fused(how) == how
        from_o = fc._C.fcgp_backward(g, x, y, w, alg.id, True, prec, norms=norms, stream=s)
        gx, gy, gw = _off_by_4(x), _off_by_4(y), torch.empty_like(w)
        fc._C.fcgp_backward(g, x, y, w, alg.id, True, prec, norms=norms, out=out, grad_x=gx, grad_y=gy,
                            grad_weight=gw, stream=s)
        return (_grads(alg, x, y, w, g, precision), [torch.from_dlpack(t) for t in from_o], [gx, gy, gw])

    ways = [(1, 0), (2, 0), (2, 96)]  # (one pass or two, slice rows)
    runs = {(pdl, *way): run(pdl, *way) for pdl in (False, True) for way in ways}
    for way in ways:
        for got, want in zip(runs[(True, *way)], runs[(False, *way)], strict=True):
            assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), way
    for found in (*runs[(True, 1, 0)], *runs[(True, 2, 0)]):
        assert_fcgp([None, *found], x, y, w, g, alg, True, mode)


# The weight gradient one path a tile of 128 rows of N_in x 256 columns of N_out (gw_pseq_kernel,
# fcgp_wgmma_gw_pseq.cuh; _C._fcgp_sm90_gw_pseq 1, and by the rule, 0, the default) where N_in is a
# multiple of 128 and N_out of 256; elsewhere, and under setting 2, the path-group kernel
# (test_backward_gw_by_the_rule). Units (path, row block, column block) in rounds of whole units
# and in batch segments summed in a fixed order through slots, the segment count weighing a slot's
# read-back; or, where it costs less by their paths' step costs (fcgp_gw_sched.h, PseqSched; not
# under setting 3), one to three rounds' worth whole, heaviest first, each to the least-loaded
# block, or fewer units than blocks in one round, each cut into as many segments as its cost asks.
# On 132 SMs: B 70 (5 steps): Cl(2,0) rounds, Cl(3,0) whole units at 512 x 512; B 2085 (two batch
# chunks of ~66 steps, the second adding the first's fp32 sum, gW's operands in the workspace): at
# 128 x 256 10 and 20 units in rounds of segments; at 512 x 512 Cl(2,0)'s 80 units in one round of
# weighted segments, Cl(3,0)'s 160 whole. Every gradient against the float64 einsum under each setting, and
# bitwise from run to run under 1. The settings split the batch sums differently, so their bits
# differ.
PSEQ_SHAPES = [
    pytest.param(70, 128, 256, id="B70-128-256"),
    pytest.param(70, 512, 512, id="B70-512-512"),
    pytest.param(2085, 128, 256, id="B2085-128-256"),
    pytest.param(2085, 512, 512, id="B2085-512-512"),
]
# _C._fcgp_sm90_gw_pseq's settings: one path a tile where it fits; path groups; one path a tile in rounds
PSEQ_ON, PSEQ_OFF, PSEQ_ROUNDS = 1, 2, 3


@pytest.fixture(params=[PSEQ_ON, PSEQ_ROUNDS, PSEQ_OFF], ids=["pseq", "pseq-rounds", "groups"])
def pseq_either(bwd_on, request):
    yield from _switched(fc._C._fcgp_sm90_gw_pseq, request.param)


@pytest.fixture
def pseq_on(bwd_on):
    yield from _switched(fc._C._fcgp_sm90_gw_pseq, PSEQ_ON)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("batch,n_in,n_out", PSEQ_SHAPES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward_gw_one_path_a_tile(pseq_either, alg, batch, n_in, n_out, mode):
    seed = seed_for(f"sm90-pseq/{alg.name}/{batch}/{n_in}/{mode}") % 997
    check_fcgp(alg, (batch,), n_in, n_out, mode, True, seed=seed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alg", ALGS)
def test_backward_gw_one_path_a_tile_repeats(pseq_on, alg, mode):
    # B 2048: two chunks of whole blocks, so gW's operands lie in grad_x, grad_y's rows when those
    # are 16-byte aligned, in the workspace when 4 bytes off: the same kernels on the same values,
    # so the same bits; and the torch op's gradients bitwise the same from run to run (at 512 x
    # 512 Cl(2,0) in one round of weighted segments, Cl(3,0) in whole units)
    B, n_in, n_out = 2048, 512, 512
    x, y, w, g, precision, prec, out, norms, s = _normalized_forward(alg, B, n_in, n_out, mode,
                                                                     f"pseq-repeat/{alg.name}/{mode}")
    args = (g, x, y, w, alg.id, True, prec)
    aligned = [torch.empty_like(t) for t in (x, y, w)]
    fc._C.fcgp_backward(*args, norms=norms, out=out, grad_x=aligned[0], grad_y=aligned[1], grad_weight=aligned[2],
                        stream=s)
    off = [_off_by_4(x), _off_by_4(y), torch.empty_like(w)]
    fc._C.fcgp_backward(*args, norms=norms, out=out, grad_x=off[0], grad_y=off[1], grad_weight=off[2], stream=s)
    assert all(torch.equal(a, b) for a, b in zip(aligned, off, strict=True))
    _assert_backward_repeats(alg, x, y, w, g, precision)


def _gw_kernels(fn):
    """The weight-gradient kernels fn launches, by torch.profiler's names: {"gw_pseq", "gw_tma"}."""
    return {k for n in _kernel_names(fn) for k in ("gw_pseq", "gw_tma") if f"{k}_kernel" in n}


@pytest.mark.parametrize("n_in,n_out", [(512, 512), (128, 256), (512, 320)])
@pytest.mark.parametrize("alg", ALGS)
def test_backward_gw_by_the_rule(bwd_on, alg, n_in, n_out):
    # settings 0 (the rule, the default), 1 and 3: one path a tile where the shapes allow, path
    # groups elsewhere (N_out 320, not a multiple of 256); setting 2: path groups everywhere
    x, y, w, g, _, prec, out, norms, s = _normalized_forward(alg, 96, n_in, n_out, "bfloat16",
                                                             f"pseq-rule/{alg.name}/{n_in}/{n_out}")
    fits = n_in % 128 == 0 and n_out % 256 == 0

    def backward():
        fc._C.fcgp_backward(g, x, y, w, alg.id, True, prec, norms=norms, out=out, stream=s)

    before = fc._C._fcgp_sm90_gw_pseq()
    try:
        for setting, pseq in ((0, fits), (PSEQ_ON, fits), (PSEQ_ROUNDS, fits), (PSEQ_OFF, False)):
            assert fc._C._fcgp_sm90_gw_pseq(setting) == setting
            assert _gw_kernels(backward) == {"gw_pseq" if pseq else "gw_tma"}, setting
    finally:
        fc._C._fcgp_sm90_gw_pseq(before)
