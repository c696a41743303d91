"""Where the host time of one SGP call goes (issue 3: <= 25 us a forward call through the
torch op at Cl(3,0), B=1024, N=128, without CUDA graphs).

    python benchmarks/host_overhead.py [device]

Each line is the wall time a call of that layer takes in a loop of 2000 calls with one
synchronisation at the end; the kernels at this size take a few microseconds, so the loop
is host-bound and the difference between lines is the cost of that layer.
"""

import sys
import time

import torch

import flashclifford as fc


def per_call(fn, n=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    return (time.perf_counter() - t) / n * 1e6


def main(device):
    alg, B, N = fc.Algebra(3), 1024, 128
    x, y = (torch.randn(alg.D, B, N, device=device) for _ in range(2))
    w = torch.randn(N, alg.P, device=device)
    out, norms = torch.empty_like(x), torch.empty(B, alg.G, device=device)
    s = torch.cuda.current_stream().cuda_stream if device == "cuda" else None
    xg, yg, wg = (t.clone().requires_grad_() for t in (x, y, w))
    g = torch.ones_like(x)
    rows = [
        ("torch: x + 1 (reference)", lambda: x + 1),
        ("torch.empty_like x2", lambda: (torch.empty_like(x), torch.empty(B, alg.G, device=device))),
        ("_C.sgp_forward, outputs given", lambda: fc._C.sgp_forward(x, y, w, alg.id, True, out=out,
                                                                     norms=norms, stream=s)),
        ("ops.sgp_forward (allocates)", lambda: fc.ops.sgp_forward(x, y, w, alg, stream=s)),
        ("gelu_sgp_norm, no grad", lambda: fc.gelu_sgp_norm(x, y, w, alg)),
        ("gelu_sgp_norm, inputs need grad", lambda: fc.gelu_sgp_norm(xg, yg, wg, alg)),
        ("gelu_sgp_norm fwd + backward", lambda: fc.gelu_sgp_norm(xg, yg, wg, alg).backward(g)),
    ]
    for name, fn in rows:
        print(f"{name:40s} {per_call(fn):8.1f} us")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ("cuda" if torch.cuda.is_available() else "cpu"))
