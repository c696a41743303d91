"""What the parts of the CUDA SGP cost, next to the streaming ceiling at the same bytes.

    python benchmarks/sgp_parts.py [--cells issue|ALG,DTYPE,B,N ...] [--reps 20]

For each cell: torch.add(x, y, out=o) over the same (D, B, N) tensors (three passes, the
best a plain elementwise kernel does at this size), then the SGP forward and backward as
the library launches them, with the GELU gate and the normalisation each switched off (the
difference is what that part costs). Timed the harness's way (L2 flushed by a read, or with
--dirty by zeroing, the stream held, CUDA events, median); % of the device's copy bandwidth
measured in the same run. Needs a GPU.
"""

import argparse
import sys

import torch

import flashclifford as fc
from flashclifford.bench.timing import Flusher, copy_bandwidth, measure

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tune_sgp import parse_cells, sgp_buffers  # noqa: E402


def cases(alg, dtype, B, N):
    """[(name, fn, passes)] for one cell, and the bytes of one pass."""
    b = sgp_buffers(alg, dtype, B, N)
    x, y, out = b.x, b.y, b.out
    ws = torch.empty(fc._C.workspace_size("sgp", True, alg, dtype, B, N, N), dtype=torch.uint8, device="cuda")

    def fwd(normalize, gate):
        return lambda: fc._C.sgp_forward(x, y, b.w, alg, normalize, out=out, norms=b.norms, stream=b.s,
                                         gate=gate)

    def bwd(normalize, gate):
        fwd(normalize, gate)()  # the norms of this setting
        return lambda: fc._C.sgp_backward(
            b.go, x, y, b.w, alg, normalize, norms=b.norms, grad_x=b.gx, grad_y=b.gy, grad_weight=b.gw,
            workspace=ws, stream=b.s, gate=gate,
        )  # fmt: skip

    return [
        ("add x+y", lambda: torch.add(x, y, out=out), 3),
        ("copy x", lambda: out.copy_(x), 2),
        ("fwd", fwd(True, 1), 3),
        ("fwd no gate", fwd(True, 0), 3),
        ("fwd no norm", fwd(False, 1), 3),
        ("fwd neither", fwd(False, 0), 3),
        ("bwd", bwd(True, 1), 5),
        ("bwd no gate", bwd(True, 0), 5),
        ("bwd no norm", bwd(False, 1), 5),
    ], x.numel() * x.element_size()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=["issue"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="only torch.add, the forward and the backward")
    ap.add_argument("--dirty", action="store_true", help="flush the L2 by zeroing (flush-dirty)")
    args = ap.parse_args(argv)
    bw = copy_bandwidth(torch, cuda=True)["bytes_per_s"]
    how = "zeroing" if args.dirty else "reading"
    print(f"# {torch.cuda.get_device_name(0)}, copy {bw / 1e9:.0f} GB/s, L2 flushed by {how}")
    flush = Flusher(torch, "cuda", dirty=args.dirty)
    for alg, dtype, B, N in parse_cells(args.cells):
        todo, pass_bytes = cases(alg, dtype, B, N)
        if args.quick:
            todo = [c for c in todo if c[0] in ("add x+y", "fwd", "bwd")]
        for name, fn, passes in todo:
            t = measure(fn, torch=torch, cuda=True, warmup=3, reps=args.reps, max_seconds=0.5, flush=flush)
            pct = 100 * passes * pass_bytes / t.p50 / bw
            print(f"alg {alg} {dtype:8s} {B}x{N} {name:12s} {t.p50 * 1e6:8.1f} us  {pct:5.1f}%", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
