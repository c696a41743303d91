"""Time every feasible launch shape (rows a block x input stages) of the resident CUDA SGP
kernels at a few shapes, to check the default choice of sgp_launch.cuh's make_config.

    python benchmarks/tune_sgp.py [--cells issue|ALG,DTYPE,B,N ...] [--reps 20] [--out FILE]

Each shape is forced with flashclifford._C._sgp_shape_override (tuning only) and timed the
harness's way (L2 flushed, the stream held, CUDA events, median). Prints one line a shape,
the default marked '*', as % of the device's copy bandwidth measured in the same run
(forward: x, y, out; backward: x, y, grad_out, grad_x, grad_y). Needs a GPU.
"""

import argparse
import json
import sys
from types import SimpleNamespace

import torch

import flashclifford as fc
from flashclifford.bench.timing import Flusher, copy_bandwidth, measure

ISSUE_CELLS = [
    (alg, dt, B, N)
    for alg in (0, 1)
    for dt in ("float32", "bfloat16")
    for B, N in ((4096, 512), (8192, 1024))
]


def parse_cells(items):
    if not items or items == ["issue"]:
        return ISSUE_CELLS
    cells = []
    for it in items:
        a, dt, B, N = it.split(",")
        cells.append((int(a), dt, int(B), int(N)))
    return cells


def sgp_buffers(alg, dtype, B, N):
    """Seeded CUDA inputs x, y, go (D, B, N) and w (N, P) of one cell, the outputs and
    gradients they need (out, norms, gx, gy, gw), and the current stream s."""
    table = fc._C.algebra_table(alg)
    D, P, G = table["D"], table["P"], table["G"]
    g = torch.Generator(device="cuda").manual_seed(0)
    dt = getattr(torch, dtype)
    x, y, go = (torch.randn(D, B, N, device="cuda", generator=g).to(dt) for _ in range(3))
    w = torch.randn(N, P, device="cuda", generator=g).to(dt)
    norms = torch.empty(B, G, device="cuda", dtype=torch.float64 if dt == torch.float64 else torch.float32)
    return SimpleNamespace(x=x, y=y, go=go, w=w, out=torch.empty_like(x), norms=norms, gx=torch.empty_like(x),
                           gy=torch.empty_like(x), gw=torch.empty_like(w),
                           s=torch.cuda.current_stream().cuda_stream)


def make_calls(alg, dtype, B, N):
    b = sgp_buffers(alg, dtype, B, N)
    ws = [torch.empty(0, dtype=torch.uint8, device="cuda")]

    def fit_workspace():  # the forced shape's grid sets the backward's partials
        need = fc._C.workspace_size("sgp", True, alg, dtype, B, N, N)
        if ws[0].numel() < need:
            ws[0] = torch.empty(need, dtype=torch.uint8, device="cuda")

    def fwd():
        fc._C.sgp_forward(b.x, b.y, b.w, alg, True, out=b.out, norms=b.norms, stream=b.s)

    def bwd():
        fc._C.sgp_backward(b.go, b.x, b.y, b.w, alg, True, norms=b.norms, grad_x=b.gx, grad_y=b.gy,
                           grad_weight=b.gw, workspace=ws[0], stream=b.s)

    fwd()
    return {"fwd": (fwd, 3), "bwd": (bwd, 5)}, b.x.numel() * b.x.element_size(), fit_workspace


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=["issue"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None, help="JSON lines of every measurement")
    args = ap.parse_args(argv)
    bw = copy_bandwidth(torch, cuda=True)["bytes_per_s"]
    print(f"# {torch.cuda.get_device_name(0)}, copy {bw / 1e9:.0f} GB/s")
    flush = Flusher(torch, "cuda")
    rows = []
    for alg, dtype, B, N in parse_cells(args.cells):
        calls, pass_bytes, fit_workspace = make_calls(alg, dtype, B, N)
        for what, (fn, passes) in calls.items():
            bwd = what == "bwd"
            fc._C._sgp_shape_override(0, 0)
            default = fc._C._sgp_config(bwd, alg, dtype, B, N)
            seen = set()
            for ty in range(1, 9):
                for S in range(1, 5):
                    fc._C._sgp_shape_override(ty, S)
                    cfg = fc._C._sgp_config(bwd, alg, dtype, B, N)
                    if cfg[3] != 0 or (cfg[1], cfg[2]) != (ty, S) or cfg in seen:
                        continue
                    seen.add(cfg)
                    fit_workspace()
                    t = measure(
                        fn, torch=torch, cuda=True, warmup=3, reps=args.reps, max_seconds=0.5, flush=flush
                    )
                    pct = 100 * passes * pass_bytes / t.p50 / bw
                    mark = "*" if cfg == default else " "
                    tx, _, _, _, grid, smem = cfg
                    print(
                        f"{mark} alg {alg} {dtype:8s} {B}x{N} {what} tx {tx:4d} ty {ty} S {S} grid {grid:4d} "
                        f"smem {smem // 1024:3d}K  {t.p50 * 1e6:8.1f} us  {pct:5.1f}%",
                        flush=True,
                    )
                    rows.append(
                        dict(
                            alg=alg,
                            dtype=dtype,
                            B=B,
                            N=N,
                            what=what,
                            tx=tx,
                            ty=ty,
                            stages=S,
                            grid=grid,
                            smem=smem,
                            us=t.p50 * 1e6,
                            pct_copy=pct,
                            default=cfg == default,
                        )
                    )
            fc._C._sgp_shape_override(0, 0)
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
