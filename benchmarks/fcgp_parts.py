"""What the parts of the CUDA FCGP cost, beside torch.bmm of the same products.

    python benchmarks/fcgp_parts.py [--cells ALG,DTYPE,B,N ...] [--reps 20] [--kernels]
                                    [--timeline | --timeline-unheld | --once] [--no-norm]

For each cell (default: issue 4's, Cl(2,0) and Cl(3,0), float32 with tf32 products and
bfloat16, B 4096, N 512, normalize): torch.bmm of the T' products (the yardstick), the forward
and the backward, on the Hopper kernels' current switches (_C._fcgp_sm90, _C._fcgp_sm90_bwd;
run it with FLASHCLIFFORD_FCGP_SM90=0 / FLASHCLIFFORD_FCGP_SM90_BWD=0 to compare) through the
raw ops with workspaces and outputs given (the backward also the forward's out and norms, as the
torch op gives them). Timed the harness's way (L2 flushed by a read, the
stream held, CUDA events, median). Needs a GPU. (The raw backward computes all three gradients,
allocating any not given, so it cannot time one gradient alone: --kernels adds torch.profiler's
per-kernel times of the forward and the backward, which can. --once runs the forward and the
backward of each cell once, untimed: the run to profile under ncu, as gpu_check.sh's ncu_fcgp
stage does. --timeline prints each kernel's start and end within one call, from the profiler's
trace: under the backward's programmatic chain the kernels overlap, so their summed times say
little about which of them the call waits for. The traced call runs as the harness times one: L2
flushed, the stream held by a spin kernel while the call is queued, times from the spin's end, so
no gap of the host's launches shows (without the hold the first ~30 us and a gap or two were the
host's: NOTES_FCGP.md session 40); --timeline-unheld traces it as it comes.)
"""

import argparse
import math
import re
import sys

import torch

import flashclifford as fc
from flashclifford.bench.timing import Flusher, measure

CELLS = ["2,float32,4096,512", "3,float32,4096,512", "2,bfloat16,4096,512", "3,bfloat16,4096,512"]


def cases(n, dtype, B, N, norm=True):
    """[(name, fn)] for one cell of Cl(n,0); without norm, the forward alone (no grade norm, so no
    norm epilogue: what that epilogue costs is the difference)."""
    a = fc.Algebra(n)
    alg = a.id  # the raw ops take the kernel id
    dt = getattr(torch, dtype)
    prec = 1 if dt == torch.float32 else 0  # tf32 for float32
    g = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device="cuda") * scale).to(dt)

    x, y, go = randn(a.D, B, N), randn(a.D, B, N), randn(a.D, B, N)
    w = randn(a.P, N, N, scale=1 / math.sqrt(N))
    out, norms = torch.empty_like(go), torch.empty(B, a.G, device="cuda")
    gx, gy, gw = torch.empty_like(x), torch.empty_like(y), torch.empty_like(w)
    dev = torch.cuda.current_device()
    # the backward as the torch op runs it: given the forward's out and norms (no recomputed product)
    ws_f, ws_b = (torch.empty(fc._C.workspace_size("fcgp", b, alg, dtype, B, N, N, prec, True, dev, b),
                              dtype=torch.uint8, device="cuda") for b in (False, True))
    s = torch.cuda.current_stream().cuda_stream

    def fwd():
        fc._C.fcgp_forward(x, y, w, alg, norm, prec, out=out, norms=norms if norm else None, workspace=ws_f,
                           stream=s)

    def bwd():
        fc._C.fcgp_backward(go, x, y, w, alg, True, prec, norms=norms, grad_x=gx, grad_y=gy, grad_weight=gw,
                            workspace=ws_b, stream=s, out=out)

    # the yardstick: T' products (B x N) @ (N x N) in the same precision
    A = torch.randn(pairs(alg), B, N, device="cuda").to(dt)
    Wb = torch.randn(A.shape[0], N, N, device="cuda").to(dt)
    C = torch.empty(A.shape[0], B, N, device="cuda", dtype=dt)
    fwd()  # the norms backward reads
    return [
        ("torch.bmm", lambda: torch.bmm(A, Wb, out=C)),
        ("forward", fwd),
    ] + ([("backward", bwd)] if norm else [])


