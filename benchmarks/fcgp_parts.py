"""What the parts of the CUDA FCGP cost, beside torch.bmm of the same products.

    python benchmarks/fcgp_parts.py [--cells ALG,DTYPE,B,N ...] [--reps 20] [--kernels] [--timeline | --once]

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
little about which of them the call waits for.)
"""

import argparse
import math
import re
import sys

import torch

import flashclifford as fc
from flashclifford.bench.timing import Flusher, measure

CELLS = ["2,float32,4096,512", "3,float32,4096,512", "2,bfloat16,4096,512", "3,bfloat16,4096,512"]


def cases(n, dtype, B, N):
    """[(name, fn)] for one cell of Cl(n,0)."""
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
        fc._C.fcgp_forward(x, y, w, alg, True, prec, out=out, norms=norms, workspace=ws_f, stream=s)

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
        ("backward", bwd),
    ]


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


def timeline(name, fn, calls=3):
    """Each kernel's start, end and duration (us) within one call of fn, relative to the call's
    first kernel, from torch.profiler's trace (device timestamps): the median call of `calls` by
    span. A kernel launched early under the chain shows its wait inside its duration; `gap` is
    the time from the latest end before it to its start (negative: it overlaps)."""
    import json
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(calls):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
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
        if ks:
            runs.append(ks)
    if not runs:
        print(f"    {name:8s} (no kernels in the trace)")
        return
    runs.sort(key=lambda ks: max(t + d for t, d, _ in ks) - ks[0][0])
    ks = runs[len(runs) // 2]
    t0, last = ks[0][0], ks[0][0]
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
    ap.add_argument("--once", action="store_true", help="one untimed forward and backward a cell (for ncu)")
    args = ap.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = True
    flush = Flusher(torch, "cuda")
    sw = f"Hopper forward {fc._C._fcgp_sm90()}, backward {fc._C._fcgp_sm90_bwd()}"
    print(f"# {torch.cuda.get_device_name(0)}; {sw}")
    for cell in args.cells:
        alg, dtype, B, N = cell.split(",")
        alg, B, N = int(alg), int(B), int(N)
        for name, fn in cases(alg, dtype, B, N):
            if args.once:
                if name != "torch.bmm":
                    fn()
                continue
            t = measure(fn, torch=torch, cuda=True, warmup=3, reps=args.reps, max_seconds=0.5, flush=flush)
            print(f"Cl({alg},0) {dtype:8s} {B}x{N} {name:14s} {t.p50 * 1e6:9.1f} us", flush=True)
            if args.kernels and name != "torch.bmm":
                kernel_times(name, fn)
            if args.timeline and name != "torch.bmm":
                timeline(name, fn)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
