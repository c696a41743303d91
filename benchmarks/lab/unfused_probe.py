"""What an unfused FCGP could reach, with cuBLAS (torch) standing in for the GEMMs we would write.

The fused Hopper kernels form the pair products (forward, gW) or contract G (gz) inside the GEMM,
which keeps their tiles small (gz: every pair's G over 64 x 32 positions) or their consumers busy
(the forward: each step's A fragments). The alternative measured here: elementwise passes over
batch chunks small enough that what they write stays in the L2 (50 MB), and plain GEMMs between
them, each output component j one GEMM over its pairs side by side:
  forward: P_j = [pair products of j] (Bc, pairs_j x N_in), out_j = P_j @ Wcat_j (pairs_j N_in, N_out)
  gz:      G_j = go_j @ Wcat_j^T (Bc, pairs_j N_in), then a pass reading G (the epilogue's stand-in)
  gW:      Wcat_j^grad += P_j^T @ go_j over the chunks (each chunk's bf16 product added into fp32)
The elementwise passes are torch stand-ins moving the same bytes (a broadcast product writing P,
a sum reading G), not the real arithmetic, so their times are floors only where torch's kernels
reach the L2's rate. Times: CUDA events, the L2 flushed before each whole pass over the batch.

  python3 benchmarks/lab/unfused_probe.py [--B 4096] [--N 512]
"""

import argparse
import statistics

import torch

from flashclifford.algebra import Algebra
from flashclifford.bench.impls import fc_pairs


def pairs_per_component(alg):
    pairs = fc_pairs(alg)
    return [sum(1 for (jj, _) in pairs if jj == c) for c in range(alg.cayley.shape[1])]


def timed(fn, flush, reps=15):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    fn()
    torch.cuda.synchronize()
    for a, b in ev:
        flush()
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=4096)
    ap.add_argument("--N", type=int, default=512)
    args = ap.parse_args()
    dev, dt, B, N = "cuda", torch.bfloat16, args.B, args.N
    scratch = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    flush = lambda: scratch.zero_()  # noqa: E731
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, B {B}, N {N}, bf16")
    for dim in (2, 3):
        alg = Algebra(dim)
        pj = pairs_per_component(alg)
        D, NP, Q = len(pj), sum(pj), max(pj)
        # every j padded to Q pairs (Cl(3,0)'s differ) so one bmm takes all components: the padded
        # work is counted in the TFLOPS below, so this over-states the GEMMs' time by NP / (D Q)
        Wcat = torch.randn(D, Q * N, N, device=dev).to(dt)
        x = torch.randn(D, B, N, device=dev).to(dt)
        y = torch.randn(D, B, N, device=dev).to(dt)
        assert Q <= D
        go = torch.randn(D, B, N, device=dev).to(dt)
        a = torch.randn(NP, B, N, device=dev).to(dt)
        b = torch.randn(NP, N, N, device=dev).to(dt)
        c = torch.empty(NP, B, N, device=dev, dtype=dt)
        t_bmm = timed(lambda: torch.bmm(a, b, out=c), flush)
        del a, c
        pad = D * Q / NP
        print(f"{alg.name}: D {D}, pairs {NP} ({pj}), padded x{pad:.2f}; torch.bmm yardstick {t_bmm:.1f} us")
        for Bc in (4096, 2048, 1024, 512):
            if Bc > B:
                continue
            n = B // Bc
            P = torch.empty(D, Bc, Q * N, device=dev, dtype=dt)
            G = torch.empty(D, Bc, Q * N, device=dev, dtype=dt)
            out = torch.empty(D, Bc, N, device=dev, dtype=dt)
            red = torch.empty(D, Bc, N, device=dev, dtype=dt)
            gw = torch.zeros(D, Q * N, N, device=dev, dtype=torch.float32)
            gwb = torch.empty(D, Q * N, N, device=dev, dtype=dt)

            def form(r):  # P's bytes from x's and y's chunks: a broadcast product (stand-in)
                xs, ys = x[:, r * Bc:(r + 1) * Bc], y[:Q, r * Bc:(r + 1) * Bc]
                torch.mul(xs.unsqueeze(2), ys.permute(1, 0, 2).unsqueeze(0), out=P.view(D, Bc, Q, N))

            def fwd():
                for r in range(n):
                    form(r)
                    torch.bmm(P, Wcat, out=out)

            def gz():
                for r in range(n):
                    torch.bmm(go[:, r * Bc:(r + 1) * Bc], Wcat.transpose(1, 2), out=G)
                    torch.sum(G.view(D, Bc, Q, N), dim=2, out=red)  # reads G (the epilogue's stand-in)

            def gz_gemm():
                for r in range(n):
                    torch.bmm(go[:, r * Bc:(r + 1) * Bc], Wcat.transpose(1, 2), out=G)

            def gw_pass():  # chunks: each chunk's product added into an fp32 gW (a W-sized pass each)
                for r in range(n):
                    form(r)
                    torch.bmm(P.transpose(1, 2), go[:, r * Bc:(r + 1) * Bc], out=gwb)
                    if n > 1:
                        gw.add_(gwb)

            def form_only():
                for r in range(n):
                    form(r)

            res = {k: timed(f, flush) for k, f in
                   (("fwd", fwd), ("form", form_only), ("gz", gz), ("gz_gemm", gz_gemm), ("gW", gw_pass))}
            tf = lambda us: 2.0 * D * Q * B * N * N / (us * 1e-6) / 1e12  # noqa: E731
            print(f"  chunk {Bc:5d} x{n}: fwd {res['fwd']:7.1f} us (form {res['form']:6.1f}), "
                  f"gz {res['gz']:7.1f} (GEMM alone {res['gz_gemm']:6.1f}, "
                  f"{tf(res['gz_gemm']):.0f} TFLOPS padded), "
                  f"gW {res['gW']:7.1f}; ratios to bmm: fwd {res['fwd'] / t_bmm:.2f}, "
                  f"gz {res['gz'] / t_bmm:.2f}, gW {res['gW'] / t_bmm:.2f}")
            del P, G, out, red, gw, gwb
        del Wcat, x, y, go, b
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