def kernel_times(name, fn, reps=5):
    """Each kernel's mean device time over `reps` calls of fn, from torch.profiler (no L2 flush:
    the kernels of one call run back to back, as in training)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    total = 0.0
    for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
        if ev.device_time_total <= 0:
            continue
        us = ev.device_time_total / reps
        total += us
        short = re.sub(r"<.*", "", ev.key).split("::")[-1][:40]
        print(f"    {name:8s} {short:40s} x{ev.count // reps:<2d} {us:9.1f} us")
    print(f"    {name:8s} {'(sum of kernels)':40s}     {total:9.1f} us")


def timeline(name, fn, calls=3, flush=None, hold_s=0.0):
    """Each kernel's start, end and duration (us) within one call of fn, from torch.profiler's
    trace (device timestamps): the median call of `calls` by span. With hold_s, as `measure`
    times a call: flush() (the L2), then a spin kernel of hold_s seconds while fn's kernels are
    queued, times from the spin's end (the moment the harness's start event fires); else from
    the call's first kernel. A kernel launched early under the chain shows its wait inside its
    duration; `gap` is the time from the latest end before it to its start (negative: it
    overlaps)."""
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    from flashclifford.bench.timing import _sleep_cycles_per_second

    fn()
    torch.cuda.synchronize()
    spin = int(hold_s * _sleep_cycles_per_second(torch)) if hold_s > 0 else 0
    runs = []
    for _ in range(calls):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            if spin:
                flush()
                torch.cuda._sleep(spin)  # fn's kernels are queued while this spins
            fn()
            torch.cuda.synchronize()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.unlink(path)
        ks = sorted((float(e["ts"]), float(e.get("dur", 0.0)), e["name"]) for e in trace.get("traceEvents", [])
                    if e.get("cat") in ("kernel", "gpu_memset"))
        t0 = ks[0][0] if ks else 0.0
        if spin:  # the call's kernels are those after the spin, timed from its end
            at = [i for i, (_, _, k) in enumerate(ks) if "spin_kernel" in k]
            if not at:
                print(f"    {name:8s} (no spin kernel in the trace)")
                return
            t0 = ks[at[-1]][0] + ks[at[-1]][1]
            ks = ks[at[-1] + 1:]
        if ks:
            runs.append((t0, ks))
    if not runs:
        print(f"    {name:8s} (no kernels in the trace)")
        return
    runs.sort(key=lambda r: max(t + d for t, d, _ in r[1]) - r[0])
    t0, ks = runs[len(runs) // 2]
    last = t0
    print(f"    {name:8s} {'kernel':40s} {'start':>8s} {'end':>8s} {'dur':>8s} {'gap':>8s}")
    for t, d, k in ks:
        short = re.sub(r"<.*", "", k).split("::")[-1][:40]
        print(f"    {name:8s} {short:40s} {t - t0:8.1f} {t + d - t0:8.1f} {d:8.1f} {t - last:8.1f}")
        last = max(last, t + d)
    print(f"    {name:8s} {'(span)':40s} {0.0:8.1f} {last - t0:8.1f}")


def pairs(alg):
    """T': the distinct (output component, path) pairs of the kernel algebra's terms."""
    return len({(t[1], t[4]) for t in fc._C.algebra_table(alg)["terms"]})


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=CELLS)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--kernels", action="store_true", help="also each kernel's time (torch.profiler)")
    ap.add_argument("--timeline", action="store_true", help="also each kernel's start and end in one call")
    ap.add_argument("--timeline-unheld", action="store_true",
                    help="--timeline's call without the flush and the stream hold (the host's gaps show)")
    ap.add_argument("--once", action="store_true", help="one untimed forward and backward a cell (for ncu)")
    ap.add_argument("--no-norm", action="store_true", help="the forward alone, without the grade norm")
    args = ap.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = True
    flush = Flusher(torch, "cuda")
    sw = f"Hopper forward {fc._C._fcgp_sm90()}, backward {fc._C._fcgp_sm90_bwd()}"
    print(f"# {torch.cuda.get_device_name(0)}; {sw}")
    for cell in args.cells:
        alg, dtype, B, N = cell.split(",")
        alg, B, N = int(alg), int(B), int(N)
        for name, fn in cases(alg, dtype, B, N, norm=not args.no_norm):
            if args.once:
                if name != "torch.bmm":
                    fn()
                continue
            t = measure(fn, torch=torch, cuda=True, warmup=3, reps=args.reps, max_seconds=0.5, flush=flush)
            print(f"Cl({alg},0) {dtype:8s} {B}x{N} {name:14s} {t.p50 * 1e6:9.1f} us", flush=True)
            if args.kernels and name != "torch.bmm":
                kernel_times(name, fn)
            if (args.timeline or args.timeline_unheld) and name != "torch.bmm":
                # held longer than `measure` holds it (3 calls, at least 2 ms): the profiler slows the launches
                hold = 0.0 if args.timeline_unheld else min(max(3 * t.p50, 2e-3), 0.05)
                timeline(name, fn, flush=flush, hold_s=hold)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
